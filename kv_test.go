package oauthflow_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/kvtest"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/stretchr/testify/assert"
)

// A zero MemoryKV is ready to use: each method works on a fresh one, and the
// whole suite passes on one, running on the real clock.
func TestMemoryKVZeroValue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v := []byte("v")
	type m = oauthflow.MemoryKV
	for _, tt := range []struct {
		method  string
		call    func(store *m) (any, error)
		want    any
		wantErr error
	}{
		{"Get", func(store *m) (any, error) { return store.Get(ctx, "k") }, []byte(nil), oauthflow.ErrNotFound},
		{"Set", func(store *m) (any, error) { return nil, store.Set(ctx, "k", v, time.Minute) }, nil, nil},
		{"SetNX", func(store *m) (any, error) { return store.SetNX(ctx, "k", v, time.Minute) }, true, nil},
		{"GetDel", func(store *m) (any, error) { return store.GetDel(ctx, "k") }, []byte(nil), oauthflow.ErrNotFound},
		{"Del", func(store *m) (any, error) { return nil, store.Del(ctx, "k") }, nil, nil},
		{"TTL", func(store *m) (any, error) { return store.TTL(ctx, "k") }, time.Duration(0), oauthflow.ErrNotFound},
		{"CompareAndDelete", func(store *m) (any, error) { return store.CompareAndDelete(ctx, "k", v) }, false, nil},
		{"CompareAndExpire", func(store *m) (any, error) { return store.CompareAndExpire(ctx, "k", v, time.Minute) }, false, nil},
		{"CompareAndSwap", func(store *m) (any, error) { return store.CompareAndSwap(ctx, "k", v, v, time.Minute) }, false, nil},
		{"Len", func(store *m) (any, error) { return store.Len(), nil }, 0, nil},
		{"Close", func(store *m) (any, error) { return nil, store.Close() }, nil, nil},
	} {
		t.Run(tt.method, func(t *testing.T) {
			var store oauthflow.MemoryKV
			got, err := tt.call(&store)
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tt.want, got)
		})
	}
	kvtest.Run(t, kvtest.Harness{New: func(*testing.T) kv.Store { return new(oauthflow.MemoryKV) }})
}

func TestKVFromEnvFallsBackToMemory(t *testing.T) {
	t.Setenv("KVSTORE_HOST", "127.0.0.1")
	t.Setenv("KVSTORE_PORT", "1") // nothing listens on port 1
	store, err := oauthflow.KVFromEnv(context.Background(), slog.New(slog.DiscardHandler))
	if !errors.Is(err, oauthflow.ErrStoreUnavailable) {
		t.Fatalf("err = %v, want ErrStoreUnavailable", err)
	}
	if _, ok := store.(*oauthflow.MemoryKV); !ok {
		t.Fatalf("fallback KV is %T, want *MemoryKV", store)
	}
}

func TestKVFromEnvUsesRedis(t *testing.T) {
	redistest.Real(t)
	host, port, _ := net.SplitHostPort(redistest.Addr())
	t.Setenv("KVSTORE_HOST", host)
	t.Setenv("KVSTORE_PORT", port)
	store, err := oauthflow.KVFromEnv(context.Background(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = store.(*oauthflow.RedisKV).Close() }()
	if _, ok := store.(*oauthflow.RedisKV); !ok {
		t.Fatalf("KV is %T, want *RedisKV", store)
	}
}
