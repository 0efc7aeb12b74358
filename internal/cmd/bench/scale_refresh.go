package main

// Refreshing ahead at scale, the last area of -scale: the root package's
// benchmarks BenchmarkRefreshAheadAtScale (N connections due at once over
// Redis, a token endpoint answering in 100 ms, with the default per-provider
// limit and with it raised) and BenchmarkRefreshAheadAgainst429 (two instances
// against a token endpoint that answers every refresh 429), run in a child
// `go test` at the area's size and read from its output. The benchmarks live
// beside the code they measure, and run as a smoke in CI; the harness only
// runs them large and puts their figures beside their limits.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/worker"
)

const (
	// refreshLatency is the token endpoint's own time in both benchmarks.
	refreshLatency = 100 * time.Millisecond
	// refreshSlack is the benchmarks' RefreshAhead: a connection due now
	// expires this much later, so a refresh within it is never late.
	refreshSlack = 10 * time.Minute
	// defaultInFlight is the default per-provider limit on refreshes ahead in
	// flight on one instance (RefreshLimit.Concurrency).
	defaultInFlight = 100
	// raisedInFlight is the limit the benchmark raises it to, so the
	// provider's limit no longer bounds the rate: the worker's share of one
	// provider's refreshes ahead (raisedCeiling) does.
	raisedInFlight = 250
	// raisedCeiling is how many of one provider's refreshes ahead an
	// instance runs at once with the limit raised: the worker gives one
	// group of a kind of work at most worker.GroupShare of its slots, so a
	// provider whose endpoint hangs leaves room for the others.
	raisedCeiling = min(raisedInFlight, worker.GroupShare)
	// instances429 is how many instances BenchmarkRefreshAheadAgainst429 runs.
	instances429 = 2
	// window429 is the window its figures count calls in.
	window429 = 5 * time.Second
)

// refreshFigures are the figures of the two benchmarks.
type refreshFigures struct {
	n                    int
	defaultLimit, raised benchFigures // BenchmarkRefreshAheadAtScale/default-limit and /concurrency-250
	against429           benchFigures
	elapsed              time.Duration
}

// benchFigures are one benchmark's custom metrics, by unit.
type benchFigures map[string]float64

// refreshBenchmarks runs both benchmarks with n connections due at once.
func refreshBenchmarks(ctx context.Context, n int) (*refreshFigures, error) {
	root, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "^BenchmarkRefreshAhead(AtScale|Against429)$",
		"-benchtime", strconv.Itoa(n)+"x", "-count", "1", "-timeout", "30m", ".")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("go test -bench BenchmarkRefreshAhead: %w\n%s", err, out)
	}
	return parseRefreshBenchmarks(string(out), n, time.Since(start))
}

// parseRefreshBenchmarks reads the figures of both benchmarks from go test's output.
func parseRefreshBenchmarks(out string, n int, elapsed time.Duration) (*refreshFigures, error) {
	got := parseBenchOutput(out)
	f := &refreshFigures{n: n, elapsed: elapsed, defaultLimit: got["BenchmarkRefreshAheadAtScale/default-limit"],
		raised: got["BenchmarkRefreshAheadAtScale/concurrency-"+strconv.Itoa(raisedInFlight)], against429: got["BenchmarkRefreshAheadAgainst429"]}
	for name, b := range map[string]benchFigures{"default-limit": f.defaultLimit, "raised limit": f.raised} {
		if b["refreshes/s"] <= 0 || b["s-to-last"] <= 0 {
			return nil, fmt.Errorf("BenchmarkRefreshAheadAtScale, %s: no refreshes/s or s-to-last in the output:\n%s", name, out)
		}
	}
	if _, ok := f.against429["calls/5s"]; !ok {
		return nil, errors.New("BenchmarkRefreshAheadAgainst429: no calls/5s in the output:\n" + out)
	}
	return f, nil
}

// parseBenchOutput maps each benchmark line's name, without its -GOMAXPROCS
// suffix, to its metrics by unit. A benchmark run more than once keeps its
// last line (the one at the -benchtime asked for).
func parseBenchOutput(out string) map[string]benchFigures {
	got := map[string]benchFigures{}
	for line := range strings.Lines(out) {
		fields := strings.Fields(line)
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue // a benchmark's name printed before its own output, not a result
		}
		name := fields[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := benchFigures{}
		for i := 2; i+1 < len(fields); i += 2 {
			if v, err := strconv.ParseFloat(fields[i], 64); err == nil {
				m[fields[i+1]] = v
			}
		}
		got[name] = m
	}
	return got
}

// moduleRoot is the directory of the go.mod the harness is run in.
func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("-scale runs the root package's benchmarks: run it inside the module")
	}
	return filepath.Dir(mod), nil
}

// limitRate is what a limit of inFlight refreshes in flight allows against
// the endpoint's latency (Little's law): the default limit's ceiling.
func limitRate(inFlight int) float64 { return float64(inFlight) / refreshLatency.Seconds() }

// refreshTable: the figures beside their limits.
func (r *scaleResult) refreshTable(b *strings.Builder) {
	f := r.refresh
	if f == nil {
		return
	}
	fmt.Fprintf(b, "\n## Refreshing ahead at scale\n\n"+
		"`BenchmarkRefreshAheadAtScale` at %s connections (run in a child `go test -bench -benchtime %dx`, %s in all): GitHub-sized "+
		"records in Redis, read once so refresh ahead marks them, then the Module's clock jumps so that every one is due at once, "+
		"%s before it expires; one instance's worker refreshes them against a token endpoint that answers each refresh in %s. "+
		"The per-provider limit (`RefreshLimit.Concurrency`) defaults to %d in flight, GitHub's documented limit on concurrent "+
		"requests, so that limit alone caps an instance at %.0f refreshes/s. Raised to %d, the worker's share of one provider's "+
		"refreshes ahead caps it instead: %d in flight (`worker.GroupShare`, half the worker's %d slots, so a provider whose "+
		"endpoint hangs leaves room for the rest).\n\n"+
		"| per-provider limit | refreshes/s | limit | ratio | the last one refreshed after its due time | its slack |\n|---|---:|---:|---:|---:|---:|\n",
		commas(f.n), f.n, f.elapsed.Round(time.Second), refreshSlack, refreshLatency, defaultInFlight, limitRate(defaultInFlight), raisedInFlight,
		raisedCeiling, worker.MaxInFlight)
	for _, row := range []struct {
		name              string
		inFlight, ceiling int
		got               benchFigures
	}{{"default", defaultInFlight, defaultInFlight, f.defaultLimit}, {"raised", raisedInFlight, raisedCeiling, f.raised}} {
		fmt.Fprintf(b, "| %s, %d in flight | %.0f | %.0f (%d / %s) | %.2fx | %.1f s | %s |\n", row.name, row.inFlight, row.got["refreshes/s"],
			limitRate(row.ceiling), row.ceiling, refreshLatency, row.got["refreshes/s"]/limitRate(row.ceiling), row.got["s-to-last"], refreshSlack)
	}
	fmt.Fprintf(b, "\n`BenchmarkRefreshAheadAgainst429`: %d instances sharing one Redis, 2,000 connections due at once, a token endpoint "+
		"that answers every refresh 429 after %s. In the %s that follow the endpoint got **%.0f** calls: the first wave, at most %d in "+
		"flight per instance, goes out before any answer comes back (limit %d), and the slow-down the first 429 sets in the store "+
		"(`oauth:sys:slow:{provider}`, 30 s) holds back every instance after it.\n",
		instances429, refreshLatency, window429, f.against429["calls/5s"], defaultInFlight, instances429*defaultInFlight)
}
