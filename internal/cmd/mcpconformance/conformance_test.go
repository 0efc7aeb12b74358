package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// scenarios are the client auth scenarios of @modelcontextprotocol/conformance
// 0.2.0-alpha.12, all 33 of them, each run at the wire of a spec revision
// (--spec-version): the suite serves that revision's MCP server, and tells
// the client in MCP_CONFORMANCE_PROTOCOL_VERSION.
var scenarios = []struct {
	wire string
	// force runs scenarios that are on no revision's timeline (extensions)
	// at wire, as the suite's own run of a revision's requirements does.
	force bool
	names []string
}{
	// What the 2026-07-28 revision requires, at its stateless wire.
	{wire: "2026-07-28", names: []string{
		"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
		"auth/basic-cimd",
		"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
		"auth/scope-step-up", "auth/scope-retry-limit",
		"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
		"auth/pre-registration",
		"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
		"auth/authorization-server-migration",
		"auth/iss-supported", "auth/iss-not-advertised", "auth/iss-supported-missing", "auth/iss-wrong-issuer",
		"auth/iss-unexpected", "auth/iss-normalized", "auth/metadata-issuer-mismatch",
	}},
	// 2025-03-26 back-compat, at that revision's wire (the initialize handshake).
	{wire: "2025-03-26", names: []string{
		"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
	}},
	// Extensions.
	{wire: "2026-07-28", force: true, names: []string{
		"auth/client-credentials-basic", "auth/client-credentials-jwt", "auth/enterprise-managed-authorization",
		"auth/dpop", "auth/dpop-nonce", "auth/wif-jwt-bearer",
	}},
}

// pending are the scenarios that fail for want of work in mcpauth, each
// with the checks it fails (FAILURE or WARNING). The test fails when one of
// them fails any other check or no longer fails one of these, so the list
// can only shrink: take a scenario off it once the library makes it pass.
var pending = map[string][]string{}

// check is one of the checks a scenario's run reports (--verbose).
type check struct {
	ID           string `json:"id"`
	Status       string `json:"status"`
	Description  string `json:"description"`
	ErrorMessage string `json:"errorMessage"`
}

// The official suite runs each scenario against this client: it starts the
// scenario's MCP server and authorization server, runs the client, and
// checks every request the client made. A scenario passes when every check
// does, with no warning.
func TestConformanceSuite(t *testing.T) {
	suite := suiteEntry(t)
	bin := filepath.Join(t.TempDir(), "mcpconformance")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("every client auth scenario", func(t *testing.T) {
		listed := suiteAuthScenarios(t, suite)
		var ours []string
		for _, g := range scenarios {
			ours = append(ours, g.names...)
		}
		slices.Sort(ours)
		if !slices.Equal(ours, listed) {
			t.Errorf("the suite lists the client auth scenarios\n%v\nthe test runs\n%v", listed, ours)
		}
	})
	for _, g := range scenarios {
		for _, name := range g.names {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				args := []string{suite, "client", "--command", bin, "--scenario", name, "--spec-version", g.wire, "--verbose"}
				if g.force {
					args = append(args, "--force")
				}
				checks, exitErr, out := runScenario(t, args)
				judge(t, name, checks, exitErr, out)
			})
		}
	}
}

// runScenario runs the suite on one scenario and reads the checks it
// printed; out is what it printed besides, for the failure message.
func runScenario(t *testing.T, args []string) (checks []check, exitErr error, out string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", args...)
	cmd.Env = append(os.Environ(), "NO_COLOR=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, exitErr := cmd.Output()
	if err := json.Unmarshal(stdout, &checks); err != nil || len(checks) == 0 {
		t.Fatalf("no checks from the suite (%v; exit: %v)\n%s\n%s", err, exitErr, stdout, stderr.String())
	}
	return checks, exitErr, stderr.String()
}

// judge passes a scenario whose checks all pass; a pending one must fail
// exactly its pending checks.
func judge(t *testing.T, name string, checks []check, exitErr error, out string) {
	t.Helper()
	var failed, passed []string
	var why strings.Builder
	for _, c := range checks {
		switch c.Status {
		case "SUCCESS":
			passed = append(passed, c.ID)
		case "FAILURE", "WARNING":
			failed = append(failed, c.ID)
			why.WriteString("\n  " + c.Status + " " + c.ID + ": " + c.Description + " " + c.ErrorMessage)
		}
	}
	slices.Sort(failed)
	failed = slices.Compact(failed)
	want, isPending := pending[name]
	switch {
	case !isPending && (exitErr != nil || len(failed) > 0 || len(passed) == 0):
		t.Fatalf("%s: %d checks passed; exit: %v%s\n%s", name, len(passed), exitErr, why.String(), out)
	case !isPending:
		t.Logf("%s: %d checks passed", name, len(passed))
	case len(failed) == 0:
		t.Errorf("%s passes now (%d checks): take it off pending", name, len(passed))
	case !slices.Equal(failed, sorted(want)):
		t.Errorf("%s is pending for %v but fails%s\n%s", name, want, why.String(), out)
	default:
		t.Logf("pending: %s fails, as listed:%s", name, why.String())
	}
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

var authScenario = regexp.MustCompile(`(?m)^\s*- (auth/\S+)`)

// suiteAuthScenarios are the client auth scenarios the suite lists, sorted.
func suiteAuthScenarios(t *testing.T, suite string) []string {
	t.Helper()
	out, err := exec.Command("node", suite, "list", "--client").Output()
	if err != nil {
		t.Fatalf("conformance list --client: %v", err)
	}
	var names []string
	for _, m := range authScenario.FindAllSubmatch(out, -1) {
		names = append(names, string(m[1]))
	}
	slices.Sort(names)
	return names
}

// suiteEntry is the installed suite's program, installing it first when
// npm can; under CI=true a suite that cannot be had fails the test.
func suiteEntry(t *testing.T) string {
	t.Helper()
	entry := filepath.Join("suite", "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if installed(entry) {
		return entry
	}
	if _, err := exec.LookPath("npm"); err == nil {
		if out, err := exec.Command("bash", filepath.Join("suite", "install.sh")).CombinedOutput(); err == nil {
			return entry
		} else {
			t.Logf("suite/install.sh: %v\n%s", err, out)
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the MCP conformance suite is required under CI=true: run internal/cmd/mcpconformance/suite/install.sh")
	}
	t.Skip("the MCP conformance suite is not installed (internal/cmd/mcpconformance/suite/install.sh needs npm)")
	return ""
}

// installed reports whether the suite at entry is the version package.json
// pins: an install of another version is installed again.
func installed(entry string) bool {
	var pin struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var got struct {
		Version string `json:"version"`
	}
	if readJSON(filepath.Join("suite", "package.json"), &pin) != nil ||
		readJSON(filepath.Join(filepath.Dir(filepath.Dir(entry)), "package.json"), &got) != nil {
		return false
	}
	return got.Version == pin.Dependencies["@modelcontextprotocol/conformance"]
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
