package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"
)

// testEvent is one line of go test -json (see go doc test2json), with the
// build events the go command adds.
type testEvent struct {
	Action      string
	Package     string
	Test        string
	Output      string
	FailedBuild string
}

// testRun is what one go test run reported.
type testRun struct {
	buildFailed bool
	buildErr    string   // the first compiler or vet message
	failed      []string // tests and subtests that failed, by full name
	pkgFailed   bool     // a package failed (a test, a panic outside tests, a timeout)
	ran         int      // tests started
	timedOut    bool
	race        bool
	raceReport  strings.Builder // the first race report, for -v
	inRace      bool
	output      strings.Builder // the test output, for -v
}

func (tr *testRun) add(e testEvent) {
	switch {
	case e.Action == "build-output" && !strings.HasPrefix(e.Output, "#") && tr.buildErr == "":
		tr.buildErr = strings.TrimSpace(e.Output)
	case e.Action == "build-fail" || e.FailedBuild != "":
		tr.buildFailed = true
	case e.Action == "run" && !strings.Contains(e.Test, "/"):
		tr.ran++
	case e.Action == "fail" && e.Test == "":
		tr.pkgFailed = true
	case e.Action == "fail":
		tr.failed = append(tr.failed, e.Test)
	case e.Action == "output":
		tr.output.WriteString(e.Output)
		tr.timedOut = tr.timedOut || strings.HasPrefix(e.Output, "panic: test timed out")
		tr.addRace(e.Output)
	}
}

// addRace keeps the first race report, from its WARNING to its closing line.
func (tr *testRun) addRace(line string) {
	if strings.Contains(line, "WARNING: DATA RACE") && !tr.race {
		tr.race, tr.inRace = true, true
	}
	if !tr.inRace {
		return
	}
	tr.raceReport.WriteString(line)
	if strings.HasPrefix(line, "==================") && tr.raceReport.Len() > len(line) {
		tr.inRace = false
	}
}

// testCmd is one go test -race -count=1 run; empty fields are left out.
type testCmd struct {
	pkg, run, skip, overlay string
	timeout                 time.Duration
}

func (c testCmd) args() []string {
	args := []string{"test", "-json", "-race", "-count=1", "-timeout", c.timeout.String()}
	for _, f := range [][2]string{{"-overlay", c.overlay}, {"-run", c.run}, {"-skip", c.skip}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	return append(args, c.pkg)
}

// goTest runs c in dir, the directory of the module under test. Its error is nil when the tests pass, and says why
// they did not when the go command gave no test events to tell it.
func goTest(ctx context.Context, dir string, c testCmd) (*testRun, error) {
	cmd := exec.CommandContext(ctx, "go", c.args()...)
	cmd.Dir = dir
	if c.overlay != "" {
		// A test that builds a program of the module itself (the MCP
		// conformance client) builds it mutated too: go build reads GOFLAGS.
		cmd.Env = append(os.Environ(), "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -overlay="+c.overlay))
	}
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	tr := &testRun{}
	readEvents(out, tr)
	err = cmd.Wait()
	if err != nil && ctx.Err() != nil {
		return tr, fmt.Errorf("go test stopped: %w", context.Cause(ctx))
	}
	if msg := firstLine(stderr.String()); err != nil && msg != "" && !tr.pkgFailed && !tr.buildFailed {
		return tr, fmt.Errorf("go test: %s", msg)
	}
	return tr, err
}

func readEvents(r io.Reader, tr *testRun) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			tr.output.Write(append(sc.Bytes(), '\n'))
			continue
		}
		tr.add(e)
	}
	_, _ = io.Copy(io.Discard, r) // a line too long for the scanner must not block the go command
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// verdict turns a run of the mutated package into an outcome and a short detail.
func verdict(tr *testRun, err error) (outcome, string) {
	var exit *exec.ExitError
	switch {
	case tr != nil && tr.buildFailed:
		return invalid, "does not build: " + tr.buildErr
	case err == nil && tr.ran == 0:
		return invalid, "no test ran"
	case err == nil:
		return survived, ""
	case !errors.As(err, &exit):
		return broken, err.Error()
	}
	return killed, tr.why()
}

// why names what failed: the first tests, a race, a timeout.
func (tr *testRun) why() string {
	var parts []string
	if tr.race {
		parts = append(parts, "data race")
	}
	if tr.timedOut {
		parts = append(parts, "timed out")
	}
	if names := tr.topLevel(); len(names) > 0 {
		parts = append(parts, list(names, 3))
	}
	if len(parts) == 0 {
		return "the package failed"
	}
	return strings.Join(parts, ", ")
}

// list joins the first n names and says how many it left out.
func list(names []string, n int) string {
	if len(names) > n {
		return strings.Join(names[:n], ", ") + fmt.Sprintf(" and %d more", len(names)-n)
	}
	return strings.Join(names, ", ")
}

// topLevel names the top-level tests that failed, in the order they failed.
func (tr *testRun) topLevel() []string {
	var names []string
	for _, n := range tr.failed {
		top, _, _ := strings.Cut(n, "/")
		if !slices.Contains(names, top) {
			names = append(names, top)
		}
	}
	return names
}

// leaves names the failing tests none of whose subtests failed.
func (tr *testRun) leaves() []string {
	var names []string
	for _, n := range tr.failed {
		if !slices.ContainsFunc(tr.failed, func(o string) bool { return strings.HasPrefix(o, n+"/") }) {
			names = append(names, n)
		}
	}
	return names
}
