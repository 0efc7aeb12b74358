package main

// The Scale section of BENCHMARKS.md: the headline figures of a -scale run,
// each beside its limit and its target, and the targets they miss. -scale
// writes it between two markers; the suite's own run, which rewrites the rest
// of the file, keeps it as it finds it.

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

//go:embed SCALE_NOTES.md
var scaleNotes string

const (
	scaleBegin = "<!-- scale: written by go run ./internal/cmd/bench -scale; the suite's run keeps it -->"
	scaleEnd   = "<!-- /scale -->"

	maxBytesPerConn   = 520  // issue 36's target, sealed with refresh ahead on, at every N
	maxBytesPerSignIn = 1024 // and per completed sign-in
	minRefreshRate    = 1000 // refreshes ahead per second, one instance, under capacity
	minDefaultRate    = 950  // refreshes ahead per second under the default limit (its ceiling: 1,000)
	maxReencrypt      = 2.0  // Reencrypt's time beside the batched walk by hand
	maxIdleGrowth     = 1.5  // how much an idle pass's ratio to a PING may grow from the smallest N to the largest
)

// scaleRow is one headline figure.
type scaleRow struct {
	figure, value, limit, ratio, target string
	met                                 *bool // nil: reported, no target
}

func (r scaleRow) metText() string {
	switch {
	case r.met == nil:
		return "–"
	case *r.met:
		return "yes"
	}
	return "**no**"
}

func verdict(ok bool) *bool { return &ok }

// summaryRows are the headline figures of the run.
func (r *scaleResult) summaryRows() []scaleRow {
	var rows []scaleRow
	if len(r.points) > 0 {
		first, last := r.points[0], r.points[len(r.points)-1]
		for _, p := range r.points {
			total := float64(p.main().census.total()) / float64(p.n)
			rows = append(rows, scaleRow{fmt.Sprintf("Redis bytes per connection, sealed, refresh ahead on, N = %s", commas(p.n)),
				bytesOf(total), fmt.Sprintf("%s (the token bytes and one key)", bytesOf(p.limit())), ratioOf(total, p.limit()),
				fmt.Sprintf("<= %d B", maxBytesPerConn), verdict(total <= maxBytesPerConn)})
		}
		from, to := first.worker.idle.median/first.worker.ping.median, last.worker.idle.median/last.worker.ping.median
		rows = append(rows, scaleRow{fmt.Sprintf("the worker's idle pass, N = %s (%.2fx a PING at N = %s)", commas(last.n), from, commas(first.n)),
			us(last.worker.idle), "a PING: " + us(last.worker.ping), fmt.Sprintf("%.2fx", to),
			fmt.Sprintf("flat: <= %.1f times the ratio at N = %s", maxIdleGrowth, commas(first.n)), verdict(to <= maxIdleGrowth*from)})
		for _, l := range last.lists {
			if l.k == 100 {
				rows = append(rows, scaleRow{fmt.Sprintf("Tokens.Connections, 100 connections, N = %s", commas(last.n)), us(l.lib),
					"ZRANGE + MGET: " + us(l.limit), ratioOf(l.lib.median, l.limit.median), "", nil})
			}
		}
		main := last.main()
		rows = append(rows, scaleRow{fmt.Sprintf("storing all %s connections", commas(last.n)), main.store.Round(time.Millisecond).String(),
			"by hand: " + last.storeLimit.Round(time.Millisecond).String(), ratioOf(main.store.Seconds(), last.storeLimit.Seconds()), "", nil})
		rows = append(rows, scaleRow{fmt.Sprintf("Reencrypt of all %s records", commas(last.n)), last.reenc.lib.Round(time.Millisecond).String(),
			"by hand, batched: " + last.reenc.byHand.Round(time.Millisecond).String(), ratioOf(last.reenc.lib.Seconds(), last.reenc.byHand.Seconds()),
			fmt.Sprintf("<= %.0fx", maxReencrypt), verdict(last.reenc.lib.Seconds() <= maxReencrypt*last.reenc.byHand.Seconds())})
	}
	if s := r.signIns; s != nil {
		rows = append(rows, scaleRow{"Redis bytes per completed sign-in, kept for FinishedRunTTL", bytesOf(s.own()),
			bytesOf(s.ownLimit()) + " (its values and a key each)", ratioOf(s.own(), s.ownLimit()), fmt.Sprintf("<= %d B", maxBytesPerSignIn),
			verdict(s.own() <= maxBytesPerSignIn)})
	}
	for _, m := range r.memory {
		main := m.perConn[scaleConfig{true, true}]
		rows = append(rows, scaleRow{fmt.Sprintf("MemoryKV heap per connection, sealed, refresh ahead on, N = %s", commas(m.n)), bytesOf(main),
			bytesOf(m.floor) + " (a map of names to token bytes)", ratioOf(main, m.floor), "", nil})
	}
	if f := r.refresh; f != nil {
		raised, def := f.raised["refreshes/s"], f.defaultLimit["refreshes/s"]
		rows = append(rows,
			scaleRow{fmt.Sprintf("refreshes ahead/s, one instance, %s due at once, 100 ms provider, limit raised to %d", commas(f.n), raisedInFlight),
				fmt.Sprintf("%.0f/s", raised), fmt.Sprintf("%.0f/s (%d in flight, the worker's share of one provider / 100 ms)", limitRate(raisedCeiling), raisedCeiling),
				ratioOf(raised, limitRate(raisedCeiling)), fmt.Sprintf(">= %d/s", minRefreshRate), verdict(raised >= minRefreshRate)},
			scaleRow{fmt.Sprintf("refreshes ahead/s, the same, default limit of %d in flight", defaultInFlight), fmt.Sprintf("%.0f/s", def),
				fmt.Sprintf("%.0f/s (the limit alone)", limitRate(defaultInFlight)), ratioOf(def, limitRate(defaultInFlight)),
				fmt.Sprintf(">= %d/s", minDefaultRate), verdict(def >= minDefaultRate)},
			scaleRow{"the last of them refreshed after its due time (default limit)", fmt.Sprintf("%.1f s", f.defaultLimit["s-to-last"]),
				"its slack: " + refreshSlack.String(), ratioOf(f.defaultLimit["s-to-last"], refreshSlack.Seconds()),
				"within its slack", verdict(f.defaultLimit["s-to-last"] <= refreshSlack.Seconds())},
			scaleRow{fmt.Sprintf("calls in %s to a provider answering 429, %d instances", window429, instances429),
				fmt.Sprintf("%.0f", f.against429["calls/5s"]), fmt.Sprintf("%d (the first wave)", instances429*defaultInFlight),
				ratioOf(f.against429["calls/5s"], instances429*defaultInFlight), "none after the first wave",
				verdict(f.against429["calls/5s"] <= instances429*defaultInFlight)})
	}
	return rows
}

