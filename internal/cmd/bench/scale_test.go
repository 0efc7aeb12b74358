package main

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
)

// TestScaleRun runs the scale mode with tiny counts against the real Redis
// (MEMORY USAGE is what it measures, and miniredis lacks it; the test fails
// under CI=true without one) and checks the report, the chart, and that it
// left no key behind. It asserts no speed figure.
func TestScaleRun(t *testing.T) {
	rdb := redistest.Real(t)
	dir := t.TempDir()
	o, err := parseOptions([]string{"-scale", "-scale-n", "200,400", "-scale-signins", "30", "-scale-refreshes", "0",
		"-scale-out", filepath.Join(dir, "SCALE.md")})
	if err != nil {
		t.Fatal(err)
	}
	e, err := newEnv(o)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	s, err := newScaler(e)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.measure(context.Background()); err != nil {
		t.Fatal(err)
	}
	if left, _, err := rdb.Scan(context.Background(), 0, e.prefix+"*", 100000).Result(); err != nil || len(left) > 0 {
		t.Errorf("the run left %d keys under its prefix (%v): %v", len(left), err, left[:min(len(left), 5)])
	}
	checkFigures(t, &s.res)
	checkReport(t, s.res.report())
	checkChart(t, s.res.chart())
	checkSummary(t, &s.res)
}

// checkSummary holds the Scale section to its figures and targets: a row
// of bytes per connection for each N, held to 520 B.
func checkSummary(t *testing.T, r *scaleResult) {
	t.Helper()
	sum := r.summary(".")
	for _, want := range []string{scaleBegin, "## Scale", "### Scale gaps", "Redis bytes per connection, sealed, refresh ahead on, N = 200",
		"Redis bytes per connection, sealed, refresh ahead on, N = 400", "Redis bytes per completed sign-in", "| <= 520 B |", scaleEnd} {
		if !strings.Contains(sum, want) {
			t.Errorf("the Scale section lacks %q:\n%s", want, sum)
		}
	}
	if strings.Contains(sum, "refreshes ahead/s") {
		t.Errorf("the Scale section shows refresh figures the run did not measure:\n%s", sum)
	}
}

// checkFigures holds the figures to what must be true of any store of
// GitHub-sized tokens, whatever the machine.
func checkFigures(t *testing.T, r *scaleResult) {
	t.Helper()
	for _, p := range r.points {
		for _, c := range p.configs {
			if got := c.census.of("token"); got.keys != int64(p.n) || got.values/got.keys <= int64(tokenBytes) {
				t.Errorf("N=%d %v: %d token records of %d B each, want %d of more than the %d token bytes", p.n, c.cfg, got.keys, got.values/max(got.keys, 1), p.n, tokenBytes)
			}
			if got := c.census.of("due").members; c.cfg.ahead != (got == int64(p.n)) || !c.cfg.ahead && got != 0 {
				t.Errorf("N=%d %v: the due index holds %d members", p.n, c.cfg, got)
			}
		}
		if p.reenc.rewritten != p.n || p.worker.entries != int64(p.n) || len(p.lists) != 3 {
			t.Errorf("N=%d: %d records re-encrypted, %d due entries, %d listings", p.n, p.reenc.rewritten, p.worker.entries, len(p.lists))
		}
		if total := float64(p.main().census.total()) / float64(p.n); total <= p.limit() {
			t.Errorf("N=%d: %.0f B per connection, not above the limit %.0f B that it includes", p.n, total, p.limit())
		}
	}
	if s := r.signIns; s == nil || s.census.of("run").keys != int64(s.m) || s.keptFor <= 0 {
		t.Errorf("the sign-ins left %+v", s)
	}
}

func checkReport(t *testing.T, report string) {
	t.Helper()
	for _, want := range []string{"## Reproduce", "## Bytes per connection in Redis", "### Which part is Redis's and which is ours",
		"## Bytes per completed sign-in in Redis", "## The worker's pass and claim as N grows", "## Listing a user's connections",
		"## Storing and re-encrypting all N", "## MemoryKV", "go run ./internal/cmd/bench -scale -scale-n 200,400 -scale-signins 30 -scale-refreshes 0", "| 400 | on | on |", "## Notes"} {
		if !strings.Contains(report, want) {
			t.Errorf("the report lacks %q", want)
		}
	}
	for _, bad := range []string{"NaN", "Inf", "%!"} {
		if strings.Contains(report, bad) {
			t.Errorf("the report holds %q:\n%s", bad, report)
		}
	}
}

