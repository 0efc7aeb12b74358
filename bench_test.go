package oauthflow_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The baselines (raw go-redis GET and GETDEL) run in the same process and on the
// same client as the library's calls, so their figures compare directly.
// See BENCHMARKS.md for how to run them and the recorded results.

const benchRecord = `{"accessToken":"gho_16C7e42F292c6912E7710c838347Ae178B4a","refreshToken":"ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498","expiresAt":4102444800000,"scope":"repo read:user"}`

const benchKey = "oauth:bench-user:github" // the token store's key for bench-user's github tokens

func benchStore(b *testing.B, kv oauthflow.KV) *oauthflow.TokenStore {
	b.Helper()
	return benchStoreOf(b, kv, benchRecord)
}

// benchStoreOf is a store over kv whose bench-user holds record as stored.
func benchStoreOf(tb testing.TB, kv oauthflow.KV, record string) *oauthflow.TokenStore {
	tb.Helper()
	store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	if err := kv.Set(context.Background(), benchKey, []byte(record), time.Hour); err != nil {
		tb.Fatal(err)
	}
	return store
}

// boundBenchRecord is benchRecord bound to a key of its own (DPoP), as the
// library stores a bound grant: the token type and the encoded key follow
// the scope.
func boundBenchRecord(tb testing.TB) string {
	tb.Helper()
	k, err := dpop.NewKey()
	if err != nil {
		tb.Fatal(err)
	}
	b, err := k.MarshalBinary()
	if err != nil {
		tb.Fatal(err)
	}
	return strings.TrimSuffix(benchRecord, "}") + `,"tokenType":"DPoP","dpopKey":"` + base64.RawURLEncoding.EncodeToString(b) + `"}`
}

// sealedBenchStore is benchStore with the record sealed under a key ring.
func sealedBenchStore(b *testing.B, kv oauthflow.KV) *oauthflow.TokenStore {
	b.Helper()
	store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)),
		oauthflow.WithEncryption(keyRing(b, newKey(b, "k1"))))
	err := store.StoreTokens(context.Background(), "bench-user", "github", oauthflow.StoredTokens{
		AccessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a", RefreshToken: "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498",
		ExpiresAt: 4102444800000, Scope: "repo read:user"})
	if err != nil {
		b.Fatal(err)
	}
	return store
}

// benchRedis gives a benchmark the shared real Redis: a client, a KV on it under
// a key prefix of the benchmark's own, and that prefix, so the raw baselines can
// name the same keys. Every key under the prefix is deleted when the benchmark
// ends, and prefixGuard fails it if it names any key outside.
func benchRedis(b *testing.B) (oauthflow.KV, redis.UniversalClient, string) {
	c := redistest.Real(b)
	g := &prefixGuard{tb: b}
	b.Cleanup(g.checkLeftovers(c)) // runs after Prefix's cleanup
	g.prefix = redistest.Prefix(b, c)
	c.AddHook(g)
	return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), g.prefix), c, g.prefix
}

