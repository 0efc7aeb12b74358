package oauthflow

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
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
	store := WithKeyPrefix(NewRedisKV(c), redistest.Prefix(t, c))
	p := &gatedProvider{entered: make(chan struct{}, 1), open: make(chan struct{})}
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	hour := lockWait{first: time.Hour, max: time.Hour, watched: time.Hour}
	holder := NewTokenStore(store, reg)
	waiter := NewTokenStore(store, reg)
	holder.refresher.lockWait, waiter.refresher.lockWait = hour, hour
	waiting := make(chan struct{})
	var once sync.Once
	waiter.refresher.onLockWait = func() { once.Do(func() { close(waiting) }) }

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

// releasedWhileSubscribingKV lets the refresh lock go (another process's
// holder finishing) at the worst moment for a waiter: after its take failed,
// before its subscription is in place, so no announcement can reach it.
type releasedWhileSubscribingKV struct {
	KV
	release func()
}

func (k *releasedWhileSubscribingKV) WatchRelease(ctx context.Context, key string) (<-chan struct{}, func(), bool) {
	k.release()
	return storeOf(k.KV).(kv.ReleaseWatcher).WatchRelease(ctx, key)
}

func (k *releasedWhileSubscribingKV) AnnounceRelease(ctx context.Context, key string) {
	storeOf(k.KV).(kv.ReleaseWatcher).AnnounceRelease(ctx, key)
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
	lock := keyspace.Lock("u1", "gated")
	store := &releasedWhileSubscribingKV{KV: base, release: func() { _ = base.Del(ctx, lock) }}
	p := &gatedProvider{entered: make(chan struct{}, 1), open: make(chan struct{})}
	close(p.open)
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	waiter := NewTokenStore(store, reg)
	waiter.refresher.lockWait = lockWait{first: time.Hour, max: time.Hour, watched: time.Hour}
	var waits atomic.Int64
	waiter.refresher.onLockWait = func() { waits.Add(1); cancel() } // a wait here would be for nothing: fail fast
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