// checkChart wants well-formed SVG with a bar and a line for each N.
func checkChart(t *testing.T, svg string) {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(svg))
	count := map[string]int{}
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v", err)
		}
		if el, ok := tok.(xml.StartElement); ok {
			count[el.Name.Local]++
		}
	}
	if count["svg"] != 1 || count["polyline"] != 4 || count["circle"] != 4*2 || count["rect"] < 4*2 {
		t.Errorf("the chart holds %v", count)
	}
}

func TestParseCounts(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		ok   bool
	}{{"10000,100000", []int{10000, 100000}, true}, {"1_000_000", []int{1000000}, true}, {" 5 ", []int{5}, true},
		{"", nil, false}, {"10,x", nil, false}, {"0", nil, false}, {"-3", nil, false}} {
		got, err := parseCounts(tc.in)
		if (err == nil) != tc.ok || !slices.Equal(got, tc.want) {
			t.Errorf("parseCounts(%q) = %v, %v", tc.in, got, err)
		}
	}
}

// The refresh area reads the root benchmarks' output: each benchmark's last
// line, its name without the GOMAXPROCS suffix, its metrics by unit.
func TestParseRefreshBenchmarks(t *testing.T) {
	const out = `goos: linux
BenchmarkRefreshAheadAtScale/default-limit-2         	       1	 101000000 ns/op	         9.9 refreshes/s	         0.1 s-to-last
BenchmarkRefreshAheadAtScale/default-limit-2         	  100000	   1170000 ns/op	       854.0 refreshes/s	       117.1 s-to-last
BenchmarkRefreshAheadAtScale/concurrency-250-2       	  100000	    833000 ns/op	      1200.0 refreshes/s	        83.3 s-to-last
BenchmarkRefreshAheadAgainst429
    bench_test.go:1: a log line
BenchmarkRefreshAheadAgainst429-2                    	  100000	  50000000 ns/op	       0 calls-beyond-first-wave	       200.0 calls/5s
PASS
`
	f, err := parseRefreshBenchmarks(out, 100000, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if f.defaultLimit["refreshes/s"] != 854 || f.defaultLimit["s-to-last"] != 117.1 || f.raised["refreshes/s"] != 1200 || f.against429["calls/5s"] != 200 {
		t.Errorf("parsed %+v", f)
	}
	r := &scaleResult{refresh: f}
	var b strings.Builder
	r.refreshTable(&b)
	for _, want := range []string{"## Refreshing ahead at scale", "| default, 100 in flight | 854 | 1000 (100 / 100ms) | 0.85x | 117.1 s | 10m0s |",
		"| raised, 250 in flight | 1200 | 1280 (128 / 100ms) | 0.94x |", "got **200** calls"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the refresh table lacks %q:\n%s", want, b.String())
		}
	}
	rows := r.summaryRows()
	if len(rows) != 4 || rows[0].metText() != "yes" || rows[2].metText() != "yes" || rows[3].metText() != "yes" {
		t.Errorf("summary rows %+v", rows)
	}
	if _, err := parseRefreshBenchmarks(strings.ReplaceAll(out, "s-to-last", "x"), 100000, time.Minute); err == nil {
		t.Error("an output without s-to-last was read")
	}
}

// The suite's run keeps the Scale section -scale wrote, and -scale replaces
// only that section.
func TestScaleSectionKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "BENCHMARKS.md")
	if !strings.Contains(scaleSection(path), "Not measured yet") {
		t.Error("a report without a Scale section does not say how to write it")
	}
	doc := "# Benchmarks\n\n## Gaps\n\n" + scaleBegin + "\n## Scale\n\nold figures\n" + scaleEnd + "\n\n" + notesHeading + ", appended verbatim)\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := scaleSection(path); !strings.Contains(got, "old figures") || !strings.HasSuffix(got, scaleEnd+"\n") {
		t.Errorf("kept %q", got)
	}
	r := &scaleResult{opts: options{scaleOut: filepath.Join(filepath.Dir(path), "docs", "SCALE.md")}}
	if err := r.writeSummary(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if strings.Contains(got, "old figures") || strings.Count(got, scaleBegin) != 1 || !strings.Contains(got, "[docs/SCALE.md](docs/SCALE.md)") ||
		!strings.HasPrefix(got, "# Benchmarks\n\n## Gaps\n\n") || !strings.HasSuffix(got, notesHeading+", appended verbatim)\n") {
		t.Errorf("after -scale the report reads:\n%s", got)
	}
}

// The suite's run reads the Scale section back only from a regular file: a
// report written to a pipe (-out /dev/stdout) is not read, which would wait
// for a writer that never comes.
func TestScaleSectionNotReadFromAPipe(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { got <- scaleSection(fifo) }()
	select {
	case s := <-got:
		if !strings.Contains(s, "Not measured yet") {
			t.Errorf("from a pipe: %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("scaleSection opened the pipe to read it")
	}
}