func BenchmarkGetValidAccessToken(b *testing.B) {
	ctx := context.Background()
	b.Run("memory", func(b *testing.B) {
		store := benchStore(b, oauthflow.NewMemoryKV())
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.GetValidAccessToken(ctx, "bench-user", "github"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// Sealed at rest (AES-256-GCM): memory keeps the opened record beside the
	// value; Redis opens it on every read.
	b.Run("memory/sealed", func(b *testing.B) {
		store := sealedBenchStore(b, oauthflow.NewMemoryKV())
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.GetValidAccessToken(ctx, "bench-user", "github"); err != nil {
				b.Fatal(err)
			}
		}
	})
	// DPoP-bound: the record also holds the token type and the key, which the
	// read hands back as a view of the record, so it costs what a Bearer read does.
	b.Run("memory/dpop", func(b *testing.B) {
		store := benchStoreOf(b, oauthflow.NewMemoryKV(), boundBenchRecord(b))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.GetValidAccessToken(ctx, "bench-user", "github"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redis/sealed/goroutines=1", func(b *testing.B) {
		kv, _, _ := benchRedis(b)
		store := sealedBenchStore(b, kv)
		inParallel(b, 1, func() error {
			_, err := store.GetValidAccessToken(ctx, "bench-user", "github")
			return err
		})
	})
	for _, g := range []int{1, 8, 64} {
		b.Run(fmt.Sprintf("redis/goroutines=%d", g), func(b *testing.B) {
			kv, _, _ := benchRedis(b)
			store := benchStore(b, kv)
			inParallel(b, g, func() error {
				_, err := store.GetValidAccessToken(ctx, "bench-user", "github")
				return err
			})
		})
		b.Run(fmt.Sprintf("redis/dpop/goroutines=%d", g), func(b *testing.B) {
			kv, _, _ := benchRedis(b)
			store := benchStoreOf(b, kv, boundBenchRecord(b))
			inParallel(b, g, func() error {
				_, err := store.GetValidAccessToken(ctx, "bench-user", "github")
				return err
			})
		})
		b.Run(fmt.Sprintf("raw-redis-GET/goroutines=%d", g), func(b *testing.B) {
			kv, c, prefix := benchRedis(b)
			benchStore(b, kv)
			inParallel(b, g, func() error { return c.Get(ctx, prefix+benchKey).Err() })
		})
	}
}

// inParallel runs op b.N times in all from g goroutines (at least GOMAXPROCS of
// them when g > 1, as RunParallel starts a multiple of GOMAXPROCS).
func inParallel(b *testing.B, g int, op func() error) {
	b.ReportAllocs()
	if g == 1 {
		for b.Loop() {
			if err := op(); err != nil {
				b.Fatal(err)
			}
		}
		return
	}
	b.SetParallelism(max(g/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkConsume(b *testing.B) {
	ctx := context.Background()
	session := oauthflow.Session{WorkflowID: "run-0123456789", UserID: "bench-user", Provider: "github", CodeVerifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"}
	prepare := func(b *testing.B, kv oauthflow.KV) (*oauthflow.SessionService, []string) {
		ss := oauthflow.NewSessionService(kv)
		states := make([]string, b.N)
		for i := range states {
			states[i] = fmt.Sprintf("bench-state-%d", i)
			if err := ss.Register(ctx, states[i], session); err != nil {
				b.Fatal(err)
			}
		}
		return ss, states
	}
	b.Run("memory", func(b *testing.B) {
		ss, states := prepare(b, oauthflow.NewMemoryKV())
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := ss.Consume(ctx, states[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redis", func(b *testing.B) {
		kv, _, _ := benchRedis(b)
		ss, states := prepare(b, kv)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := ss.Consume(ctx, states[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-redis-GETDEL", func(b *testing.B) {
		kv, c, prefix := benchRedis(b)
		_, states := prepare(b, kv)
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := c.GetDel(ctx, prefix+"oauth:session:"+states[i]).Bytes(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// countHook counts the commands a client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { h.n.Add(1); return next(ctx, cmd) }
}
func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// A valid read is one GET, Bearer or DPoP-bound, with the authorization
// details a FAPI grant keeps or without: the key a bound token is sent with
// and what was granted are in the record, never fetched apart.
func TestValidTokenReadIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	fapi := strings.TrimSuffix(boundBenchRecord(t), "}") + `,"authorizationDetails":[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"12.50"}}]}`
	for name, record := range map[string]string{"bearer": benchRecord, "dpop": boundBenchRecord(t), "dpop with authorization details": fapi} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, c := redistest.Mini(t)
			hook := &countHook{}
			c.AddHook(hook)
			store := benchStoreOf(t, oauthflow.NewRedisKV(c), record)
			before := hook.n.Load()
			for range 10 {
				_, err := store.GetValidAccessToken(context.Background(), "bench-user", "github")
				require.NoError(t, err)
			}
			assert.EqualValues(t, 10, hook.n.Load()-before, "ten reads of a valid token, ten Redis commands")
		})
	}
}

// BenchmarkClientRequest sends a GET through Tokens.Client (a memory store,
// so the read is free) to a local API that answers 200 at once, with a
// Bearer token and with a DPoP-bound one. The difference is what a bound
// request adds: a fresh proof signed with the grant's key (ES256), its
// header, and the nonce map's lookup for the API's origin. The API checks
// the scheme (and that a proof came) but verifies nothing, so its side
// costs the same for both.
func BenchmarkClientRequest(b *testing.B) {
	api := httptest.NewServer(http.HandlerFunc(benchAPI))
	b.Cleanup(api.Close)
	for _, c := range []struct{ name, record string }{{"bearer", benchRecord}, {"dpop", boundBenchRecord(b)}} {
		b.Run(c.name, func(b *testing.B) {
			kv := oauthflow.NewMemoryKV()
			client := benchStoreOf(b, kv, c.record).Client(context.Background(), "bench-user", "github")
			b.ReportAllocs()
			for b.Loop() {
				if err := benchGet(client, api.URL+"/"+c.name); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchAPI answers 200 to a request carrying the token as the path names it
// (/bearer: "Bearer <token>"; /dpop: "DPoP <token>" and a proof), 401 to any other.
func benchAPI(w http.ResponseWriter, r *http.Request) {
	const token = "gho_16C7e42F292c6912E7710c838347Ae178B4a"
	ok := r.URL.Path == "/bearer" && r.Header.Get("Authorization") == "Bearer "+token ||
		r.URL.Path == "/dpop" && r.Header.Get("Authorization") == "DPoP "+token && r.Header.Get("DPoP") != ""
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
	}
}

// benchGet GETs url and reads the answer to its end, so the connection is reused.
func benchGet(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the API answered %d", resp.StatusCode)
	}
	return nil
}

// Every benchmark of the package runs in CI as a short smoke (100 iterations
// each, in a child process, figures unread): it still works, and the Redis ones
// keep to their own prefix on the shared Redis and leave nothing behind, with
// prefixGuard watching.
func TestBenchmarksSmoke(t *testing.T) {
	t.Parallel()
	redistest.Real(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$", "-test.benchtime=100x", "-test.bench=.")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the benchmarks, run 100 times each, failed: %v\n%s", err, out)
	}
	require.Contains(t, string(out), "BenchmarkGetValidAccessToken/memory", "the smoke ran the benchmarks")
}

// prefixGuard fails a benchmark whose client names a key outside prefix, or that
// leaves a key under it behind.
type prefixGuard struct {
	tb     testing.TB
	prefix string
}

func (g *prefixGuard) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *prefixGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { g.check(cmd); return next(ctx, cmd) }
}
func (g *prefixGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			g.check(cmd)
		}
		return next(ctx, cmds)
	}
}

func (g *prefixGuard) check(cmd redis.Cmder) {
	for _, key := range cmdKeys(cmd) {
		if !strings.HasPrefix(key, g.prefix) {
			g.tb.Errorf("%s names key %q, outside the benchmark's prefix %q", cmd.Name(), key, g.prefix)
		}
	}
}

func (g *prefixGuard) checkLeftovers(c redis.UniversalClient) func() {
	return func() {
		keys, _, err := c.Scan(context.Background(), 0, g.prefix+"*", 1000).Result()
		if err != nil || len(keys) > 0 {
			g.tb.Errorf("keys left under %q: %v %v", g.prefix, keys, err)
		}
	}
}

// cmdKeys returns the keys cmd names: a script's KEYS, else its first argument.
func cmdKeys(cmd redis.Cmder) []string {
	args := cmd.Args()
	switch cmd.Name() {
	case "hello", "client", "ping", "scan", "select", "auth", "info", "script":
		return nil
	case "eval", "evalsha", "eval_ro", "evalsha_ro":
		n, _ := args[2].(int)
		return stringArgs(args[3 : 3+n])
	}
	return stringArgs(args[1:min(2, len(args))])
}

func stringArgs(args []any) []string {
	s := make([]string, len(args))
	for i, a := range args {
		s[i] = fmt.Sprint(a)
	}
	return s
}

// BenchmarkRefreshAheadAtScale is refresh ahead draining connections that
// all came due at once, on one instance over real Redis, against a provider
// whose token endpoint answers each refresh after 100 ms. Its figure is
// refreshes/s: the target is at least 1,000 on 2 cores (issue 25). With the
// default per-provider concurrency of 100 the provider's limit caps it at
// 1,000; with the limit raised the worker's share of one provider's
// refreshes ahead, 128 in flight, does.
func BenchmarkRefreshAheadAtScale(b *testing.B) {
	for _, concurrency := range []int{0, 250} {
		name := "default-limit"
		if concurrency > 0 {
			name = fmt.Sprintf("concurrency-%d", concurrency)
		}
		b.Run(name, func(b *testing.B) { benchRefreshAheadAtScale(b, concurrency) })
	}
}

func benchRefreshAheadAtScale(b *testing.B, concurrency int) {
	const latency = 100 * time.Millisecond
	var served atomic.Int64
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(latency) // the provider's own time
		n := served.Add(1)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"gho_%036d","refresh_token":"ghr_%072d","expires_in":28800,"token_type":"bearer","scope":"repo"}`, n, n)
	}))
	b.Cleanup(token.Close)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 512, MaxConnsPerHost: 512}}
	p, err := providers.NewOAuth2(providers.Config{ID: "github", AuthURL: token.URL + "/authorize", TokenURL: token.URL + "/token",
		AuthStyle: providers.AuthStyleParams}, providers.Credentials{ClientID: "c", ClientSecret: "s", RedirectURL: token.URL + "/cb"},
		providers.WithHTTPClient(client))
	if err != nil {
		b.Fatal(err)
	}
	kv, _, _ := benchRedis(b)
	reg := oauthflow.NewRegistry()
	if err := reg.Register(p); err != nil {
		b.Fatal(err)
	}
	// The store's clock is the test's: connections are stored with tokens
	// that expire in 20 minutes, then the clock jumps 10 minutes, into the
	// 10-minute ahead time of every one of them at once.
	clock := fakeclock.New(time.Now())
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Registry: reg, Logger: slog.New(slog.DiscardHandler),
		Now: clock.Now, RefreshAhead: 10 * time.Minute, WorkerInterval: 20 * time.Millisecond,
		RefreshLimits: map[string]oauthflow.RefreshLimit{"github": {Concurrency: concurrency}}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	round := fmt.Sprint(time.Now().UnixNano())
	for u := range b.N {
		user := "scale-" + round + "-" + fmt.Sprint(u)
		if err := m.Tokens.StoreFromTokenSet(ctx, user, "github", &oauthflow.TokenSet{AccessToken: "gho_" + strings.Repeat("a", 36),
			RefreshToken: "ghr_" + strings.Repeat("r", 72), ExpiresIn: 1200, Scope: "repo"}); err != nil {
			b.Fatal(err)
		}
		if _, err := m.Tokens.GetValidAccessToken(ctx, user, "github"); err != nil { // marks it read
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	start := time.Now()
	clock.Advance(10 * time.Minute)
	jumped := clock.Now()
	for served.Load() < int64(b.N) {
		if time.Since(start) > 5*time.Minute {
			b.Fatalf("%d of %d refreshed in 5 minutes", served.Load(), b.N)
		}
		time.Sleep(2 * time.Millisecond)
		clock.Set(jumped.Add(time.Since(start))) // runs on from the jump as a clock does: work put back for a second comes due
	}
	took := time.Since(start)
	b.ReportMetric(float64(b.N)/took.Seconds(), "refreshes/s")
	b.ReportMetric(took.Seconds(), "s-to-last") // the last one's time past its due time; its slack is the 10 minutes ahead
}

// BenchmarkRefreshAheadAgainst429 is two instances refreshing ahead 2,000
// connections due at once against a token endpoint that answers every
// refresh 429 after 100 ms. Its figures are the calls the provider got in
// the 5 seconds that follow and how many of them go beyond the first wave:
// that wave (at most 100 in flight per instance) goes out before any answer
// comes back, and the slow-down the first 429 sets holds back both instances
// for 30 s, so none should. (When each call arrived says nothing: the
// wave's last calls may reach the endpoint after its first answer.)
func BenchmarkRefreshAheadAgainst429(b *testing.B) {
	const conns, latency = 2000, 100 * time.Millisecond
	const instances = 2
	var calls atomic.Int64
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		time.Sleep(latency)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		fmt.Fprint(w, `{"error":"rate_limited"}`)
	}))
	b.Cleanup(token.Close)
	kv, _, _ := benchRedis(b)
	clock := fakeclock.New(time.Now())
	var mods []*oauthflow.Module
	for range instances {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
		p, err := providers.NewOAuth2(providers.Config{ID: "github", AuthURL: token.URL + "/authorize", TokenURL: token.URL + "/token",
			AuthStyle: providers.AuthStyleParams}, providers.Credentials{ClientID: "c", ClientSecret: "s", RedirectURL: token.URL + "/cb"},
			providers.WithHTTPClient(client))
		if err != nil {
			b.Fatal(err)
		}
		reg := oauthflow.NewRegistry()
		if err := reg.Register(p); err != nil {
			b.Fatal(err)
		}
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Registry: reg, Logger: slog.New(slog.DiscardHandler),
			Now: clock.Now, RefreshAhead: 10 * time.Minute, WorkerInterval: 20 * time.Millisecond})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = m.Close() })
		mods = append(mods, m)
	}
	ctx := context.Background()
	round := fmt.Sprint(time.Now().UnixNano())
	for u := range conns {
		user := "slow-" + round + "-" + fmt.Sprint(u)
		if err := mods[0].Tokens.StoreFromTokenSet(ctx, user, "github", &oauthflow.TokenSet{AccessToken: "gho_" + strings.Repeat("a", 36),
			RefreshToken: "ghr_" + strings.Repeat("r", 72), ExpiresIn: 1200, Scope: "repo"}); err != nil {
			b.Fatal(err)
		}
		if _, err := mods[0].Tokens.GetValidAccessToken(ctx, user, "github"); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	clock.Advance(10 * time.Minute)
	time.Sleep(5 * time.Second) // the window the figures are about
	b.ReportMetric(float64(calls.Load()), "calls/5s")
	b.ReportMetric(float64(max(0, calls.Load()-instances*100)), "calls-beyond-first-wave")
}

// BenchmarkCallback completes build_oauth_url sign-ins through
// CallbackHandler().ServeHTTP, on the real Redis and a local token endpoint that
// answers at once, from 32 goroutines as the harness's load generator keeps 32
// in flight. Beside it, "ceiling" is the hand-written callback the harness
// measures the library against (take the session, one POST to the token
// endpoint over a tuned transport, store the record, write a small page), on
// the same Redis, endpoint and sessions, so that a CPU profile of one beside
// the other shows what the library's callback spends that the ceiling does not.
// "library/build_oauth_url/dpop" is the same sign-in for a provider whose
// grants are bound to a key (Config.DPoP): the callback parses the sign-in's
// key and signs a proof for the exchange, and the token endpoint answers
// token_type DPoP (BenchmarkBuildOAuthURL has the key's generation).
func BenchmarkCallback(b *testing.B) {
	tokenSrv := httptest.NewServer(http.HandlerFunc(benchTokenEndpoint))
	b.Cleanup(tokenSrv.Close)
	for _, bound := range []bool{false, true} {
		name := "library/build_oauth_url"
		if bound {
			name += "/dpop"
		}
		b.Run(name, func(b *testing.B) {
			kv, _, _ := benchRedis(b)
			m := benchCallbackModule(b, kv, tokenSrv.URL, bound)
			states := benchToolSignIns(b, m, b.N)
			serveCallbacks(b, m.CallbackHandler(), states)
		})
	}
	b.Run("ceiling", func(b *testing.B) {
		kv, c, prefix := benchRedis(b)
		m := benchCallbackModule(b, kv, tokenSrv.URL, false)
		states := benchToolSignIns(b, m, b.N) // sessions of the library's form, under the same keys
		serveCallbacks(b, newBenchCeiling(c, prefix, tokenSrv.URL), states)
	})
}

// serveCallbacks serves one callback per state from 32 goroutines and fails on
// any answer but a success page.
func serveCallbacks(b *testing.B, h http.Handler, states []string) {
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(max(32/runtime.GOMAXPROCS(0), 1))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			st := states[next.Add(1)-1]
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c0de&state="+st, nil))
			if rec.Code != http.StatusOK {
				b.Errorf("callback: %d %s", rec.Code, rec.Body.String())
				return
			}
		}
	})
}

// BenchmarkBuildOAuthURL starts a sign-in with build_oauth_url on a memory
// store, for a Bearer provider and for one whose grants are bound to a key
// (Config.DPoP): the difference is the key's generation (ES256), its encoding
// in the pending sign-in and its thumbprint in the URL.
func BenchmarkBuildOAuthURL(b *testing.B) {
	for _, bound := range []bool{false, true} {
		name := "bearer"
		if bound {
			name = "dpop"
		}
		b.Run(name, func(b *testing.B) {
			m := benchCallbackModule(b, oauthflow.NewMemoryKV(), "https://as.example", bound)
			args := json.RawMessage(`{"provider":"bench","scopes":["repo"]}`)
			tc := oauthflow.ToolContext{UserID: "bench-user"}
			b.ReportAllocs()
			for b.Loop() {
				raw, err := m.BuildOAuthURL.Call(context.Background(), tc, args)
				if err != nil {
					b.Fatal(err)
				}
				if bound != strings.Contains(string(raw), "dpop_jkt") {
					b.Fatalf("dpop %v, and the URL: %s", bound, raw)
				}
			}
		})
	}
}

// BenchmarkPushedSignIn is one whole sign-in, built with build_oauth_url,
// opened and completed, on Redis: "plain" opens the provider's URL (nothing
// to do), "pushed" opens the module's start link, which pushes the request
// to the local PAR endpoint (RFC 9126) and redirects; the difference is what
// a pushed sign-in costs beside a plain one. The callback and its exchange
// are the same in both.
func BenchmarkPushedSignIn(b *testing.B) {
	tokenSrv := httptest.NewServer(http.HandlerFunc(benchTokenEndpoint))
	b.Cleanup(tokenSrv.Close)
	for _, pushed := range []bool{false, true} {
		name := "plain"
		if pushed {
			name = "pushed"
		}
		b.Run(name, func(b *testing.B) {
			kv, _, _ := benchRedis(b)
			m := benchCallbackModule(b, kv, tokenSrv.URL, false, func(c *providers.Config) {
				if pushed {
					c.PushedAuthURL = tokenSrv.URL + "/par"
				}
			})
			mux := http.NewServeMux()
			m.Mount(mux)
			args := json.RawMessage(`{"provider":"bench","scopes":["repo"]}`)
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				raw, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "bench-p" + strconv.Itoa(i)}, args)
				var res oauthflow.BuildOAuthURLResult
				if err == nil {
					err = json.Unmarshal(raw, &res)
				}
				if err != nil {
					b.Fatal(err)
				}
				if pushed {
					rec := httptest.NewRecorder()
					mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, res.AuthURL, nil))
					if rec.Code != http.StatusSeeOther || !strings.Contains(rec.Header().Get("Location"), "request_uri=") {
						b.Fatalf("the link: %d %s", rec.Code, rec.Header().Get("Location"))
					}
				}
				rec := httptest.NewRecorder()
				mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c0de&state="+res.State, nil))
				if rec.Code != http.StatusOK {
					b.Fatalf("callback: %d %s", rec.Code, rec.Body.String())
				}
			}
		})
	}
}

// benchCallbackModule is a Module wired as a host app would: a providers.OAuth2
// public client on the local token endpoint, tokens and sessions in kv. A
// bound module's provider binds its grants to a key (Config.DPoP) and posts
// to the endpoint's /dpop/token, which answers only a request with a proof.
func benchCallbackModule(b *testing.B, kv oauthflow.KV, tokenURL string, bound bool, configure ...func(*providers.Config)) *oauthflow.Module {
	b.Helper()
	cfg := providers.Config{ID: "bench", AuthURL: tokenURL + "/authorize", TokenURL: tokenURL + "/token"}
	if bound {
		cfg.TokenURL, cfg.DPoP = tokenURL+"/dpop/token", true
	}
	for _, f := range configure {
		f(&cfg)
	}
	p, err := providers.NewOAuth2(cfg,
		providers.Credentials{ClientID: "bench", RedirectURL: "https://app.example" + oauthflow.CallbackPath})
	if err != nil {
		b.Fatal(err)
	}
	reg := oauthflow.NewRegistry()
	if err := reg.Register(p); err != nil {
		b.Fatal(err)
	}
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Registry: reg,
		Logger: slog.New(slog.DiscardHandler), WorkerInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// benchToolSignIns starts n sign-ins with build_oauth_url, one user each.
func benchToolSignIns(b *testing.B, m *oauthflow.Module, n int) []string {
	b.Helper()
	args := json.RawMessage(`{"provider":"bench","scopes":["repo"]}`)
	states := make([]string, n)
	for i := range states {
		raw, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "bench-u" + strconv.Itoa(i)}, args)
		var res oauthflow.BuildOAuthURLResult
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err != nil {
			b.Fatal(err)
		}
		states[i] = res.State
	}
	return states
}

// benchTokenEndpoint answers a token at once: a Bearer one, or at /dpop/token
// a DPoP-bound one, there only to a request that carries a proof (which it
// does not verify: the figure is the client's).
func benchTokenEndpoint(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	if r.URL.Path == "/par" { // a pushed authorization request (RFC 9126 §2.2)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"request_uri":"urn:ietf:params:oauth:request_uri:`+rand.Text()+`","expires_in":60}`)
		return
	}
	tokenType := "bearer"
	if r.URL.Path == "/dpop/token" {
		if r.Header.Get("DPoP") == "" {
			http.Error(w, `{"error":"invalid_dpop_proof"}`, http.StatusBadRequest)
			return
		}
		tokenType = "DPoP"
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"access_token":"gho_16C7e42F292c6912E7710c838347Ae178B4a","token_type":"`+tokenType+`","expires_in":28800,"refresh_token":"ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498","scope":"repo"}`)
}

// benchCeiling is the harness's hand-written callback, for the profile beside
// the library's: only what a callback must do.
type benchCeiling struct {
	rdb      redis.UniversalClient
	prefix   string
	tokenURL string
	client   *http.Client
}

func newBenchCeiling(rdb redis.UniversalClient, prefix, tokenURL string) *benchCeiling {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	return &benchCeiling{rdb: rdb, prefix: prefix, tokenURL: tokenURL + "/token", client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (c *benchCeiling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	raw, err := c.rdb.GetDel(r.Context(), c.prefix+"oauth:session:"+q.Get("state")).Bytes()
	var s struct{ UserID, Provider, CodeVerifier string }
	if err != nil || json.Unmarshal(raw, &s) != nil {
		http.Error(w, "expired", http.StatusBadRequest)
		return
	}
	tok, err := c.exchange(r.Context(), q.Get("code"), s.CodeVerifier)
	if err != nil {
		http.Error(w, "provider", http.StatusBadGateway)
		return
	}
	if err := c.rdb.Set(r.Context(), c.prefix+"oauth:"+s.UserID+":"+s.Provider, tok, 30*24*time.Hour).Err(); err != nil {
		http.Error(w, "store", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!doctype html><title>Connected</title><p>Account connected.</p>")
}

func (c *benchCeiling) exchange(ctx context.Context, code, verifier string) ([]byte, error) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "client_id": {"bench"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var t struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		Scope        string `json:"scope"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t); err != nil {
		return nil, err
	}
	exp := time.Now().Add(time.Duration(t.ExpiresIn) * time.Second).UnixMilli()
	return []byte(`{"accessToken":` + strconv.Quote(t.AccessToken) + `,"refreshToken":` + strconv.Quote(t.RefreshToken) +
		`,"expiresAt":` + strconv.FormatInt(exp, 10) + `,"scope":` + strconv.Quote(t.Scope) + `}`), nil
}
