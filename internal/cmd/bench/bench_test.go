package main

import (
	"os"
	"path/filepath"
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
	for _, bad := range []string{"NaN", "Inf", "n/a"} {
		if strings.Contains(report, bad) {
			t.Errorf("the report holds %q:\n%s", bad, report)
		}
	}
}
