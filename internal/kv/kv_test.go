package kv_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/kvtest"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMemoryConformance(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_700_000_000, 0))
	kvtest.Run(t, kvtest.Harness{
		New:     func(*testing.T) kv.Store { return kv.NewMemory(clock.Now) },
		Advance: clock.Advance,
	})
}

func TestMiniredisConformance(t *testing.T) {
	t.Parallel()
	var mr interface{ FastForward(time.Duration) }
	kvtest.Run(t, kvtest.Harness{
		New: func(t *testing.T) kv.Store {
			m, c := redistest.Mini(t)
			mr = m
			return kv.NewRedis(c)
		},
		Advance: func(d time.Duration) { mr.FastForward(d) },
	})
}

func TestRedisConformance(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	kvtest.Run(t, kvtest.Harness{
		New: func(t *testing.T) kv.Store {
			return kv.WithPrefix(kv.NewRedis(c), redistest.Prefix(t, c))
		},
	})
}

// The suite holds on a backend on real time under load: here the clock jumps
// 150 ms after every Set, as a stalled scheduler makes it, so a key set with a
// 100 ms ttl is gone before it can be read back.
func TestConformanceOnAStallingClock(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_700_000_000, 0))
	kvtest.Run(t, kvtest.Harness{New: func(*testing.T) kv.Store {
		return &stallingStore{Store: kv.NewMemory(clock.Now), clock: clock}
	}})
}

type stallingStore struct {
	kv.Store
	clock *fakeclock.Clock
}

func (s *stallingStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	defer s.clock.Advance(150 * time.Millisecond)
	return s.Store.Set(ctx, key, value, ttl)
}

// A zero Memory is ready to use: the whole suite passes on one, running on
// the real clock.
func TestMemoryZeroValueConformance(t *testing.T) {
	t.Parallel()
	kvtest.Run(t, kvtest.Harness{New: func(*testing.T) kv.Store { return new(kv.Memory) }})
}

func TestMemoryFreesExpiredEntries(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_700_000_000, 0))
	m := kv.NewMemory(clock.Now)
	ctx := context.Background()
	for i := range 100 {
		if err := m.Set(ctx, fmt.Sprint("short", i), []byte("v"), time.Second); err != nil {
			t.Fatal(err)
		}
	}
	clock.Advance(2 * time.Second)
	for i := range 300 { // writes that live on; the expired ones must be swept out
		if err := m.Set(ctx, fmt.Sprint("live", i), []byte("v"), time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	if n := m.Len(); n > 300 {
		t.Fatalf("memory store holds %d entries after its 100 short-lived ones expired, want <= 300", n)
	}
	clock.Advance(2 * time.Hour)
	_ = m.Set(ctx, "trigger", []byte("v"), 0) // over a minute since the last sweep
	if n := m.Len(); n != 1 {
		t.Fatalf("memory store holds %d entries after everything but one expired, want 1", n)
	}
	if err := m.Close(); err != nil || m.Len() != 0 {
		t.Fatalf("Close = %v with %d entries left", err, m.Len())
	}
}

// The servers behind redistest.Cluster are thrown away with the test, so a
// prefix only has to keep subtests apart; redistest.Prefix's SCAN cleanup would
// see one node of the three. The prefix carries no {hash tag}: keys must spread
// over the slots, or a multi-key command would slip through unnoticed.
func TestClusterConformance(t *testing.T) {
	t.Parallel()
	c := redistest.Cluster(t)
	t.Run("RejectsCrossSlot", func(t *testing.T) {
		t.Parallel()
		testClusterRejectsCrossSlot(t, c)
	})
	t.Run("Suite", func(t *testing.T) {
		t.Parallel()
		kvtest.Run(t, kvtest.Harness{New: func(t *testing.T) kv.Store {
			return kv.WithPrefix(kv.NewRedis(c), "test:"+t.Name()+":")
		}})
	})
}

func TestSentinelConformance(t *testing.T) {
	t.Parallel()
	c := redistest.Sentinel(t)
	kvtest.Run(t, kvtest.Harness{New: func(t *testing.T) kv.Store {
		return kv.WithPrefix(kv.NewRedis(c), redistest.Prefix(t, c))
	}})
}

// The cluster is real: a script over two keys in different slots is refused, so a
// KV command that touched two keys would fail the suite here.
func testClusterRejectsCrossSlot(t *testing.T, c redis.UniversalClient) {
	ctx := context.Background()
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
