package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// The memory read beside an earlier commit's, in the same run: the root
// package's BenchmarkGetValidAccessToken/memory built from the working tree
// and from -baseline's commit (by git archive into a temporary folder), the
// two binaries run in turn, round after round, so that both see the same
// machine. The figure is the benchmark's own loop, not the suite's
// nsPerOp: only the test binaries of both commits have it.

// baselineBench is the benchmark both binaries run: the memory read (its
// sealed and DPoP siblings, named memory/..., run too and are not read).
const baselineBench = `^BenchmarkGetValidAccessToken$/^memory$`

// baselineRead is the memory read at this tree and at rev, round by round.
func baselineRead(e *env, rev string) (now, then sample, err error) {
	dir, err := os.MkdirTemp("", "oauthflow-baseline-")
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	root, err := gitOutput(".", "rev-parse", "--show-toplevel")
	if err != nil {
		return nil, nil, fmt.Errorf("-baseline needs a git checkout: %w", err)
	}
	src := filepath.Join(dir, "src")
	if err := os.Mkdir(src, 0o755); err != nil {
		return nil, nil, err
	}
	archive := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	tar := exec.Command("tar", "-x", "-C", src)
	if tar.Stdin, err = archive.StdoutPipe(); err != nil {
		return nil, nil, err
	}
	if err := tar.Start(); err != nil {
		return nil, nil, err
	}
	var stderr bytes.Buffer
	archive.Stderr = &stderr
	if err := archive.Run(); err != nil {
		_ = tar.Wait()
		return nil, nil, fmt.Errorf("git archive %s: %v: %s", rev, err, stderr.Bytes())
	}
	if err := tar.Wait(); err != nil {
		return nil, nil, fmt.Errorf("unpack %s: %w", rev, err)
	}
	nowBin, thenBin := filepath.Join(dir, "now.test"), filepath.Join(dir, "then.test")
	for _, b := range []struct{ src, out string }{{root, nowBin}, {src, thenBin}} {
		build := exec.Command("go", "test", "-c", "-o", b.out, ".")
		build.Dir = b.src
		if out, err := build.CombinedOutput(); err != nil {
			return nil, nil, fmt.Errorf("build the root package's tests in %s: %v: %s", b.src, err, out)
		}
	}
	for i := range e.opts.rounds {
		order := []string{nowBin, thenBin}
		if i%2 == 1 {
			order = []string{thenBin, nowBin}
		}
		for _, bin := range order {
			ns, err := runReadBench(bin, e.opts.baselineN)
			if err != nil {
				return nil, nil, err
			}
			if bin == nowBin {
				now = append(now, ns)
			} else {
				then = append(then, ns)
			}
		}
	}
	return now, then, nil
}

// runReadBench runs the memory read benchmark of the test binary bin for n
// iterations and returns its ns/op.
func runReadBench(bin string, n int) (float64, error) {
	cmd := exec.Command(bin, "-test.run", "^$", "-test.bench", baselineBench, "-test.benchtime", strconv.Itoa(n)+"x", "-test.count", "1")
	cmd.Dir = filepath.Dir(bin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%s: %v: %s", filepath.Base(bin), err, out)
	}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 4 && strings.HasPrefix(f[0], "BenchmarkGetValidAccessToken/memory-") && f[3] == "ns/op" {
			return strconv.ParseFloat(f[2], 64)
		}
	}
	return 0, fmt.Errorf("%s: no BenchmarkGetValidAccessToken/memory line in its output:\n%s", filepath.Base(bin), out)
}

func gitOutput(dir string, args ...string) (string, error) {
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).Output()
	return strings.TrimSpace(string(out)), err
}
