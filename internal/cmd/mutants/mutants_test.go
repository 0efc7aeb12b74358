package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestTableIsWellFormed(t *testing.T) {
	t.Parallel()
	if err := checkTable(table()); err != nil {
		t.Fatal(err)
	}
}

func TestCheckTableRefusesBrokenEntries(t *testing.T) {
	t.Parallel()
	ok := mutant{Name: "a", File: "a.go", Old: "x", New: "y", Why: "w"}
	for name, ms := range map[string][]mutant{
		"duplicate name": {ok, ok},
		"no old":         {{Name: "a", File: "a.go", New: "y", Why: "w"}},
		"no why":         {{Name: "a", File: "a.go", Old: "x", New: "y"}},
		"new is old":     {{Name: "a", File: "a.go", Old: "x", New: "x", Why: "w"}},
	} {
		if checkTable(ms) == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestApplyNeedsTheOldTextExactlyOnce(t *testing.T) {
	t.Parallel()
	m := mutant{File: "a.go", Old: "return 1", New: "return 2"}
	for src, want := range map[string]string{
		"func A() int { return 1 }":                              "func A() int { return 2 }",
		"func A() int { return 0 }":                              "",
		"func A() int { return 1 }\nfunc B() int { return 1 }\n": "",
	} {
		got, err := m.apply([]byte(src))
		if want == "" {
			if !errors.Is(err, errStale) {
				t.Errorf("apply(%q): err = %v, want stale", src, err)
			}
			continue
		}
		if err != nil || string(got) != want {
			t.Errorf("apply(%q) = %q, %v; want %q", src, got, err, want)
		}
	}
}

func TestMutateMissingFileIsStale(t *testing.T) {
	t.Parallel()
	m := mutant{File: "gone.go", Old: "x", New: "y"}
	if _, _, err := m.mutate(t.TempDir()); !errors.Is(err, errStale) {
		t.Fatalf("err = %v, want stale", err)
	}
}

// TestBaselineLeavesOutWhatAlreadyFails: a test that fails unmutated twice is
// left out of the mutant's run, so the kill is the other test's; a test that
// fails once is flaky.
func TestBaselineLeavesOutWhatAlreadyFails(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/a\n\ngo 1.22\n")
	write(t, root, "a.go", "package a\n\nfunc A() int { return 1 }\n")
	write(t, root, "a_test.go", "package a\n\nimport (\n\t\"os\"\n\t\"testing\"\n)\n\n"+
		"func TestA(t *testing.T) {\n\tif A() != 1 {\n\t\tt.Fatal(A())\n\t}\n}\n\n"+
		"func TestBroken(t *testing.T) {\n\tt.Run(\"sub\", func(t *testing.T) { t.Fatal(\"broken\") })\n}\n\n"+
		"func TestFlaky(t *testing.T) {\n\tif os.Mkdir(\"ran\", 0o755) == nil {\n\t\tt.Fatal(\"first run\")\n\t}\n}\n")
	r := &runner{cfg: config{timeout: time.Minute, workers: 1, baseline: true}, root: root, tmp: t.TempDir(), out: io.Discard}
	m := mutant{Name: "a", File: "a.go", Old: "return 1", New: "return 2", Why: "w"}
	b := r.baseline(context.Background(), m)
	if !slices.Equal(b.failing, []string{"TestBroken/sub"}) || !slices.Equal(b.flaky, []string{"TestFlaky"}) ||
		b.skip != "^(TestBroken)$/^(sub)$" {
		t.Fatalf("baseline = %+v", b)
	}
	res := r.runMutant(context.Background(), 0, m, b)
	if res.outcome != killed || res.detail != "TestA" {
		t.Fatalf("mutant %s: %s", res.outcome, res.detail)
	}
}

// TestVerboseKillNamesItsTests: with -v a kill prints the -run pattern of
// every top-level test that failed (the line itself names only the first
// three), the pattern a table entry can take.
func TestVerboseKillNamesItsTests(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/a\n\ngo 1.22\n")
	write(t, root, "a.go", "package a\n\nfunc A() int { return 1 }\n")
	test := func(name string) string {
		return "func " + name + "(t *testing.T) {\n\tif A() != 1 {\n\t\tt.Fatal(A())\n\t}\n}\n\n"
	}
	write(t, root, "a_test.go", "package a\n\nimport \"testing\"\n\n"+
		test("TestA")+test("TestB")+test("TestC")+test("TestD")+
		"func TestE(t *testing.T) {\n\tt.Run(\"sub\", func(t *testing.T) {\n\t\tif A() != 1 {\n\t\t\tt.Fatal(A())\n\t\t}\n\t})\n}\n\n"+
		"func TestUnrelated(t *testing.T) {}\n")
	m := mutant{Name: "a", File: "a.go", Old: "return 1", New: "return 2", Why: "w"}
	for _, verbose := range []bool{false, true} {
		var out strings.Builder
		r := &runner{cfg: config{timeout: time.Minute, workers: 1, verbose: verbose}, root: root, tmp: t.TempDir(), out: &out}
		res := r.runMutant(context.Background(), 0, m, baseline{})
		r.report(res)
		if res.outcome != killed || !slices.Equal(res.failed, []string{"TestA", "TestB", "TestC", "TestD", "TestE"}) {
			t.Fatalf("mutant %s, failed %q", res.outcome, res.failed)
		}
		const line = "    failed: ^(TestA|TestB|TestC|TestD|TestE)$\n"
		if got := strings.Contains(out.String(), line); got != verbose {
			t.Errorf("-v=%t: report names the failed tests: %t, want %t:\n%s", verbose, got, verbose, out.String())
		}
	}
}

func TestOnlyFlakyKillsAreNotKills(t *testing.T) {
	t.Parallel()
	both, once := split([]string{"TestA", "TestB/x"}, []string{"TestB/x", "TestC"})
	if !slices.Equal(both, []string{"TestB/x"}) || !slices.Equal(once, []string{"TestA", "TestC"}) {
		t.Fatalf("split: both %v, once %v", both, once)
	}
	b := baseline{flaky: once}
	if !b.onlyFlaky([]string{"TestC"}) || b.onlyFlaky([]string{"TestC", "TestD"}) || b.onlyFlaky(nil) {
		t.Fatal("onlyFlaky")
	}
}

// TestOverlayLeavesTheTreeAlone runs the go command on a one-file module: the
// mutant reaches the compiler, the file on disk stays as it was.
func TestOverlayLeavesTheTreeAlone(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	const src = "package a\n\nfunc A() int { return 1 }\n"
	write(t, root, "go.mod", "module example.com/a\n\ngo 1.22\n")
	write(t, root, "a.go", src)
	write(t, root, "a_test.go", "package a\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {\n\tif A() != 1 {\n\t\tt.Fatal(A())\n\t}\n}\n")
	for _, tc := range []struct {
		new  string
		want outcome
	}{
		{"return 1 + 0", survived},
		{"return 2", killed},
		{"return x", invalid},
	} {
		m := mutant{Name: tc.new, File: "a.go", Old: "return 1", New: tc.new, Why: "w"}
		if got := runOne(t, root, m); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.new, got, tc.want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "a.go")); string(b) != src {
		t.Fatalf("a.go on disk changed:\n%s", b)
	}
}

// TestNestedModuleMutantRunsInItsModule: a mutant of a file in a module of
// its own under the root (temporal/, otelevents/) runs go test in that
// module, whose packages the root's go command does not see; its baseline too.
func TestNestedModuleMutantRunsInItsModule(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	root := t.TempDir()
	write(t, root, "go.mod", "module example.com/a\n\ngo 1.22\n")
	write(t, root, "a.go", "package a\n")
	if err := os.MkdirAll(filepath.Join(root, "sub", "inner"), 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, root, "sub/go.mod", "module example.com/a/sub\n\ngo 1.22\n")
	write(t, root, "sub/inner/b.go", "package inner\n\nfunc B() int { return 1 }\n")
	write(t, root, "sub/inner/b_test.go", "package inner\n\nimport \"testing\"\n\nfunc TestB(t *testing.T) {\n\tif B() != 1 {\n\t\tt.Fatal(B())\n\t}\n}\n")
	m := mutant{Name: "b", File: "sub/inner/b.go", Pkg: "./sub/inner", Old: "return 1", New: "return 2", Why: "w"}
	if dir, pkg := m.module(root); dir != filepath.Join(root, "sub") || pkg != "./inner" {
		t.Fatalf("module = %s, %s", dir, pkg)
	}
	if dir, pkg := (mutant{File: "a.go"}).module(root); dir != root || pkg != "." {
		t.Fatalf("module of a root file = %s, %s", dir, pkg)
	}
	r := &runner{cfg: config{timeout: time.Minute, workers: 1, baseline: true}, root: root, tmp: t.TempDir(), out: io.Discard}
	b := r.baseline(context.Background(), m)
	if b.broken != "" || len(b.failing) > 0 {
		t.Fatalf("baseline = %+v", b)
	}
	if res := r.runMutant(context.Background(), 0, m, b); res.outcome != killed || res.detail != "TestB" {
		t.Fatalf("mutant %s: %s", res.outcome, res.detail)
	}
}

func runOne(t *testing.T, root string, m mutant) outcome {
	t.Helper()
	path, src, err := m.mutate(root)
	if err != nil {
		t.Fatal(err)
	}
	overlay, err := writeOverlay(t.TempDir(), path, src)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := goTest(context.Background(), root, testCmd{pkg: ".", overlay: overlay, timeout: time.Minute})
	o, detail := verdict(tr, err)
	if o == killed && !strings.Contains(detail, "TestA") {
		t.Errorf("killed, detail %q does not name TestA", detail)
	}
	return o
}

func write(t *testing.T, dir, name, text string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestForEachReportsInOrder(t *testing.T) {
	t.Parallel()
	var got []int
	forEach(20, 3, func(i int) { time.Sleep(time.Duration(20-i) * time.Millisecond) }, func(i int) { got = append(got, i) })
	want := make([]int, 20)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Fatalf("reported %v", got)
	}
}

func TestSkipPatternLeavesOutWhatFailedUnmutated(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		failed []string
		want   string
	}{
		{[]string{"TestA"}, "^(TestA)$"},
		{[]string{"TestA/x", "TestA", "TestB/y.z", "TestB"}, "^(TestA|TestB)$/^(x|y\\.z)$"},
		{[]string{"TestA/x", "TestA", "TestC"}, "^(TestA|TestC)$"},
	} {
		tr := &testRun{failed: tc.failed}
		if got := skipPattern(tr.leaves(), tr.topLevel()); got != tc.want {
			t.Errorf("skipPattern(%q) = %q, want %q", tc.failed, got, tc.want)
		}
	}
}
