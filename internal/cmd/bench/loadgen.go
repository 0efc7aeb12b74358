package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// loadgenEnv names the job file when the binary runs as the load generator. An
// environment variable, not a flag, so a test binary can be re-executed too.
const loadgenEnv = "OAUTHFLOW_BENCH_LOADGEN"

// job is what the parent hands the load generator: prepared single-use callback
// URLs and how many to keep in flight.
type job struct {
	URLs        []string      `json:"urls"`
	Concurrency int           `json:"concurrency"`
	Bound       time.Duration `json:"bound"` // the whole run gives up after this
}

// result is what the load generator prints.
type result struct {
	N      int     `json:"n"`
	Errors int     `json:"errors"`
	RPS    float64 `json:"rps"`
	P50    float64 `json:"p50_ms"`
	P99    float64 `json:"p99_ms"`
}

// fire runs j in a second process (this binary re-executed), so the load's CPU
// is not the server's goroutines' own, and returns its figures.
func fire(j job, dir string) (result, error) {
	var r result
	path := filepath.Join(dir, "job.json")
	b, err := json.Marshal(j)
	if err == nil {
		err = os.WriteFile(path, b, 0o600)
	}
	if err != nil {
		return r, err
	}
	self, err := os.Executable()
	if err != nil {
		return r, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), loadgenEnv+"="+path)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("load generator: %w: %s", err, stderr.String())
	}
	return r, json.Unmarshal(out.Bytes(), &r)
}

// loadgenMain is the child's main.
func loadgenMain(path string) int {
	var j job
	b, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(b, &j)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(runLoad(j))
	return 0
}

// runLoad fires every URL once from j.Concurrency workers over keep-alive
// connections and measures each request's latency.
func runLoad(j job) result {
	ctx, cancel := context.WithTimeout(context.Background(), j.Bound)
	defer cancel()
	tr := &http.Transport{MaxIdleConns: j.Concurrency, MaxIdleConnsPerHost: j.Concurrency}
	client := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	lat := make([]float64, len(j.URLs))
	var next atomic.Int64
	var errs atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range max(j.Concurrency, 1) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < len(j.URLs); i = int(next.Add(1) - 1) {
				t0 := time.Now()
				if !get(ctx, client, j.URLs[i]) {
					errs.Add(1)
				}
				lat[i] = float64(time.Since(t0).Microseconds()) / 1000
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(lat)
	return result{N: len(lat), Errors: int(errs.Load()), RPS: float64(len(lat)) / elapsed.Seconds(),
		P50: percentile(lat, 0.50), P99: percentile(lat, 0.99)}
}

func get(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(int(float64(len(sorted))*p), len(sorted)-1)]
}
