package main

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/redistest"
)

// TestScaleRun runs the scale mode with tiny counts against the real Redis
// (MEMORY USAGE is what it measures, and miniredis lacks it; the test fails
// under CI=true without one) and checks the report, the chart, and that it
// left no key behind. It asserts no speed figure.
func TestScaleRun(t *testing.T) {
	rdb := redistest.Real(t)
	dir := t.TempDir()
	o, err := parseOptions([]string{"-scale", "-scale-n", "200,400", "-scale-signins", "30", "-scale-out", filepath.Join(dir, "SCALE.md")})
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
		"## Storing and re-encrypting all N", "## MemoryKV", "go run ./internal/bench -scale -scale-n 200,400 -scale-signins 30", "| 400 | on | on |"} {
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
