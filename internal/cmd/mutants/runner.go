package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

type outcome string

const (
	killed   outcome = "killed"
	survived outcome = "survived"
	invalid  outcome = "invalid" // the mutated package does not build, or no test ran
	stale    outcome = "stale"   // the old text is not in the file exactly once
	skipped  outcome = "skipped" // the unmutated package does not build
	flaky    outcome = "flaky"   // only tests that flake unmutated failed
	broken   outcome = "error"   // the go command could not run or was stopped
)

type result struct {
	m       mutant
	outcome outcome
	took    time.Duration
	detail  string
	output  string   // for -v: a survivor's test output, or the race a kill found
	failed  []string // the top-level tests that failed, for -v: the Run pattern of a kill
}

type runner struct {
	cfg  config
	root string
	tmp  string
	out  io.Writer
}

// runAll runs the baselines, then the mutants, printing a line for each as it
// ends, in table order.
func (r *runner) runAll(ctx context.Context, ms []mutant) ([]result, []baseline) {
	bases := r.baselines(ctx, ms)
	byKey := make(map[string]baseline)
	for _, b := range bases {
		byKey[b.key] = b
	}
	results := make([]result, len(ms))
	forEach(len(ms), r.cfg.workers, func(i int) {
		b, ok := byKey[baselineKey(ms[i])]
		if !ok { // -baseline=false
			b.skip = r.cfg.skip
		}
		results[i] = r.runMutant(ctx, i, ms[i], b)
	}, func(i int) { r.report(results[i]) })
	return results, bases
}

func (r *runner) runMutant(ctx context.Context, i int, m mutant, b baseline) result {
	start := time.Now()
	var res result
	path, src, err := m.mutate(r.root)
	switch {
	case errors.Is(err, errStale):
		res = result{outcome: stale, detail: err.Error()}
	case err != nil:
		res = result{outcome: broken, detail: err.Error()}
	case b.broken != "":
		res = result{outcome: skipped, detail: b.broken}
	default:
		res = r.test(ctx, i, m, b, path, src)
	}
	res.m, res.took = m, time.Since(start)
	return res
}

// test runs m's tests, less those b leaves out, against the mutated src
// standing in for path.
func (r *runner) test(ctx context.Context, i int, m mutant, b baseline, path string, src []byte) result {
	dir := filepath.Join(r.tmp, strconv.Itoa(i))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return result{outcome: broken, detail: err.Error()}
	}
	overlay, err := writeOverlay(dir, path, src)
	if err != nil {
		return result{outcome: broken, detail: err.Error()}
	}
	tctx, cancel := context.WithTimeout(ctx, r.cfg.timeout+2*time.Minute) // build time on top of the tests'
	defer cancel()
	mod, pkg := m.module(r.root)
	tr, err := goTest(tctx, mod, testCmd{pkg: pkg, run: m.Run, skip: b.skip, overlay: overlay, timeout: r.cfg.timeout})
	o, detail := verdict(tr, err)
	switch {
	case o == killed && b.onlyFlaky(tr.leaves()):
		return result{outcome: flaky, detail: "failed only tests that flake unmutated: " + detail}
	case o == survived:
		return result{outcome: o, detail: "unguarded: " + m.Why, output: tr.output.String()}
	}
	res := result{outcome: o, detail: detail}
	if o == killed {
		res.failed = tr.topLevel()
	}
	if tr != nil && tr.race {
		res.output = tr.raceReport.String()
	}
	return res
}

func (r *runner) report(res result) {
	fmt.Fprintf(r.out, "%-40s %-8s %6.1fs  %s\n", res.m.Name, res.outcome, res.took.Seconds(), res.detail)
	if !r.cfg.verbose {
		return
	}
	fmt.Fprint(r.out, res.output)
	if len(res.failed) > 0 {
		fmt.Fprintf(r.out, "    failed: %s\n", alternation(res.failed))
	}
}

// forEach runs fn(i) for every i below n on at most workers goroutines, and
// calls done(i) in index order, each as soon as i and every index before it
// have finished.
func forEach(n, workers int, fn, done func(i int)) {
	next := make(chan int)
	finished := make(chan int)
	for range min(workers, n) {
		go func() {
			for i := range next {
				fn(i)
				finished <- i
			}
		}()
	}
	go func() {
		for i := range n {
			next <- i
		}
		close(next)
	}()
	ready := make([]bool, n)
	for reported := 0; reported < n; {
		ready[<-finished] = true
		for ; reported < n && ready[reported]; reported++ {
			done(reported)
		}
	}
}

type summary struct {
	counts    map[outcome]int
	survivors []string
	unsound   []string // baselines that were not green
}

func summarize(results []result, bases []baseline) summary {
	s := summary{counts: make(map[outcome]int)}
	for _, res := range results {
		s.counts[res.outcome]++
		if res.outcome == survived {
			s.survivors = append(s.survivors, res.m.Name)
		}
	}
	for _, b := range bases {
		if b.broken != "" || len(b.failing)+len(b.flaky) > 0 {
			s.unsound = append(s.unsound, b.key)
		}
	}
	return s
}

func (s summary) print(w io.Writer, took time.Duration) {
	k, sv := s.counts[killed], s.counts[survived]
	score := "n/a"
	if k+sv > 0 {
		score = fmt.Sprintf("%d/%d = %.0f%%", k, k+sv, 100*float64(k)/float64(k+sv))
	}
	fmt.Fprintf(w, "\nscore %s (killed / (killed+survived)); killed %d, survived %d, flaky %d, invalid %d, stale %d, skipped %d, error %d; %s\n",
		score, k, sv, s.counts[flaky], s.counts[invalid], s.counts[stale], s.counts[skipped], s.counts[broken], took.Round(time.Second))
	for _, name := range s.survivors {
		fmt.Fprintln(w, "survived:", name)
	}
	for _, key := range s.unsound {
		fmt.Fprintf(w, "baseline not green: %s (see above)\n", key)
	}
}

// exitCode is 0 only when every mutant was killed against a green baseline.
func (s summary) exitCode() int {
	for o, n := range s.counts {
		if o != killed && n > 0 {
			return 1
		}
	}
	if len(s.unsound) > 0 {
		return 1
	}
	return 0
}
