package kv

import (
	"context"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// The hub keeps one subscription per watched channel, wakes every watcher of
// it, and unsubscribes after the last one stops.
func TestReleaseWatchFansOutAndLetsGo(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	store := WithPrefix(NewRedis(c), redistest.Prefix(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := store.(*Prefixed).s.(*Redis).releaseChannel(store.(*Prefixed).prefix + "lock")
	a, stopA, okA := WatchRelease(ctx, store, "lock")
	b, stopB, okB := WatchRelease(ctx, store, "lock")
	if !okA || !okB {
		t.Fatal("a Redis store under a prefix cannot watch")
	}
	if n := c.PubSubNumSub(ctx, ch).Val()[ch]; n != 1 {
		t.Fatalf("%d subscriptions for two watchers of one lock; want 1", n)
	}
	AnnounceRelease(ctx, store, "lock")
	for _, w := range []<-chan struct{}{a, b} {
		select {
		case <-w:
		case <-ctx.Done():
			t.Fatal("a watcher never heard the release")
		}
	}
	stopA()
	if n := c.PubSubNumSub(ctx, ch).Val()[ch]; n != 1 {
		t.Fatalf("%d subscriptions while one watcher is left; want 1", n)
	}
	stopB()
	for c.PubSubNumSub(ctx, ch).Val()[ch] != 0 { // the close reaches the server after stop returns
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// Pub/sub channels are shared by every database of a Redis server: a release
// announced by an app on DB 1 must not wake the waiters of one on DB 0 that
// uses the same key names.
func TestReleaseChannelsAreApartPerDatabase(t *testing.T) {
	t.Parallel()
	db0 := NewRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DB: 0}))
	db1 := NewRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DB: 1}))
	t.Cleanup(func() { _ = db0.c.Close(); _ = db1.c.Close() })
	key := "oauth:lock:alice:github"
	if db0.releaseChannel(key) == db1.releaseChannel(key) {
		t.Fatalf("DB 0 and DB 1 announce %s's release on the same channel %q", key, db0.releaseChannel(key))
	}
	other := NewRedis(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	t.Cleanup(func() { _ = other.c.Close() })
	if db0.releaseChannel(key) != other.releaseChannel(key) {
		t.Fatal("two stores on one database must share the channel")
	}
}
