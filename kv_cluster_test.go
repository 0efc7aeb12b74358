package oauthflow_test

import (
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
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
