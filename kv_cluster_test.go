package oauthflow_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/fakeclock"
	"github.com/oauthflow/oauthflow/internal/kvtest"
	"github.com/oauthflow/oauthflow/internal/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	t.Run("RejectsCrossSlot", func(t *testing.T) {
		t.Parallel()
		testClusterRejectsCrossSlot(t, c)
	})
	t.Run("Conformance", func(t *testing.T) {
		t.Parallel()
		kvtest.Run(t, kvtest.Harness{New: func(t *testing.T) oauthflow.KV { return clusterKV(t, c) }})
	})
	t.Run("SessionConsumeExactlyOnce", func(t *testing.T) {
		t.Parallel()
		testClusterSessionConsume(t, clusterKV(t, c))
	})
	t.Run("ConcurrentRefreshAcrossReplicas", func(t *testing.T) {
		t.Parallel()
		testClusterConcurrentRefresh(t, c, clusterKV(t, c))
	})
}

func TestRedisSentinelKVConformance(t *testing.T) {
	t.Parallel()
	c := redistest.Sentinel(t)
	kvtest.Run(t, kvtest.Harness{New: func(t *testing.T) oauthflow.KV {
		return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
	}})
}

// The cluster is real: a script over two keys in different slots is refused, so a
// KV command that touched two keys would fail the suite here.
func testClusterRejectsCrossSlot(t *testing.T, c redis.UniversalClient) {
	a, b := "test:cross:oauth:u:acme", "test:cross:oauth:lock:u:acme"
	require.NotEqual(t, c.ClusterKeySlot(ctx, a).Val(), c.ClusterKeySlot(ctx, b).Val())
	err := redis.NewScript(`return redis.call("EXISTS", KEYS[1], KEYS[2])`).Run(ctx, c, []string{a, b}).Err()
	require.ErrorContains(t, err, "CROSSSLOT")
	var masters atomic.Int64 // ForEachMaster calls fn concurrently
	require.NoError(t, c.(*redis.ClusterClient).ForEachMaster(ctx, func(context.Context, *redis.Client) error {
		masters.Add(1)
		return nil
	}))
	assert.EqualValues(t, 3, masters.Load(), "masters")
}

func testClusterSessionConsume(t *testing.T, kv oauthflow.KV) {
	ss := oauthflow.NewSessionService(kv)
	require.NoError(t, ss.Register(ctx, "the-state", oauthflow.Session{WorkflowID: "w", UserID: "u", Provider: "acme"}))
	var wins, misses atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := ss.Consume(ctx, "the-state")
			switch {
			case err == nil && s.UserID == "u":
				wins.Add(1)
			case errors.Is(err, oauthflow.ErrSessionNotFound):
				misses.Add(1)
			default:
				t.Errorf("Consume: %v", err)
			}
		}()
	}
	close(start)
	wg.Wait()
	assert.EqualValues(t, 1, wins.Load(), "exactly one consumer wins")
	assert.EqualValues(t, 999, misses.Load())
}

// Two replicas share the cluster; the token record and its refresh lock live in
// different slots, and 1000 callers still cause exactly one provider refresh.
func testClusterConcurrentRefresh(t *testing.T, c redis.UniversalClient, kv oauthflow.KV) {
	prefix := "test:" + t.Name() + ":"
	tokenKey, lockKey := prefix+"oauth:u:acme", prefix+"oauth:lock:u:acme"
	require.NotEqual(t, c.ClusterKeySlot(ctx, tokenKey).Val(), c.ClusterKeySlot(ctx, lockKey).Val())

	clock := fakeclock.New(epoch)
	prov := newFakeProvider("acme")
	prov.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
		time.Sleep(20 * time.Millisecond) // a provider's latency widens the race window
		return &oauthflow.TokenSet{AccessToken: "fresh", RefreshToken: "rt-2", ExpiresIn: 3600}, nil
	})
	replicas := make([]*oauthflow.TokenStore, 2)
	for i := range replicas {
		reg := oauthflow.NewRegistry()
		require.NoError(t, reg.Register(prov))
		replicas[i] = oauthflow.NewTokenStore(kv, reg, oauthflow.WithClock(clock.Now),
			oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	}
	require.NoError(t, replicas[0].StoreFromTokenSet(ctx, "u", "acme",
		&oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "rt-1", ExpiresIn: 30}))
	results, errs := make([]string, 1000), make([]error, 1000)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i], errs[i] = replicas[i%2].GetValidAccessToken(ctx, "u", "acme")
		}()
	}
	close(start)
	wg.Wait()
	for i := range results {
		require.NoError(t, errs[i], "caller %d", i)
		require.Equal(t, "fresh", results[i], "caller %d", i)
	}
	assert.EqualValues(t, 1, prov.refreshes.Load(), "provider refreshes")
	assert.EqualValues(t, 0, c.Exists(ctx, lockKey).Val(), "refresh lock released")
	assert.Contains(t, c.Get(ctx, tokenKey).Val(), "rt-2", "refreshed record stored")
}
