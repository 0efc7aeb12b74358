package oauthflow_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
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

// A valid read is one GET, Bearer or DPoP-bound: the key a bound token is
// sent with is in the record, never fetched apart.
func TestValidTokenReadIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	for name, record := range map[string]string{"bearer": benchRecord, "dpop": boundBenchRecord(t)} {
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