// summary is the Scale section, markers included; links are relative to benchDir.
func (r *scaleResult) summary(benchDir string) string {
	report, err := filepath.Rel(benchDir, r.opts.scaleOut)
	if err != nil {
		report = r.opts.scaleOut
	}
	report = filepath.ToSlash(report)
	chart := filepath.ToSlash(filepath.Join(filepath.Dir(report), "scale.svg"))
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n## Scale\n\nFrom `%s` on %s (%s); every figure, how it is measured and what was tried is in "+
		"[%s](%s).\n\n![Bytes per connection by key kind, and the worker's claim, as N grows](%s)\n\n"+
		"| figure | value | limit | ratio | target | met |\n|---|---|---|---|---|---|\n",
		scaleBegin, r.command(), time.Now().UTC().Format("2006-01-02 15:04 UTC"), r.elapsed.Round(time.Second), report, report, chart)
	rows := r.summaryRows()
	for _, row := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", row.figure, row.value, row.limit, row.ratio, orDash(row.target), row.metText())
	}
	b.WriteString("\n### Scale gaps\n\n")
	n := 0
	for _, row := range rows {
		if row.met != nil && !*row.met {
			fmt.Fprintf(&b, "- %s: %s against a target of %s (limit %s). Why, and what was tried: [%s](%s#notes).\n",
				row.figure, row.value, row.target, row.limit, report, report)
			n++
		}
	}
	if n == 0 {
		b.WriteString("Every scale target is met in this run.\n")
	}
	b.WriteString(scaleEnd + "\n")
	return b.String()
}

// scaleSection returns the Scale section of the report at path, markers
// included, or a line saying how to write it when the file has none.
// Only a regular file is read: -out /dev/stdout must not read the standard
// output back.
func scaleSection(path string) string {
	var old []byte
	fi, err := os.Stat(path)
	if err == nil && fi.Mode().IsRegular() {
		old, err = os.ReadFile(path)
	}
	if err == nil {
		if s, ok := cutSection(string(old)); ok {
			return s
		}
	}
	return scaleBegin + "\n## Scale\n\nNot measured yet: `go run ./internal/cmd/bench -scale` writes this section.\n" + scaleEnd + "\n"
}

// cutSection finds the Scale section in doc.
func cutSection(doc string) (string, bool) {
	i := strings.Index(doc, scaleBegin)
	j := strings.Index(doc, scaleEnd)
	if i < 0 || j < i {
		return "", false
	}
	return doc[i:j+len(scaleEnd)] + "\n", true
}

// writeSummary puts the run's Scale section into the report at path in place
// of the one there, or before its notes when it has none.
func (r *scaleResult) writeSummary(path string) error {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return os.WriteFile(path, []byte(r.summary(".")), 0o644) // -out /dev/stdout: the section alone
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("the Scale section goes into %s (-out): %w", path, err)
	}
	doc, section := string(old), r.summary(filepath.Dir(path))
	if s, ok := cutSection(doc); ok {
		doc = strings.Replace(doc, s, section, 1)
	} else if k := strings.Index(doc, notesHeading); k >= 0 {
		doc = doc[:k] + section + "\n" + doc[k:]
	} else {
		return errors.New(path + " has neither a Scale section nor the notes heading to put one before")
	}
	return os.WriteFile(path, []byte(doc), 0o644)
}
