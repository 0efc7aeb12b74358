// Command mutants checks that the tests guard what they claim to guard. It
// applies each mutation of a hand-written table (table*.go), one at a time, and
// runs the tests of the mutated package with the race detector. The working
// tree is never written: the mutated copy of the file lives in a temporary
// directory and reaches the compiler through go test -overlay.
//
// A mutant is killed when the tests fail, survives when they pass, is invalid
// when the mutated package does not build (or no test ran), and is stale when
// its old text is no longer in the file exactly once. Before the mutants, each
// package is tested unmutated, twice if the first run fails: tests that fail
// both times are left out of its mutants' runs (go test -skip), a mutant that
// fails only tests that failed once is reported flaky, and the mutants of a
// package that does not build are skipped. The command exits 1 unless every
// mutant was killed against a green baseline.
//
// Run it from the module before resolving an issue that touches a guarded path:
//
//	go run ./internal/cmd/mutants [-run REGEXP] [-v] [-timeout 3m] [-workers 2] [-skip REGEXP]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

type config struct {
	run      *regexp.Regexp
	skip     string // go test -skip for every run: top-level tests known to flake
	verbose  bool
	timeout  time.Duration
	workers  int
	baseline bool
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return 2
	}
	ms, err := selectMutants(table(), cfg.run)
	if err != nil {
		fmt.Fprintln(stderr, "mutants:", err)
		return 2
	}
	root, err := moduleRoot(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "mutants:", err)
		return 2
	}
	tmp, err := os.MkdirTemp("", "mutants-*")
	if err != nil {
		fmt.Fprintln(stderr, "mutants:", err)
		return 2
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	r := &runner{cfg: cfg, root: root, tmp: tmp, out: stdout}
	s := summarize(r.runAll(ctx, ms))
	s.print(stdout, time.Since(start))
	return s.exitCode()
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("mutants", flag.ContinueOnError)
	fs.SetOutput(stderr)
	pattern := fs.String("run", "", "run only the mutants whose name matches `regexp`")
	cfg := config{}
	fs.BoolVar(&cfg.verbose, "v", false, "print the test output of every survivor, the data race a kill found, and the -run pattern of the tests that killed each mutant")
	fs.DurationVar(&cfg.timeout, "timeout", 3*time.Minute, "go test -timeout for each run")
	fs.IntVar(&cfg.workers, "workers", 2, "go test runs at a time")
	fs.BoolVar(&cfg.baseline, "baseline", true, "test each package unmutated first")
	fs.StringVar(&cfg.skip, "skip", "", "leave the top-level tests matching `regexp` out of every run (known flakes)")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	re, err := regexp.Compile(*pattern)
	_, skipErr := regexp.Compile(cfg.skip)
	if err != nil || skipErr != nil || strings.Contains(cfg.skip, "/") || fs.NArg() > 0 || cfg.workers < 1 || cfg.timeout <= 0 {
		fmt.Fprintln(stderr, "mutants: bad flags; see -h")
		return cfg, errors.New("bad flags")
	}
	cfg.run = re
	return cfg, nil
}

func selectMutants(ms []mutant, re *regexp.Regexp) ([]mutant, error) {
	if err := checkTable(ms); err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	var sel []mutant
	for _, m := range ms {
		if re.MatchString(m.Name) {
			sel = append(sel, m)
		}
	}
	if len(sel) == 0 {
		return nil, errors.New("no mutant matches -run")
	}
	return sel, nil
}

// moduleRoot is the directory of the main module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	gomod := strings.TrimSpace(string(out))
	if err != nil || gomod == "" || gomod == os.DevNull {
		return "", errors.New("run it inside the module (go env GOMOD names no go.mod)")
	}
	return filepath.Dir(gomod), nil
}
