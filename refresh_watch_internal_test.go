package oauthflow

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/redis/go-redis/v9"
	"golang.org/x/oauth2"
)

// gatedProvider counts refreshes and holds each one until open is closed.
type gatedProvider struct {
	calls   atomic.Int64
	entered chan struct{}
	open    chan struct{}
}

func (p *gatedProvider) ProviderID() string      { return "gated" }
func (p *gatedProvider) DefaultScopes() []string { return nil }
func (p *gatedProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "http://127.0.0.1/authorize"
}
func (p *gatedProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*TokenSet, error) {
	return nil, ErrNoToken
}
func (p *gatedProvider) RefreshToken(ctx context.Context, _ string) (*TokenSet, error) {
	p.calls.Add(1)
	p.entered <- struct{}{}
	select {
	case <-p.open:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &TokenSet{AccessToken: "fresh", RefreshToken: "next", ExpiresIn: 3600}, nil
}

// A replica that finds the refresh lock taken hears the holder let go and
// reads the new token at once: its poll is an hour here, so only the
// announcement can wake it before the test's deadline.
func TestRefreshWaiterHearsTheHolderRelease(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	kv := WithKeyPrefix(NewRedisKV(c), redistest.Prefix(t, c))
	p := &gatedProvider{entered: make(chan struct{}, 1), open: make(chan struct{})}
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	hour := lockWait{first: time.Hour, max: time.Hour, watched: time.Hour}
	holder := NewTokenStore(kv, reg)
	waiter := NewTokenStore(kv, reg)
	holder.lockWait, waiter.lockWait = hour, hour
	waiting := make(chan struct{})
	var once sync.Once
	waiter.onLockWait = func() { once.Do(func() { close(waiting) }) }

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	expired := StoredTokens{AccessToken: "stale", RefreshToken: "old", ExpiresAt: time.Now().Add(-time.Minute).UnixMilli()}
	if err := holder.StoreTokens(ctx, "u1", "gated", expired); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 2)
	errs := make(chan error, 2)
	read := func(s *TokenStore) {
		tok, err := s.GetValidAccessToken(ctx, "u1", "gated")
		got <- tok
		errs <- err
	}
	go read(holder)
	waitfor.Recv(t, p.entered, "the holder's refresh") // the holder has the lock and is at the provider
	go read(waiter)
	select {
	case <-waiting: // the waiter listens and has stopped polling
	case <-ctx.Done():
		t.Fatal("the waiter never waited for the holder")
	}
	close(p.open)
	for range 2 {
		if err := waitfor.Recv(t, errs, "a read's end"); err != nil {
			t.Fatalf("GetValidAccessToken: %v", err)
		}
		if tok := waitfor.Recv(t, got, "a read's token"); tok != "fresh" {
			t.Fatalf("got %q; want the refreshed token", tok)
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("the provider was called %d times; want 1", n)
	}
}

// The hub keeps one subscription per watched channel, wakes every watcher of
// it, and unsubscribes after the last one stops.
func TestReleaseWatchFansOutAndLetsGo(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	kv := WithKeyPrefix(NewRedisKV(c), redistest.Prefix(t, c))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	ch := kv.(*prefixKV).kv.(*RedisKV).releaseChannel(kv.(*prefixKV).prefix + "lock")
	a, stopA, okA := watchRelease(ctx, kv, "lock")
	b, stopB, okB := watchRelease(ctx, kv, "lock")
	if !okA || !okB {
		t.Fatal("a RedisKV under a prefix cannot watch")
	}
	if n := c.PubSubNumSub(ctx, ch).Val()[ch]; n != 1 {
		t.Fatalf("%d subscriptions for two watchers of one lock; want 1", n)
	}
	announceRelease(ctx, kv, "lock")
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
	db0 := NewRedisKV(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DB: 0}))
	db1 := NewRedisKV(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DB: 1}))
	t.Cleanup(func() { _ = db0.c.Close(); _ = db1.c.Close() })
	key := "oauth:lock:alice:github"
	if db0.releaseChannel(key) == db1.releaseChannel(key) {
		t.Fatalf("DB 0 and DB 1 announce %s's release on the same channel %q", key, db0.releaseChannel(key))
	}
	other := NewRedisKV(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}))
	t.Cleanup(func() { _ = other.c.Close() })
	if db0.releaseChannel(key) != other.releaseChannel(key) {
		t.Fatal("two stores on one database must share the channel")
	}
}

// releasedWhileSubscribingKV lets the refresh lock go (another process's
// holder finishing) at the worst moment for a waiter: after its take failed,
// before its subscription is in place, so no announcement can reach it.
type releasedWhileSubscribingKV struct {
	KV
	release func()
}

func (k *releasedWhileSubscribingKV) watchRelease(ctx context.Context, key string) (<-chan struct{}, func(), bool) {
	k.release()
	return k.KV.(releaseWatcher).watchRelease(ctx, key)
}

func (k *releasedWhileSubscribingKV) announceRelease(ctx context.Context, key string) {
	k.KV.(releaseWatcher).announceRelease(ctx, key)
}

// A waiter whose watch begins just after the holder let go looks at the lock
// once more before it waits, takes it and refreshes: it never waits for an
// announcement that was made before it listened.
func TestRefreshWaiterLooksAgainOnceListening(t *testing.T) {
	t.Parallel()
	c, real := redistest.Any(t)
	var base KV = NewRedisKV(c)
	if real {
		base = WithKeyPrefix(base, redistest.Prefix(t, c))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lock := lockKey("u1", "gated")
	kv := &releasedWhileSubscribingKV{KV: base, release: func() { _ = base.Del(ctx, lock) }}
	p := &gatedProvider{entered: make(chan struct{}, 1), open: make(chan struct{})}
	close(p.open)
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	waiter := NewTokenStore(kv, reg)
	waiter.lockWait = lockWait{first: time.Hour, max: time.Hour, watched: time.Hour}
	var waits atomic.Int64
	waiter.onLockWait = func() { waits.Add(1); cancel() } // a wait here would be for nothing: fail fast
	expired := StoredTokens{AccessToken: "stale", RefreshToken: "old", ExpiresAt: time.Now().Add(-time.Minute).UnixMilli()}
	if err := waiter.StoreTokens(ctx, "u1", "gated", expired); err != nil {
		t.Fatal(err)
	}
	if ok, err := base.SetNX(ctx, lock, []byte("another-process"), time.Minute); err != nil || !ok {
		t.Fatalf("taking the lock as another process: %v %v", ok, err)
	}
	tok, err := waiter.GetValidAccessToken(ctx, "u1", "gated")
	if err != nil || tok != "fresh" {
		t.Fatalf("GetValidAccessToken = %q, %v; want the token it refreshed itself after looking again", tok, err)
	}
	if n := waits.Load(); n != 0 {
		t.Fatalf("the waiter waited %d times for a release it had missed", n)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("the provider was called %d times; want 1", n)
	}
}
