package oauthflow_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/kvtest"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A MemoryKV passes the KV suite on the real clock, and each method works on
// a fresh one.
func TestMemoryKV(t *testing.T) {
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
		{"Close", func(store *m) (any, error) { return nil, store.Close() }, nil, nil},
	} {
		t.Run(tt.method, func(t *testing.T) {
			got, err := tt.call(oauthflow.NewMemoryKV())
			if tt.wantErr != nil {
				assert.ErrorIs(t, err, tt.wantErr)
			} else {
				assert.NoError(t, err)
			}
			assert.Equal(t, tt.want, got)
		})
	}
	kvtest.Run(t, kvtest.Harness{New: func(*testing.T) kv.Store { return oauthflow.NewMemoryKV() }})
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

// The servers behind redistest.Cluster are thrown away with the test, so a
// prefix only has to keep subtests apart; redistest.Prefix's SCAN cleanup would
// see one node of the three. The prefix carries no {hash tag}: keys must spread
// over the slots, or a multi-key command would slip through unnoticed.
func clusterKV(t *testing.T, c redis.UniversalClient) oauthflow.KV {
	return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), "test:"+t.Name()+":")
}

func TestRedisClusterKV(t *testing.T) {
	t.Parallel()
	c := redistest.Cluster(t)
	t.Run("SessionConsumeExactlyOnce", func(t *testing.T) {
		t.Parallel()
		assertConsumedOnce(t, clusterKV(t, c))
	})
	t.Run("Reencrypt", func(t *testing.T) { // its SCAN must walk all three masters
		t.Parallel()
		testReencrypt(t, clusterKV(t, c))
	})
	t.Run("ConcurrentRefreshAcrossReplicas", func(t *testing.T) {
		t.Parallel()
		testClusterConcurrentRefresh(t, c, clusterKV(t, c))
	})
}

// Two replicas share the cluster; the token record and its refresh lock live in
// different slots, and 1000 callers still cause exactly one provider refresh.
func testClusterConcurrentRefresh(t *testing.T, c redis.UniversalClient, kv oauthflow.KV) {
	prefix := "test:" + t.Name() + ":"
	tokenKey, lockKey := prefix+"oauth:u:acme", prefix+"oauth:lock:u:acme"
	require.NotEqual(t, c.ClusterKeySlot(ctx, tokenKey).Val(), c.ClusterKeySlot(ctx, lockKey).Val())

	assertOneRefreshAcrossReplicas(t, kv)
	assert.EqualValues(t, 0, c.Exists(ctx, lockKey).Val(), "refresh lock released")
	assert.Contains(t, c.Get(ctx, tokenKey).Val(), "rt-2", "refreshed record stored")
}

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return strconv.Itoa(port)
}

// With RequireKV and no Redis, New fails, and what it logs says so: never
// that it goes on in memory.
func TestRequireKVFailsWithoutClaimingAFallback(t *testing.T) {
	t.Setenv("KVSTORE_HOST", "127.0.0.1")
	t.Setenv("KVSTORE_PORT", closedPort(t))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{RequireKV: true, Logger: log})
	if err == nil {
		_ = m.Close()
		t.Fatal("New succeeded with RequireKV and no Redis")
	}
	if !errors.Is(err, oauthflow.ErrStoreUnavailable) {
		t.Errorf("err = %v, want ErrStoreUnavailable", err)
	}
	if strings.Contains(logs.String(), "in-memory") {
		t.Errorf("the log claims a fallback that does not happen:\n%s", logs.String())
	}
}

// Without RequireKV the fallback is taken and said.
func TestKVFromEnvFallsBackToMemoryAndSaysSo(t *testing.T) {
	t.Setenv("KVSTORE_HOST", "127.0.0.1")
	t.Setenv("KVSTORE_PORT", closedPort(t))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(logs.String(), "in-memory") {
		t.Errorf("the fallback to memory is not logged:\n%s", logs.String())
	}
}

// go-redis's own lines reach the app's logger once it installs RedisLogger.
func TestRedisLoggerRoutesGoRedisLines(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	redis.SetLogger(oauthflow.RedisLogger(log))
	t.Cleanup(func() { redis.SetLogger(oauthflow.RedisLogger(slog.New(slog.DiscardHandler))) })
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + closedPort(t), MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	_ = c.Ping(context.Background()).Err()
	if !strings.Contains(logs.String(), "source=go-redis") || !strings.Contains(logs.String(), "dial") {
		t.Errorf("go-redis's dial failure did not reach the logger:\n%s", logs.String())
	}
}

