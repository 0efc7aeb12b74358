package oauthflow_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/kvtest"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/stretchr/testify/assert"
)

func TestMemoryKVConformance(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_700_000_000, 0))
	kvtest.Run(t, kvtest.Harness{
		New:     func(*testing.T) oauthflow.KV { return oauthflow.NewMemoryKV(oauthflow.WithMemoryClock(clock.Now)) },
		Advance: clock.Advance,
	})
}

func TestMiniredisKVConformance(t *testing.T) {
	t.Parallel()
	var mr interface{ FastForward(time.Duration) }
	kvtest.Run(t, kvtest.Harness{
		New: func(t *testing.T) oauthflow.KV {
			m, c := redistest.Mini(t)
			mr = m
			return oauthflow.NewRedisKV(c)
		},
		Advance: func(d time.Duration) { mr.FastForward(d) },
	})
}

func TestRedisKVConformance(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	kvtest.Run(t, kvtest.Harness{
		New: func(t *testing.T) oauthflow.KV {
			return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
		},
	})
}

// A zero MemoryKV is ready to use: each method works on a fresh one, and the
// whole suite passes on one, running on the real clock.
func TestMemoryKVZeroValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := []byte("v")
	type m = oauthflow.MemoryKV
	for _, tt := range []struct {
		method  string
		call    func(kv *m) (any, error)
		want    any
		wantErr error
	}{
		{"Get", func(kv *m) (any, error) { return kv.Get(ctx, "k") }, []byte(nil), oauthflow.ErrNotFound},
		{"Set", func(kv *m) (any, error) { return nil, kv.Set(ctx, "k", v, time.Minute) }, nil, nil},
		{"SetNX", func(kv *m) (any, error) { return kv.SetNX(ctx, "k", v, time.Minute) }, true, nil},
		{"GetDel", func(kv *m) (any, error) { return kv.GetDel(ctx, "k") }, []byte(nil), oauthflow.ErrNotFound},
		{"Del", func(kv *m) (any, error) { return nil, kv.Del(ctx, "k") }, nil, nil},
		{"TTL", func(kv *m) (any, error) { return kv.TTL(ctx, "k") }, time.Duration(0), oauthflow.ErrNotFound},
		{"CompareAndDelete", func(kv *m) (any, error) { return kv.CompareAndDelete(ctx, "k", v) }, false, nil},
		{"CompareAndExpire", func(kv *m) (any, error) { return kv.CompareAndExpire(ctx, "k", v, time.Minute) }, false, nil},
		{"CompareAndSwap", func(kv *m) (any, error) { return kv.CompareAndSwap(ctx, "k", v, v, time.Minute) }, false, nil},
		{"Len", func(kv *m) (any, error) { return kv.Len(), nil }, 0, nil},
		{"Close", func(kv *m) (any, error) { return nil, kv.Close() }, nil, nil},
	} {
		t.Run(tt.method, func(t *testing.T) {
			var kv oauthflow.MemoryKV
			got, err := tt.call(&kv)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tt.want, got)
		})
	}
	kvtest.Run(t, kvtest.Harness{New: func(*testing.T) oauthflow.KV { return new(oauthflow.MemoryKV) }})
}

// The suite holds on a backend on real time under load: here the clock jumps
// 150 ms after every Set, as a stalled scheduler makes it, so a key set with a
// 100 ms ttl is gone before it can be read back.
func TestKVConformanceOnAStallingClock(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_700_000_000, 0))
	kvtest.Run(t, kvtest.Harness{New: func(*testing.T) oauthflow.KV {
		return &stallingKV{KV: oauthflow.NewMemoryKV(oauthflow.WithMemoryClock(clock.Now)), clock: clock}
	}})
}

type stallingKV struct {
	oauthflow.KV
	clock *fakeclock.Clock
}

func (s *stallingKV) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	defer s.clock.Advance(150 * time.Millisecond)
	return s.KV.Set(ctx, key, value, ttl)
}

func TestMemoryKVFreesExpiredEntries(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_700_000_000, 0))
	kv := oauthflow.NewMemoryKV(oauthflow.WithMemoryClock(clock.Now))
	ctx := context.Background()
	for i := range 100 {
		if err := kv.Set(ctx, fmt.Sprint("short", i), []byte("v"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Second)
	for i := range 300 { // writes that live on; the expired ones must be swept out
		if err := kv.Set(ctx, fmt.Sprint("live", i), []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n := kv.Len(); n > 300 {
		t.Fatalf("memory store holds %d entries after its 100 short-lived ones expired, want <= 300", n)
	}
	clock.Advance(2 * time.Hour)
	_ = kv.Set(ctx, "trigger", []byte("v"), 0) // over a minute since the last sweep
	if n := kv.Len(); n != 1 {
		t.Fatalf("memory store holds %d entries after everything but one expired, want 1", n)
	}
	if err := kv.Close(); err != nil || kv.Len() != 0 {
		t.Fatalf("Close = %v with %d entries left", err, kv.Len())
	}
}

func TestKVFromEnvFallsBackToMemory(t *testing.T) {
	t.Setenv("KVSTORE_HOST", "127.0.0.1")
	t.Setenv("KVSTORE_PORT", "1") // nothing listens on port 1
	kv, err := oauthflow.KVFromEnv(context.Background(), slog.New(slog.DiscardHandler))
	if !errors.Is(err, oauthflow.ErrStoreUnavailable) {
		t.Fatalf("err = %v, want ErrStoreUnavailable", err)
	}
	if _, ok := kv.(*oauthflow.MemoryKV); !ok {
		t.Fatalf("fallback KV is %T, want *MemoryKV", kv)
	}
}

func TestKVFromEnvUsesRedis(t *testing.T) {
	redistest.Real(t)
	host, port, _ := net.SplitHostPort(redistest.Addr())
	t.Setenv("KVSTORE_HOST", host)
	t.Setenv("KVSTORE_PORT", port)
	kv, err := oauthflow.KVFromEnv(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = kv.(*oauthflow.RedisKV).Close() }()
	if _, ok := kv.(*oauthflow.RedisKV); !ok {
		t.Fatalf("KV is %T, want *RedisKV", kv)
	}
}
