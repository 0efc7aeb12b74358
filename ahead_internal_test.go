package oauthflow

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"golang.org/x/oauth2"
)

// countingProvider answers every refresh with new tokens for an hour, or
// for lifetime when set.
type countingProvider struct {
	calls    atomic.Int64
	lifetime time.Duration
}

func (p *countingProvider) ProviderID() string      { return "acme" }
func (p *countingProvider) DefaultScopes() []string { return nil }
func (p *countingProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "http://127.0.0.1/authorize"
}
func (p *countingProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*TokenSet, error) {
	return nil, ErrNoToken
}
func (p *countingProvider) RefreshToken(context.Context, string) (*TokenSet, error) {
	p.calls.Add(1)
	expiresIn := int64(3600)
	if p.lifetime > 0 {
		expiresIn = int64(p.lifetime / time.Second)
	}
	return &TokenSet{AccessToken: "fresh", RefreshToken: "next", ExpiresIn: expiresIn}, nil
}

// hookedKV runs before, when set, ahead of each Schedule and Unschedule: a
// write of another instance landing just before one of the worker's.
type hookedKV struct {
	*kv.Memory
	before func(index, member string, due time.Time)
}

func (k *hookedKV) Schedule(ctx context.Context, index, member string, due time.Time) error {
	if f := k.before; f != nil {
		k.before = nil
		f(index, member, due)
	}
	return k.Memory.Schedule(ctx, index, member, due)
}

func (k *hookedKV) Unschedule(ctx context.Context, index, member string) error {
	if f := k.before; f != nil {
		k.before = nil
		f(index, member, time.Time{})
	}
	return k.Memory.Unschedule(ctx, index, member)
}

func aheadStore(t *testing.T) (*TokenStore, *hookedKV, *countingProvider, *fakeclock.Clock) {
	t.Helper()
	p, clock := &countingProvider{}, fakeclock.New(time.Unix(1_800_000_000, 0))
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	store := &hookedKV{Memory: kv.NewMemory(nil)}
	s := NewTokenStore(store, reg, WithClock(clock.Now), WithLogger(slog.New(slog.DiscardHandler)),
		WithRefreshAhead(5*time.Minute, 3*time.Hour))
	return s, store, p, clock
}

func dueOf(t *testing.T, store kv.Store, member string) (time.Time, bool) {
	t.Helper()
	ms, ok, err := store.(kv.IndexReader).Score(context.Background(), dueIndex, jobAhead+":"+member)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms), ok
}

// Two instances that both find a connection due (a claim whose lease lapsed
// while the first refreshed it) refresh it once: the second, holding the
// lock, finds the record no longer within the ahead time.
func TestRefreshDueOnceForTwoClaims(t *testing.T) {
	t.Parallel()
	s, _, p, clock := aheadStore(t)
	ctx := context.Background()
	if err := s.StoreTokens(ctx, "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: clock.Now().Add(4 * time.Minute).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	raw, _, err := s.read(ctx, tokenKey("u", "acme"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // both read raw before either refreshed
		if _, err := s.ahead.refreshDue(ctx, "u", "acme", raw); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("provider called %d times, want 1", n)
	}
}

