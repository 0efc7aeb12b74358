// Command bench runs the whole benchmark suite and rewrites BENCHMARKS.md: every
// figure of the library beside its limit (what the same work costs done by hand,
// or the raw Redis command underneath), measured in the same run, interleaved,
// repeated, so that the ratio holds whatever the machine.
//
//	go run ./internal/cmd/bench [-rounds 5] [-out BENCHMARKS.md] [-quick] [-only callbacks]
//	go run ./internal/cmd/bench -scale [-scale-n 10000,100000] [-scale-out docs/SCALE.md] [-scale-only reencrypt]
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// options are the command line, and the sizes each mode measures with.
type options struct {
	rounds    int
	out       string
	quick     bool
	benchtime string
	blocks    int    // alternating blocks per round (see alternating)
	loadReqs  int    // requests per load test
	loadConc  int    // the load generator's concurrency
	storm     int    // callers in the refresh storm
	records   int    // token records for bytes per record
	sessions  int    // expired sessions for the reclaim figure
	only      string // one area's name (see areas), or "" for all
	baseline  string // a commit whose memory read is measured beside this tree's ("": none)
	baselineN int    // iterations of each baseline benchmark run

	scale        bool   // the scale mode (scale.go) instead of the suite: long, never part of the default run
	scaleNs      []int  // connection counts the scale mode stores
	scaleOut     string // the scale report; the chart goes beside it
	scaleSignIns int    // sign-ins the scale mode runs against Redis
	scaleRefresh int    // connections the scale mode refreshes ahead at once (0: not measured)
	scaleOnly    string // one scale figure alone, printed, no report: "reencrypt", or "" for all
}

func parseOptions(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.IntVar(&o.rounds, "rounds", 5, "rounds of every measurement (median, min, max)")
	fs.StringVar(&o.out, "out", "BENCHMARKS.md", "the report to write")
	fs.BoolVar(&o.quick, "quick", false, "a short smoke run: 1 round, small counts (CI)")
	fs.StringVar(&o.only, "only", "", "run one area alone: "+strings.Join(areaNames(), ", "))
	fs.StringVar(&o.baseline, "baseline", "", "a commit whose memory read to measure beside this tree's, in the same run (needs git)")
	fs.BoolVar(&o.scale, "scale", false, "measure memory and worker costs as stored connections grow, instead of the suite (minutes)")
	ns := fs.String("scale-n", "10000,100000", "connection counts for -scale, comma-separated (1000000 needs about 1 GB of Redis)")
	fs.StringVar(&o.scaleOut, "scale-out", "docs/SCALE.md", "the report -scale writes; its chart goes beside it as scale.svg")
	fs.IntVar(&o.scaleSignIns, "scale-signins", 10000, "sign-ins -scale runs end to end against Redis")
	fs.IntVar(&o.scaleRefresh, "scale-refreshes", 100000, "connections -scale refreshes ahead at once against a 100 ms provider (0: leave the area out)")
	fs.StringVar(&o.scaleOnly, "scale-only", "", "with -scale, take one figure alone at each N and print it instead of writing the report: reencrypt")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	var err error
	if o.scaleNs, err = parseCounts(*ns); err != nil {
		return o, err
	}
	if o.scaleRefresh < 0 {
		return o, fmt.Errorf("-scale-refreshes %d: want 0 or more", o.scaleRefresh)
	}
	if o.scaleSignIns < 1 {
		return o, fmt.Errorf("-scale-signins %d: want at least 1", o.scaleSignIns)
	}
	if o.scaleOnly != "" && o.scaleOnly != "reencrypt" {
		return o, fmt.Errorf("-scale-only %q: the one figure it takes alone is reencrypt", o.scaleOnly)
	}
	if o.only != "" && !slices.Contains(areaNames(), o.only) {
		return o, fmt.Errorf("-only %q: no such area (%s)", o.only, strings.Join(areaNames(), ", "))
	}
	o.sized()
	return o, nil
}

// sized fills the counts: the full run is sized for about three minutes on 2 cores.
func (o *options) sized() {
	o.benchtime, o.blocks, o.loadReqs, o.loadConc = "1s", 40, 4000, 32
	o.storm, o.records, o.sessions = 1000, 20000, 100000
	o.baselineN = 3_000_000
	if o.quick {
		o.rounds, o.benchtime, o.blocks, o.loadReqs, o.loadConc = 1, "100x", 4, 300, 8
		o.storm, o.records, o.sessions = 100, 1000, 5000
		o.baselineN = 1000
	}
}

func main() {
	if job := os.Getenv(loadgenEnv); job != "" {
		os.Exit(loadgenMain(job))
	}
	testing.Init() // testing.Benchmark reads -test.benchtime
	o, err := parseOptions(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if o.scale {
		err = runScale(o)
	} else {
		err = run(o)
	}
	if err != nil {
		log.Fatal(err)
	}
}

// run measures everything and writes the report.
func run(o options) error {
	start := time.Now()
	if err := flag.Set("test.benchtime", o.benchtime); err != nil {
		return err
	}
	env, err := newEnv(o)
	if err != nil {
		return err
	}
	defer env.close()
	rep := &report{machine: env.machine(), opts: o}
	for _, area := range areas {
		if o.only != "" && area.name != o.only {
			continue
		}
		tab, err := area.run(env)
		if err != nil {
			return fmt.Errorf("%s: %w", tab.title, err)
		}
		rep.tables = append(rep.tables, tab)
	}
	rep.elapsed = time.Since(start)
	return rep.write(o.out)
}

// areas are the report's tables, in order, each with the name -only knows it by.
var areas = []struct {
	name string
	run  func(*env) (*table, error)
}{
	{"reads", tokenReads}, {"client", clientRequests}, {"sessions", sessionTakes}, {"callbacks", callbacks},
	{"storm", refreshStorm}, {"memory", memoryFigures},
}

func areaNames() []string {
	names := make([]string, len(areas))
	for i, a := range areas {
		names[i] = a.name
	}
	return names
}
