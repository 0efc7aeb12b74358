package main

// The scale mode (-scale): what the library costs as the number of stored
// connections grows. It stores N connections through the public API against
// the Redis the suite uses and against MemoryKV, and reports Redis's memory
// per connection by key kind, the memory a finished sign-in leaves, the
// worker's pass and claim and the listing of a user's connections (which must
// not grow with N), and the time to store and re-encrypt all N, each beside
// its limit. It writes docs/SCALE.md and the chart docs/scale.svg.

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
)

// scaleConfig is one way a Module is set up: records sealed or plain,
// refresh ahead on or off.
type scaleConfig struct{ encrypted, ahead bool }

// main is the configuration every other figure is measured in.
func (c scaleConfig) main() bool { return c.encrypted && c.ahead }

func (c scaleConfig) String() string { return onOff(c.encrypted) + ", " + onOff(c.ahead) }

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

var scaleConfigs = []scaleConfig{{true, true}, {false, true}, {true, false}, {false, false}}

// Sizes of the mode.
const (
	scaleWorkers = 16 // goroutines storing and reading
	// tokenBytes are a connection's token bytes: "gho_" and 36 characters,
	// "ghr_" and 72, and the scope "repo,gist".
	tokenBytes    = 4 + 36 + 4 + 72 + len(scaleScope)
	scaleScope    = "repo,gist"
	scaleProvider = "github"
)

// parseCounts reads "10000,100000" (commas and underscores allowed in a number: "1_000_000").
func parseCounts(s string) ([]int, error) {
	var ns []int
	for item := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(item), "_", ""))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-scale-n: %q is not a positive count", item)
		}
		ns = append(ns, n)
	}
	return ns, nil
}

// userOf names connection i's user.
func userOf(i int) string { return fmt.Sprintf("user-%07d", i) }

// connectionTokens are connection i's GitHub-sized tokens, different for each
// connection so that no record is shared.
func connectionTokens(i int) *oauthflow.TokenSet {
	r := rand.New(rand.NewPCG(uint64(i), 0x5ca1e))
	return &oauthflow.TokenSet{AccessToken: "gho_" + alnum(r, 36), RefreshToken: "ghr_" + alnum(r, 72),
		Scope: scaleScope, ExpiresIn: 28800}
}

