package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the load generator too: the harness
// re-executes os.Executable(), which under go test is this binary.
func TestMain(m *testing.M) {
	if job := os.Getenv(loadgenEnv); job != "" {
		os.Exit(loadgenMain(job))
	}
	os.Exit(m.Run())
}

// unfigure finds what fmt writes for a figure that is not a number (NaN,
// ±Inf) and the harness's own "n/a"; not a word such as "Info".
var unfigure = regexp.MustCompile(`\bNaN\b|[+-]?\bInf\b|n/a`)

// TestQuickRun runs the whole harness in quick mode (the Redis at
// KVSTORE_HOST:KVSTORE_PORT, or an in-process miniredis) and checks the report's
// shape. It asserts no speed figure: a timed assertion flakes on shared cores.
func TestQuickRun(t *testing.T) {
	o, err := parseOptions([]string{"-quick", "-out", filepath.Join(t.TempDir(), "BENCHMARKS.md")})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(o.out)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	for _, want := range []string{"## Reproduce", "## How to read this", "## Reading a valid token", "## Calling an API as the user", "## Taking a pending sign-in",
		"## Completing a sign-in", "## Refresh storm", "## Memory (MemoryKV)", "## Gaps", "go run ./internal/cmd/bench", strings.TrimSpace(notes)} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	if bad := unfigure.FindString(report); bad != "" {
		t.Errorf("the report holds %q:\n%s", bad, report)
	}
}

// What fmt writes for a figure that is not a number is found in a report;
// prose that speaks of slog's Info level is not.
func TestUnfigure(t *testing.T) {
	for text, want := range map[string]bool{"+Inf req/s": true, "1.00x (Inf – 2)": true, "NaN ns/op": true, "-Inf": true, "n/a": true,
		"kept at Info": false, "Infinite": false, "Nancy": false} {
		if got := unfigure.MatchString(text); got != want {
			t.Errorf("unfigure on %q: %v, want %v", text, got, want)
		}
	}
}
