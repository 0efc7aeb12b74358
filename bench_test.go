package oauthflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The baselines (raw go-redis GET and GETDEL) run in the same process and on the
// same client as the library's calls, so their figures compare directly.
// See BENCHMARKS.md for how to run them and the recorded results.

const benchRecord = `{"accessToken":"gho_16C7e42F292c6912E7710c838347Ae178B4a","refreshToken":"ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498","expiresAt":4102444800000,"scope":"repo read:user"}`

func benchStore(b *testing.B, kv oauthflow.KV) *oauthflow.TokenStore {
	b.Helper()
	store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	if err := kv.Set(context.Background(), "oauth:bench-user:github", []byte(benchRecord), time.Hour); err != nil {
		b.Fatal(err)
	}
	return store
}

func benchRedis(b *testing.B) redis.UniversalClient {
	c := redistest.Real(b)
	return c
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
	b.Run("redis", func(b *testing.B) {
		store := benchStore(b, oauthflow.NewRedisKV(benchRedis(b)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := store.GetValidAccessToken(ctx, "bench-user", "github"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("redis-parallel", func(b *testing.B) {
		store := benchStore(b, oauthflow.NewRedisKV(benchRedis(b)))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := store.GetValidAccessToken(ctx, "bench-user", "github"); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("raw-redis-GET", func(b *testing.B) {
		c := benchRedis(b)
		benchStore(b, oauthflow.NewRedisKV(c))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := c.Get(ctx, "oauth:bench-user:github").Bytes(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-redis-GET-parallel", func(b *testing.B) {
		c := benchRedis(b)
		benchStore(b, oauthflow.NewRedisKV(c))
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := c.Get(ctx, "oauth:bench-user:github").Bytes(); err != nil {
					b.Error(err)
					return
				}
			}
		})
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
		ss, states := prepare(b, oauthflow.NewRedisKV(benchRedis(b)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := ss.Consume(ctx, states[i]); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-redis-GETDEL", func(b *testing.B) {
		c := benchRedis(b)
		_, states := prepare(b, oauthflow.NewRedisKV(c))
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			if _, err := c.GetDel(ctx, "oauth:session:"+states[i]).Bytes(); err != nil {
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

func TestValidTokenReadIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	_, c := redistest.Mini(t)
	hook := &countHook{}
	c.AddHook(hook)
	store := oauthflow.NewTokenStore(oauthflow.NewRedisKV(c), oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, c.Set(context.Background(), "oauth:bench-user:github", benchRecord, time.Hour).Err())
	before := hook.n.Load()
	for range 10 {
		_, err := store.GetValidAccessToken(context.Background(), "bench-user", "github")
		require.NoError(t, err)
	}
	assert.EqualValues(t, 10, hook.n.Load()-before, "ten reads of a valid token, ten Redis commands")
}

func TestValidTokenReadAllocations(t *testing.T) {
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, store.StoreTokens(context.Background(), "bench-user", "github",
		oauthflow.StoredTokens{AccessToken: "gho_x", RefreshToken: "ghr_y", ExpiresAt: 0, Scope: "repo"}))
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = store.GetValidAccessToken(context.Background(), "bench-user", "github")
	})
	// The key and the access token string; decoding the whole record would take three strings.
	assert.LessOrEqual(t, allocs, 2.0)
}