func alnum(r *rand.Rand, n int) string {
	const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

// parallel runs do(i) for every i below n on scaleWorkers goroutines and
// returns the first error.
func parallel(n int, do func(i int) error) error {
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range scaleWorkers {
		wg.Go(func() {
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				if err := do(i); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// scaleKey is one encryption key of the mode: its ID and its 32 bytes.
type scaleKey struct {
	ID  string
	Key []byte
}

// String is the key as a ring's text holds it (ParseKeyRing): "kid:base64key".
func (k scaleKey) String() string { return k.ID + ":" + base64.StdEncoding.EncodeToString(k.Key) }

// scaleKeys are the encryption keys of the mode: the first seals, the second
// is what Reencrypt moves records to, the third what the by-hand limit does.
func scaleKeys() [3]scaleKey {
	var ks [3]scaleKey
	for i := range ks {
		ks[i] = scaleKey{ID: "k" + strconv.Itoa(i+1), Key: []byte(strings.Repeat(strconv.Itoa(i+1), 32))}
	}
	return ks
}

// scaleModule is a Module as the issue sets it up, on kv. The worker looks
// for due work once an hour only: its passes would take the work the claim
// figures schedule.
func scaleModule(ctx context.Context, kv oauthflow.KV, prefix string, cfg scaleConfig, reg *oauthflow.Registry) (*oauthflow.Module, error) {
	c := oauthflow.Config{KV: kv, KeyPrefix: prefix, Registry: reg, Logger: slog.New(slog.DiscardHandler), WorkerInterval: time.Hour}
	if cfg.encrypted {
		ks := scaleKeys()
		ring, err := oauthflow.ParseKeyRing(ks[0].String())
		if err != nil {
			return nil, err
		}
		c.Encryption = ring
	}
	if cfg.ahead {
		c.RefreshAhead = 10 * time.Minute
	}
	return oauthflow.New(ctx, c)
}

// githubRegistry holds GitHub, the provider every connection is stored for.
func githubRegistry() (*oauthflow.Registry, error) {
	p, err := providers.New(scaleProvider, providers.Credentials{ClientID: "scale", ClientSecret: "scale",
		RedirectURL: "http://127.0.0.1/api/v1/oauth/callback"})
	if err != nil {
		return nil, err
	}
	reg := oauthflow.NewRegistry()
	return reg, reg.Register(p)
}

// storeAll stores n connections through mod and reads each once; it returns
// how long each half took.
func storeAll(ctx context.Context, mod *oauthflow.Module, n int) (store, read time.Duration, err error) {
	start := time.Now()
	err = parallel(n, func(i int) error {
		return mod.Tokens.StoreFromTokenSet(ctx, userOf(i), scaleProvider, connectionTokens(i))
	})
	if err != nil {
		return 0, 0, fmt.Errorf("store: %w", err)
	}
	store, start = time.Since(start), time.Now()
	err = parallel(n, func(i int) error {
		_, err := mod.Tokens.GetValidAccessToken(ctx, userOf(i), scaleProvider)
		return err
	})
	if err != nil {
		return 0, 0, fmt.Errorf("read: %w", err)
	}
	return store, time.Since(start), nil
}

// runScale is the -scale mode: every figure, then the report and the chart.
func runScale(o options) error {
	start := time.Now()
	e, err := newEnv(o)
	if err != nil {
		return err
	}
	defer e.close()
	if e.mini != nil {
		return errors.New("-scale measures Redis's own memory (MEMORY USAGE), which miniredis lacks: start a Redis at " + redisAddr())
	}
	s, err := newScaler(e)
	if err != nil {
		return err
	}
	if o.scaleOnly == "reencrypt" {
		return s.reencryptOnly(context.Background())
	}
	if err := s.measure(context.Background()); err != nil {
		return err
	}
	s.res.machine, s.res.elapsed = e.machine(), time.Since(start)
	if err := os.MkdirAll(filepath.Dir(o.scaleOut), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(scaleChartPath(o.scaleOut), []byte(s.res.chart()), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(o.scaleOut, []byte(s.res.report()), 0o644); err != nil {
		return err
	}
	return s.res.writeSummary(o.out)
}

// scaleChartPath is where the chart goes: beside the report, as scale.svg.
func scaleChartPath(report string) string { return filepath.Join(filepath.Dir(report), "scale.svg") }

// measure takes every figure: at each N in Redis and in memory, then the sign-ins.
func (s *scaler) measure(ctx context.Context) error {
	for _, n := range s.e.opts.scaleNs {
		p, err := s.point(ctx, n)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		s.res.points = append(s.res.points, p)
		s.progress("N=%d in Redis done", n)
		m, err := memoryPoint(ctx, n)
		if err != nil {
			return fmt.Errorf("MemoryKV, N=%d: %w", n, err)
		}
		s.res.memory = append(s.res.memory, m)
		s.progress("N=%d in memory done", n)
	}
	var err error
	if s.res.signIns, err = s.signIns(ctx, s.e.opts.scaleSignIns); err != nil {
		return fmt.Errorf("sign-ins: %w", err)
	}
	s.progress("sign-ins done")
	if n := s.e.opts.scaleRefresh; n > 0 {
		if s.res.refresh, err = refreshBenchmarks(ctx, n); err != nil {
			return fmt.Errorf("refreshing ahead: %w", err)
		}
		s.progress("refreshing ahead done")
	}
	return nil
}

// progress says on stderr how far the run is: it takes minutes.
func (s *scaler) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "scale: %s (%s)\n", fmt.Sprintf(format, args...), time.Now().Format(time.TimeOnly))
}
