// Package layout holds the module's rules of structure as tests.
package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/oauthflow/oauthflow"

// TestInternalPackagesNeverImportTheRoot: the mechanism under internal/ is
// imported by the library and never imports it back, directly or through
// another package (providers, mcpauth). Only the test kit (internal/testkit)
// and the programs (internal/cmd) build on the library.
func TestInternalPackagesNeverImportTheRoot(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, module+"/internal/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, deps, _ := strings.Cut(line, " ")
		rel := strings.TrimPrefix(pkg, module+"/")
		if strings.HasPrefix(rel, "internal/testkit/") || strings.HasPrefix(rel, "internal/cmd/") {
			continue
		}
		checked++
		for _, dep := range strings.Fields(deps) {
			if dep == module || strings.HasPrefix(dep, module+"/") && !strings.HasPrefix(dep, module+"/internal/") {
				t.Errorf("%s imports %s: a package of the mechanism never imports the library", rel, dep)
			}
		}
	}
	if checked < 3 {
		t.Fatalf("checked %d internal packages; the layout must have changed", checked)
	}
}

// TestExamplesImportOnlyPublicPackages: an example is copied into an app of
// its own, where the module's internal packages cannot be imported; so its
// code imports only what an app can.
func TestExamplesImportOnlyPublicPackages(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Imports " "}}`, module+"/examples/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, " ")
		checked++
		for _, imp := range strings.Fields(imports) {
			if strings.HasPrefix(imp, module+"/internal/") {
				t.Errorf("%s imports %s: an example imports only public packages", pkg, imp)
			}
		}
	}
	if checked < 3 {
		t.Fatalf("checked %d examples; the layout must have changed", checked)
	}
}