// A read that lands while the worker parks an idle connection brings it
// back: the worker saw the old read, moved the entry far off over the read's
// own, and must make it due again.
func TestParkKeepsARaceWithARead(t *testing.T) {
	t.Parallel()
	s, store, _, clock := aheadStore(t)
	ctx := context.Background()
	if err := s.StoreTokens(ctx, "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: clock.Now().Add(time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	seen := clock.Now()
	clock.Advance(4 * time.Hour) // idle, and the token long expired
	member := aheadMember("u", "acme")
	store.before = func(string, string, time.Time) { // the read's mark, just before the park's write
		kv.RunBatch(ctx, store.Memory, s.ahead.markOps("u", "acme", clock.Now(), clock.Now().Add(time.Hour).UnixMilli())...)
	}
	if rescheduled, err := s.ahead.postponeIdle(ctx, member, seen); err != nil || !rescheduled {
		t.Fatalf("rescheduled %v, %v; want the entry placed by the job", rescheduled, err)
	}
	due, ok := dueOf(t, store, member)
	if !ok || due.After(clock.Now().Add(time.Hour)) {
		t.Fatalf("due at %v (present %v): the read's connection was parked", due, ok)
	}
}

// A sign-in that lands while the worker takes a gone connection out of
// refresh ahead keeps it in.
func TestLeaveKeepsARaceWithASignIn(t *testing.T) {
	t.Parallel()
	s, store, _, clock := aheadStore(t)
	ctx := context.Background()
	member := aheadMember("u", "acme")
	store.before = func(string, string, time.Time) { // the sign-in, just before the worker's first removal
		if err := s.StoreTokens(ctx, "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
			ExpiresAt: clock.Now().Add(time.Hour).UnixMilli()}); err != nil {
			t.Error(err)
		}
	}
	if rescheduled, err := s.ahead.removeFromRefreshAhead(ctx, member); err != nil || !rescheduled {
		t.Fatalf("rescheduled %v, %v; want the entry placed by the job", rescheduled, err)
	}
	if _, ok := dueOf(t, store, member); !ok {
		t.Fatal("the signed-in connection was taken out of refresh ahead")
	}
}

// An instance without refresh ahead takes the connections out that an
// instance with it put in: turning it off is turning it off.
func TestRefreshAheadOffTakesEntriesOut(t *testing.T) {
	t.Parallel()
	s, store, p, clock := aheadStore(t)
	ctx := context.Background()
	if err := s.StoreTokens(ctx, "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: clock.Now().Add(time.Minute).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	off := NewTokenStore(store, s.reg, WithClock(clock.Now))
	if rescheduled, err := off.ahead.job(ctx, aheadMember("u", "acme")); err != nil || !rescheduled {
		t.Fatalf("rescheduled %v, %v; want the entry placed by the job", rescheduled, err)
	}
	if _, ok := dueOf(t, store, aheadMember("u", "acme")); ok {
		t.Fatal("the entry is still there")
	}
	if p.calls.Load() != 0 {
		t.Fatal("an instance without refresh ahead refreshed")
	}
}

// Tokens that live less than the ahead time are refreshed halfway through
// their life, not by every pass of the worker.
func TestRefreshAheadOfShortTokens(t *testing.T) {
	t.Parallel()
	s, store, p, clock := aheadStore(t)
	p.lifetime = 4 * time.Minute // the ahead time is 5
	ctx := context.Background()
	if err := s.StoreTokens(ctx, "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: clock.Now().Add(4 * time.Minute).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if rescheduled, err := s.ahead.job(ctx, aheadMember("u", "acme")); err != nil || !rescheduled {
			t.Fatalf("rescheduled %v, %v; want the entry placed by the job", rescheduled, err)
		}
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("provider called %d times at one instant, want 1", n)
	}
	due, _ := dueOf(t, store, aheadMember("u", "acme"))
	if want := clock.Now().Add(2 * time.Minute); !due.Equal(want) {
		t.Fatalf("next due %v, want %v (halfway)", due, want)
	}
}

// A listing of the user's connections leaves refresh ahead's note of the
// last read in the user's index alone: the connection is still refreshed
// when it comes due, and the note is never listed as a connection.
func TestConnectionsKeepTheLastRead(t *testing.T) {
	t.Parallel()
	s, _, p, clock := aheadStore(t)
	ctx := context.Background()
	if err := s.StoreTokens(ctx, "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: clock.Now().Add(time.Hour).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetValidAccessToken(ctx, "u", "acme"); err != nil {
		t.Fatal(err)
	}
	conns, err := s.Connections(ctx, "u")
	if err != nil || len(conns) != 1 || conns[0].ProviderID != "acme" {
		t.Fatalf("connections %+v, %v", conns, err)
	}
	clock.Advance(56 * time.Minute) // inside the 5-minute ahead time
	if rescheduled, err := s.ahead.job(ctx, aheadMember("u", "acme")); err != nil || !rescheduled {
		t.Fatalf("rescheduled %v, %v; want the entry placed by the job", rescheduled, err)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("provider called %d times after a listing, want 1: the last read was lost", n)
	}
}