// A Redis master acknowledges the write of a rotated refresh token and dies
// before its replica has it; the replica is promoted. Without replica
// acknowledgements the store then holds the spent refresh token and the
// next refresh costs the grant; with them the refreshing process learns the
// write is not on a replica, keeps the rotated tokens, and writes them again
// when it finds the spent ones back.
func TestRotatedTokenAcrossAFailover(t *testing.T) {
	for _, acks := range []int{0, 1} {
		t.Run(fmt.Sprintf("ReplicaAcks=%d", acks), func(t *testing.T) {
			ctx := context.Background()
			pair := redistest.Replicated(t)
			f := newStoreFixture(t, oauthflow.NewRedisKV(pair.Client), oauthflow.WithReplicaAcks(acks, 200*time.Millisecond))
			p := newRotating("rt-1")
			f.prov.setRefresh(p.answer)
			err := f.store.StoreTokens(ctx, "alice", "acme", oauthflow.StoredTokens{AccessToken: "access-0",
				RefreshToken: "rt-1", ExpiresAt: f.clock.Now().Add(time.Hour).UnixMilli()})
			if err != nil {
				t.Fatal(err)
			}
			pair.Synced(t) // the sign-in is on the replica, whatever the setting
			f.clock.Advance(2 * time.Hour)
			pair.CutLink() // from here the master's writes never reach the replica
			if tok, err := f.store.GetValidAccessToken(ctx, "alice", "acme"); err != nil || tok != "access-1" {
				t.Fatalf("the refresh before the failover: %q, %v", tok, err)
			}
			// A read between the write and the failover (here GetTokens, which
			// looks for kept writes) must not forget the unacknowledged one.
			if _, err := f.store.GetTokens(ctx, "alice", "acme"); err != nil {
				t.Fatal(err)
			}
			pair.Failover(t)
			f.clock.Advance(2 * time.Hour)
			tok, err := f.store.GetValidAccessToken(ctx, "alice", "acme")
			if acks == 0 { // the recovery point RELIABILITY.md states without acknowledgements
				if !errors.Is(err, oauthflow.ErrNoToken) || p.reused != 1 {
					t.Fatalf("without acknowledgements the failover should cost the grant: %q, %v, %d reuses", tok, err, p.reused)
				}
				return
			}
			if total := f.prov.refreshes.Load(); err != nil || tok != "access-2" || p.reused != 0 || total != 2 {
				t.Fatalf("after the failover: %q, %v, %d refreshes, %d reuses of a spent token; want access-2 from rt-2, 2, 0",
					tok, err, total, p.reused)
			}
		})
	}
}

// A malformed KVSTORE_* value is a configuration error, not an outage: New
// fails naming the variable instead of running on per-process memory.
func TestKVFromEnvRefusesAMalformedValue(t *testing.T) {
	for _, tt := range []struct{ name, host, port, want string }{
		{"port not a number", "127.0.0.1", "abc", "KVSTORE_PORT"},
		{"port out of range", "127.0.0.1", "70000", "KVSTORE_PORT"},
		{"port zero", "127.0.0.1", "0", "KVSTORE_PORT"},
		{"host a URL", "redis://127.0.0.1", "6379", "KVSTORE_HOST"},
		{"host with a port", "127.0.0.1:6379", "6379", "KVSTORE_HOST"},
		{"host with a space", "127.0.0.1 ", "6379", "KVSTORE_HOST"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("KVSTORE_HOST", tt.host)
			t.Setenv("KVSTORE_PORT", tt.port)
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			m, err := oauthflow.New(context.Background(), oauthflow.Config{Logger: log})
			if err == nil {
				m.Close()
				t.Fatalf("New ran with KVSTORE_HOST=%q KVSTORE_PORT=%q; want an error naming %s", tt.host, tt.port, tt.want)
			}
			if !errors.Is(err, oauthflow.ErrInvalidArgument) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want ErrInvalidArgument naming %s", err, tt.want)
			}
			if strings.Contains(logs.String(), "in-memory") {
				t.Errorf("a configuration error was logged as a fallback:\n%s", logs.String())
			}
			store, err := oauthflow.KVFromEnv(context.Background(), log)
			if store != nil || !errors.Is(err, oauthflow.ErrInvalidArgument) {
				t.Errorf("KVFromEnv = %T, %v; want no store and ErrInvalidArgument", store, err)
			}
		})
	}
}

// The fallback's warning says how to make an unreachable store fatal.
func TestKVFromEnvFallbackSaysHowToRequireRedis(t *testing.T) {
	t.Setenv("KVSTORE_HOST", "127.0.0.1")
	t.Setenv("KVSTORE_PORT", closedPort(t))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	store, err := oauthflow.KVFromEnv(context.Background(), log)
	if !errors.Is(err, oauthflow.ErrStoreUnavailable) || store == nil {
		t.Fatalf("KVFromEnv = %T, %v; want the memory fallback and ErrStoreUnavailable", store, err)
	}
	if !strings.Contains(logs.String(), "RequireKV") {
		t.Errorf("the fallback's warning does not say how to make it fatal:\n%s", logs.String())
	}
}

// A key prefix is the caller's up to and including its separator: one that
// would run into the keys after it ("app1oauth:...") is refused by New, so
// two apps' keys cannot be told apart by accident.
func TestConfigKeyPrefixNeedsItsSeparator(t *testing.T) {
	for _, prefix := range []string{"app1", "my app"} {
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), KeyPrefix: prefix})
		if err == nil {
			m.Close()
			t.Errorf("New took KeyPrefix %q", prefix)
			continue
		}
		if !errors.Is(err, oauthflow.ErrInvalidArgument) || !strings.Contains(err.Error(), "KeyPrefix") {
			t.Errorf("KeyPrefix %q: err = %v, want ErrInvalidArgument naming KeyPrefix", prefix, err)
		}
	}
	for _, prefix := range []string{"", "app1:", "tenant/7/", "app1.", "app_1-", "app1_"} {
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), KeyPrefix: prefix})
		if err != nil {
			t.Errorf("KeyPrefix %q: %v", prefix, err)
			continue
		}
		m.Close()
	}
}
