package main

import (
	"context"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// baseline is how the tests of one package did unmutated. A failing baseline
// is run a second time: tests that failed both times are broken by the tree as
// it is and are left out of the mutants' runs (-skip); tests that failed once
// flake, and a mutant that fails nothing else is reported as flaky, not killed.
// A package that does not build, or fails outside any test, has its mutants
// skipped.
type baseline struct {
	key     string
	broken  string   // why the mutants cannot be judged at all
	failing []string // tests that failed both times
	flaky   []string // tests that failed once
	skip    string   // go test -skip for the mutants' runs
	took    time.Duration
}

// baselineKey names one unmutated go test run: the package and the -run pattern.
func baselineKey(m mutant) string {
	if m.Run == "" {
		return m.pkg()
	}
	return m.pkg() + " -run " + strconv.Quote(m.Run)
}

// baselines tests each package of ms unmutated, once per -run pattern.
func (r *runner) baselines(ctx context.Context, ms []mutant) []baseline {
	if !r.cfg.baseline {
		return nil
	}
	var firsts []mutant
	seen := make(map[string]bool)
	for _, m := range ms {
		if k := baselineKey(m); !seen[k] {
			seen[k] = true
			firsts = append(firsts, m)
		}
	}
	bases := make([]baseline, len(firsts))
	forEach(len(firsts), r.cfg.workers, func(i int) {
		bases[i] = r.baseline(ctx, firsts[i])
	}, func(i int) { bases[i].print(r.out) })
	return bases
}

func (r *runner) baseline(ctx context.Context, m mutant) (b baseline) {
	start := time.Now()
	b = baseline{key: baselineKey(m), skip: r.cfg.skip}
	defer func() { b.took = time.Since(start) }()
	dir, pkg := m.module(r.root)
	c := testCmd{pkg: pkg, run: m.Run, skip: r.cfg.skip, timeout: r.cfg.timeout}
	first, o1, _ := r.unmutated(ctx, dir, c)
	if o1 == survived {
		return b
	}
	second, o2, why := r.unmutated(ctx, dir, c)
	switch {
	case second == nil && o2 != survived:
		b.broken = fmt.Sprintf("unmutated package %s: %s", o2, why)
		return b
	case first == nil: // the first run failed outside any test: trust the second
		b.failing = second
	default:
		b.failing, b.flaky = split(first, second)
	}
	b.skip = r.skipFor(b.failing)
	return b
}

// unmutated runs c in dir and returns the failing leaf tests: none when the tests
// passed, or when the run failed outside any test (it did not build).
func (r *runner) unmutated(ctx context.Context, dir string, c testCmd) ([]string, outcome, string) {
	tr, err := goTest(ctx, dir, c)
	o, why := verdict(tr, err)
	if o == killed && len(tr.failed) > 0 {
		return tr.leaves(), o, why
	}
	return nil, o, why
}

// split returns the tests in both a and b, and those in only one.
func split(a, b []string) (both, once []string) {
	for _, n := range a {
		if slices.Contains(b, n) {
			both = append(both, n)
		} else {
			once = append(once, n)
		}
	}
	for _, n := range b {
		if !slices.Contains(a, n) {
			once = append(once, n)
		}
	}
	return both, once
}

// skipFor is the -skip pattern that leaves out the failing leaf tests, and the
// tests the user asked to skip.
func (r *runner) skipFor(failing []string) string {
	if len(failing) == 0 {
		return r.cfg.skip
	}
	tr := &testRun{failed: failing}
	if r.cfg.skip != "" { // one pattern for both: whole top-level tests then
		return r.cfg.skip + "|" + alternation(tr.topLevel())
	}
	return skipPattern(failing, tr.topLevel())
}

// onlyFlaky reports whether every failing leaf test is one that flaked unmutated.
func (b baseline) onlyFlaky(failed []string) bool {
	if len(failed) == 0 {
		return false
	}
	for _, n := range failed {
		if !slices.Contains(b.flaky, n) {
			return false
		}
	}
	return true
}

func (b baseline) print(w io.Writer) {
	status := "ok"
	if b.broken != "" {
		status = "BROKEN " + b.broken
	}
	if len(b.failing) > 0 {
		status = "failing, left out: " + list(b.failing, 8)
	}
	if len(b.flaky) > 0 {
		status += "; flaky: " + list(b.flaky, 8)
	}
	fmt.Fprintf(w, "%-40s %-8s %6.1fs  %s\n", "baseline "+b.key, "", b.took.Seconds(), status)
}

// skipPattern is a go test -skip pattern that leaves out the failing tests
// named: the failing subtests themselves when they all sit at one depth (with
// one alternation per level, so it may leave out a few more of their
// siblings' namesakes), else their whole top-level tests.
func skipPattern(leaves, topLevel []string) string {
	depth := -1
	for _, n := range leaves {
		d := strings.Count(n, "/")
		if depth != -1 && d != depth {
			return alternation(topLevel)
		}
		depth = d
	}
	levels := make([][]string, depth+1)
	for _, n := range leaves {
		for i, part := range strings.Split(n, "/") {
			if !slices.Contains(levels[i], part) {
				levels[i] = append(levels[i], part)
			}
		}
	}
	parts := make([]string, len(levels))
	for i, names := range levels {
		parts[i] = alternation(names)
	}
	return strings.Join(parts, "/")
}

func alternation(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = regexp.QuoteMeta(n)
	}
	return "^(" + strings.Join(quoted, "|") + ")$"
}
