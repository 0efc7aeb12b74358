package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The accessibility check is axe-core's, from the npm registry, pinned by
// axe/package.json and axe/package-lock.json beside this file; CI installs
// it with "npm ci --prefix internal/testkit/browsertest/axe". A test that
// cannot find it there is skipped, except under CI=true, where it fails.

// AxeViolation is one rule axe found broken on the page: its ID ("color-contrast"),
// how much it matters, what it asks for, and the elements that break it.
type AxeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []string `json:"target"`
		Summary string   `json:"failureSummary"`
	} `json:"nodes"`
}

func (v AxeViolation) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%s): %s", v.ID, v.Impact, v.Help)
	for _, n := range v.Nodes {
		fmt.Fprintf(&b, "\n    %s: %s", strings.Join(n.Target, " "), strings.ReplaceAll(n.Summary, "\n", "; "))
	}
	return b.String()
}

// axeTags are the rule sets checked: WCAG 2.2 A and AA, and axe's best practices.
var axeTags = []string{"wcag2a", "wcag2aa", "wcag21a", "wcag21aa", "wcag22aa", "best-practice"}

// CheckAccessibility runs axe-core on the page of ctx, as one step, and fails t
// with every violation found.
func CheckAccessibility(t testing.TB, ctx context.Context, step string) {
	t.Helper()
	if vs := AxeViolations(t, ctx, step); len(vs) > 0 {
		lines := make([]string, len(vs))
		for i, v := range vs {
			lines[i] = v.String()
		}
		t.Errorf("%s: axe found %d violations:\n  %s", step, len(vs), strings.Join(lines, "\n  "))
	}
}

// AxeViolations runs axe-core on the page of ctx, as one step, and returns
// what it found broken. The script is evaluated through the browser's
// debugging protocol, which the page's Content-Security-Policy does not govern.
func AxeViolations(t testing.TB, ctx context.Context, step string) []AxeViolation {
	t.Helper()
	src := axeSource(t)
	tags, err := json.Marshal(axeTags)
	if err != nil {
		t.Fatal(err)
	}
	run := `axe.run(document, {runOnly: {type: "tag", values: ` + string(tags) + `}, resultTypes: ["violations"]})
  .then(function (r) { return r.violations; })`
	var vs []AxeViolation
	Run(t, ctx, step,
		chromedp.Evaluate[chromedp.Void](src),
		Into(chromedp.Evaluate[[]AxeViolation](run, chromedp.EvalAwaitPromise), &vs))
	return vs
}

// axeSource is axe.min.js as npm ci installed it beside this file.
func axeSource(t testing.TB) string {
	t.Helper()
	dir := axeDir()
	src, err := installedAxe(dir)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the accessibility check needs axe-core in CI: %v", err)
		}
		t.Skipf("skipping the accessibility check: %v (run npm ci in %s)", err, dir)
	}
	return src
}

// axeDir is the folder of axe's package.json: axe/ beside this file.
func axeDir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "axe")
}

// installedAxe reads axe.min.js from dir's node_modules when it holds the
// version package.json pins.
func installedAxe(dir string) (string, error) {
	var want struct {
		Dependencies map[string]string `json:"dependencies"`
	}
	var got struct {
		Version string `json:"version"`
	}
	if err := readJSON(filepath.Join(dir, "package.json"), &want); err != nil {
		return "", err
	}
	pkg := filepath.Join(dir, "node_modules", "axe-core")
	if err := readJSON(filepath.Join(pkg, "package.json"), &got); err != nil {
		return "", fmt.Errorf("axe-core is not installed: %w", err)
	}
	if pin := want.Dependencies["axe-core"]; got.Version != pin {
		return "", fmt.Errorf("axe-core %s is installed, package.json pins %q", got.Version, pin)
	}
	src, err := os.ReadFile(filepath.Join(pkg, "axe.min.js"))
	return string(src), err
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
