package oauthflow

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/ratelimit"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/internal/worker"
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

// The due index's writes go through the sharded functions; the hook sees them too.
func (k *hookedKV) ScheduleSharded(ctx context.Context, index, member string, due time.Time) error {
	return k.Schedule(ctx, index, member, due)
}

func (k *hookedKV) UnscheduleSharded(ctx context.Context, index, member string) error {
	return k.Unschedule(ctx, index, member)
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
		withRefreshAhead(5*time.Minute, 3*time.Hour))
	return s, store, p, clock
}

func dueOf(t *testing.T, store kv.Store, member string) (time.Time, bool) {
	t.Helper()
	ms, ok, err := kv.ScoreSharded(context.Background(), store, dueIndex, jobAhead+":"+member)
	if err != nil {
		t.Fatal(err)
	}
	return time.UnixMilli(ms), ok
}

// On Redis a connection's refresh-ahead entry goes to a shard of the due
// index, where Redis keeps it compact, not to the index as one sorted set
// that an earlier version wrote.
func TestRefreshAheadEntryGoesToAShard(t *testing.T) {
	t.Parallel()
	_, c := redistest.Mini(t)
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	reg := NewRegistry()
	if err := reg.Register(&countingProvider{}); err != nil {
		t.Fatal(err)
	}
	store := NewRedisKV(c)
	s := NewTokenStore(store, reg, WithClock(clock.Now), WithLogger(slog.New(slog.DiscardHandler)),
		withRefreshAhead(5*time.Minute, 3*time.Hour))
	ctx := context.Background()
	expires := clock.Now().Add(time.Hour)
	if err := s.StoreTokens(ctx, "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r", ExpiresAt: expires.UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(ctx, dueIndex).Result(); err != nil || n != 0 {
		t.Fatalf("the index as one sorted set exists (%d, %v)", n, err)
	}
	due, ok := dueOf(t, storeOf(store), aheadMember("u", "acme"))
	if !ok || !due.Equal(expires.Add(-5*time.Minute)) {
		t.Fatalf("the entry is due at %v (present %v), want 5 minutes before the tokens expire", due, ok)
	}
}

// Two instances that both find a connection due (a claim whose lease lapsed
// while the first refreshed it) refresh it once: the second, holding the
// lock, finds the record no longer within the ahead time.
func TestRefreshDueOnceForTwoClaims(t *testing.T) {
	t.Parallel()
	s, _, p, clock := aheadStore(t)
	ctx := context.Background()
	storeExpiringIn(t, s, clock.Now(), 4*time.Minute)
	raw, _, err := s.read(ctx, keyspace.Token("u", "acme"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // both read raw before either refreshed
		if _, err := s.ahead.refreshDue(ctx, "u", "acme", raw, func() {}); err != nil {
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
	storeExpiringIn(t, s, clock.Now(), time.Hour)
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
	storeExpiringIn(t, s, clock.Now(), time.Minute)
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
	storeExpiringIn(t, s, clock.Now(), 4*time.Minute)
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
	storeExpiringIn(t, s, clock.Now(), time.Hour)
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

// heldProvider holds every refresh until the test opens the gate, and
// counts the refreshes in flight; status, when set, is the HTTP status of
// a failure it answers instead of tokens.
type heldProvider struct {
	countingProvider
	gate           chan struct{}
	inFlight, most atomic.Int64
	ended          atomic.Int64 // refreshes that returned, answered or not
	status         atomic.Int64
	full           chan struct{} // closed when fullAt refreshes are in flight
	fullAt         int64
	fullOnce       sync.Once
}

func (p *heldProvider) RefreshToken(ctx context.Context, rt string) (*TokenSet, error) {
	n := p.inFlight.Add(1)
	defer func() { p.inFlight.Add(-1); p.ended.Add(1) }()
	for m := p.most.Load(); n > m && !p.most.CompareAndSwap(m, n); m = p.most.Load() {
	}
	if n == p.fullAt {
		p.fullOnce.Do(func() { close(p.full) })
	}
	if p.gate != nil {
		select {
		case <-p.gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if st := p.status.Load(); st != 0 {
		p.calls.Add(1)
		return nil, &ProviderError{ProviderID: "acme", StatusCode: int(st)}
	}
	return p.countingProvider.RefreshToken(ctx, rt)
}

// limitedFleet is instances of refresh ahead sharing one store and one
// clock, each with a worker, and n connections of provider p due now.
type limitedFleet struct {
	stores  []*TokenStore
	workers []*worker.Worker
	clock   *fakeclock.Clock
}

func newLimitedFleet(t *testing.T, p Provider, instances, n int, limits map[string]RefreshLimit) *limitedFleet {
	t.Helper()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	kv := NewMemoryKV()
	f := &limitedFleet{clock: clock}
	for range instances {
		s := NewTokenStore(kv, reg, WithClock(clock.Now), WithLogger(slog.New(slog.DiscardHandler)),
			withRefreshAhead(5*time.Minute, 3*time.Hour), withRefreshLimits(limits))
		w := worker.New(kv, worker.Config{Now: clock.Now, Every: time.Hour})
		w.Handle(jobAhead, aheadShare, s.ahead.job)
		f.stores, f.workers = append(f.stores, s), append(f.workers, w)
	}
	ctx := context.Background()
	for i := range n {
		user := fmt.Sprintf("u%d", i)
		if err := f.stores[0].StoreTokens(ctx, user, "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
			ExpiresAt: clock.Now().Add(4 * time.Minute).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		if _, err := f.stores[0].GetValidAccessToken(ctx, user, "acme"); err != nil { // marks it read: due now
			t.Fatal(err)
		}
	}
	return f
}

// passAll runs one pass of every instance's worker at once.
func (f *limitedFleet) passAll(t *testing.T) {
	t.Helper()
	var wg sync.WaitGroup
	for _, w := range f.workers {
		wg.Go(func() { w.Pass(context.Background()) })
	}
	waitfor.Group(t, &wg, "the fleet's passes")
}

// One instance refreshes at most Concurrency of a provider's tokens at once.
func TestRefreshAheadConcurrencyPerProvider(t *testing.T) {
	t.Parallel()
	p := &heldProvider{gate: make(chan struct{}), full: make(chan struct{}), fullAt: 3}
	f := newLimitedFleet(t, p, 1, 20, map[string]RefreshLimit{"acme": {Concurrency: 3}})
	var queued atomic.Int64
	all := make(chan struct{})
	f.stores[0].ahead.limiter.OnQueue = func() {
		if queued.Add(1) == 20 {
			close(all)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); f.workers[0].Pass(context.Background()) }()
	waitfor.Recv(t, all, "every refresh asking for a slot")
	waitfor.Recv(t, p.full, "three refreshes in flight")
	if held := f.stores[0].ahead.limiter.Held("acme"); held != 3 {
		t.Fatalf("%d of the provider's 3 slots are held while 3 refreshes are at the provider", held)
	}
	close(p.gate)
	waitfor.Recv(t, done, "the pass")
	if most := p.most.Load(); most != 3 {
		t.Fatalf("%d refreshes of one provider ran at once on one instance, want 3", most)
	}
	if n := p.calls.Load(); n != 20 {
		t.Fatalf("%d refreshes, want all 20", n)
	}
}

// Across instances a provider gets PerSecond refreshes ahead a second: the
// rest wait for the next second, on whichever instance claims them.
func TestRefreshAheadRatePerProviderAcrossTheFleet(t *testing.T) {
	t.Parallel()
	p := &heldProvider{}
	f := newLimitedFleet(t, p, 3, 20, map[string]RefreshLimit{"acme": {PerSecond: 5}})
	f.passAll(t)
	if n := p.calls.Load(); n != 5 {
		t.Fatalf("three instances refreshed %d in one second, want 5", n)
	}
	for second := 2; second <= 4; second++ {
		f.clock.Advance(time.Second)
		f.passAll(t)
		if n := p.calls.Load(); n != int64(5*second) {
			t.Fatalf("after %d seconds: %d refreshes, want %d", second, n, 5*second)
		}
	}
}

// A provider's 429 slows the whole fleet's refreshes ahead of its tokens,
// not only the instance that heard it.
func TestRefreshAhead429SlowsTheFleet(t *testing.T) {
	t.Parallel()
	p := &heldProvider{}
	p.status.Store(http.StatusTooManyRequests)
	f := newLimitedFleet(t, p, 2, 10, map[string]RefreshLimit{"acme": {Concurrency: 1}})
	ctx := context.Background()
	members, err := kv.ClaimSharded(ctx, f.stores[0].kv, dueIndex, f.clock.Now(), worker.Lease, 1)
	if err != nil || len(members) != 1 {
		t.Fatalf("claim: %v, %v", members, err)
	}
	f.stores[0].ahead.job(ctx, strings.TrimPrefix(members[0], jobAhead+":")) // instance 0 hears 429
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("%d provider calls, want 1", n)
	}
	p.status.Store(0)
	f.workers[1].Pass(ctx)
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("instance 1 called the provider %d more times during the slow-down", n-1)
	}
	f.clock.Advance(ratelimit.SlowDown + time.Second)
	f.workers[1].Pass(ctx)
	if n := p.calls.Load(); n < 10 {
		t.Fatalf("after the slow-down %d provider calls, want every connection refreshed", n)
	}
}

// Refreshes that were waiting for a slot when the provider answered 429 do
// not go out after it: the slow-down is asked once the slot is held.
func TestRefreshAheadQueuedBehind429(t *testing.T) {
	t.Parallel()
	p := &heldProvider{gate: make(chan struct{}), full: make(chan struct{}), fullAt: 1}
	p.status.Store(http.StatusTooManyRequests)
	f := newLimitedFleet(t, p, 1, 5, map[string]RefreshLimit{"acme": {Concurrency: 1}})
	var queued atomic.Int64
	all := make(chan struct{})
	f.stores[0].ahead.limiter.OnQueue = func() {
		if queued.Add(1) == 5 {
			close(all)
		}
	}
	done := make(chan struct{})
	go func() { defer close(done); f.workers[0].Pass(context.Background()) }()
	waitfor.Recv(t, all, "five refreshes waiting for the provider's one slot")
	waitfor.Recv(t, p.full, "the first refresh at the provider")
	close(p.gate)
	waitfor.Recv(t, done, "the pass")
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("the provider got %d calls; the four queued behind its 429 went out anyway", n)
	}
}

// The refresh limiter keeps its bookkeeping only for providers the registry
// holds: with more providers resolved than the registry keeps, what it kept
// for those the registry let go is let go too.
func TestRefreshLimiterBoundedWithTheRegistry(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	reg.AddResolver("mcp-", func(id string) (Provider, error) { return idOnly(id), nil })
	s := NewTokenStore(NewMemoryKV(), reg, withRefreshLimits(map[string]RefreshLimit{"": {PerSecond: 1}}))
	ctx := context.Background()
	var busy func() // a refresh of the first provider stays in flight throughout
	for i := range maxResolved + 300 {
		id := fmt.Sprintf("mcp-server-%d", i)
		if _, err := reg.Get(id); err != nil {
			t.Fatal(err)
		}
		release, err := s.ahead.admit(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			busy = release
			continue
		}
		release()
	}
	defer busy()
	if held := s.ahead.limiter.Held("mcp-server-0"); held != 1 {
		t.Fatalf("the slots of a provider with a refresh in flight were let go: %d held, want 1", held)
	}
	if slots, buckets := s.ahead.limiter.Kept(); slots > maxResolved+1 || buckets > maxResolved {
		t.Fatalf("the limiter keeps slots for %d providers and buckets for %d; the registry holds at most %d",
			slots, buckets, maxResolved)
	}
}

// otherProvider is a second provider beside heldProvider's "acme": it
// reports, as it refreshes, how many of acme's refreshes have returned.
type otherProvider struct {
	countingProvider
	acme *heldProvider
	seen chan int64
}

func (p *otherProvider) ProviderID() string { return "beta" }
func (p *otherProvider) RefreshToken(ctx context.Context, rt string) (*TokenSet, error) {
	select {
	case p.seen <- p.acme.ended.Load():
	default:
	}
	return p.countingProvider.RefreshToken(ctx, rt)
}

// A provider whose token endpoint hangs holds only its share of the worker:
// with more of its connections due than the worker has slots, another
// provider's refresh ahead and a sign-in's lapse still run while every one
// of the hanging provider's slots waits on its endpoint.
func TestWorkerNotStarvedByAHangingProvider(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	acme := &heldProvider{gate: make(chan struct{}), full: make(chan struct{}), fullAt: defaultRefreshConcurrency}
	beta := &otherProvider{acme: acme, seen: make(chan int64, 1)}
	reg := NewRegistry()
	for _, p := range []Provider{acme, beta} {
		if err := reg.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	store, quiet := NewMemoryKV(), slog.New(slog.DiscardHandler)
	s := NewTokenStore(store, reg, WithClock(clock.Now), WithLogger(quiet), withRefreshAhead(5*time.Minute, 3*time.Hour))
	w := worker.New(store, worker.Config{Now: clock.Now, Every: time.Hour})
	w.Handle(jobAhead, aheadShare, s.ahead.job)
	lapsed := make(chan int64, 1)
	var lapses atomic.Int64
	w.Handle(jobLapse, worker.Share{Most: worker.KindShare}, func(context.Context, string) (bool, error) {
		lapses.Add(1)
		lapsed <- acme.ended.Load()
		return false, nil
	})
	ctx := context.Background()
	connect := func(user, provider string, expires time.Duration) {
		t.Helper()
		if err := s.StoreTokens(ctx, user, provider, StoredTokens{AccessToken: "a", RefreshToken: "r",
			ExpiresAt: clock.Now().Add(expires).UnixMilli()}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetValidAccessToken(ctx, user, provider); err != nil { // marks it read: due
			t.Fatal(err)
		}
	}
	const due = worker.MaxInFlight + 44
	for i := range due {
		connect(fmt.Sprintf("u%d", i), "acme", 4*time.Minute)
	}
	connect("v", "beta", 4*time.Minute+time.Second) // due after every one of acme's
	if err := w.Schedule(ctx, jobLapse, "run-1", clock.Now()); err != nil {
		t.Fatal(err)
	}
	drained := make(chan struct{})
	go func() { defer close(drained); w.Drain(ctx); w.Wait() }()
	waitfor.Recv(t, acme.full, "acme's slots all waiting on its endpoint")
	if n := waitfor.Recv(t, beta.seen, "beta's refresh ahead"); n != 0 {
		t.Fatalf("beta's refresh ran once %d of acme's refreshes had given up, want while all of them hang", n)
	}
	if n := waitfor.Recv(t, lapsed, "the sign-in's lapse"); n != 0 {
		t.Fatalf("the lapse ran once %d of acme's refreshes had given up, want while all of them hang", n)
	}
	if n := acme.inFlight.Load(); n != defaultRefreshConcurrency {
		t.Fatalf("%d of acme's refreshes at its endpoint, want %d", n, defaultRefreshConcurrency)
	}
	close(acme.gate)
	waitfor.Recv(t, drained, "the drain and the worker's pieces")
	if n, most := acme.calls.Load(), acme.most.Load(); n != due || most != defaultRefreshConcurrency {
		t.Fatalf("acme: %d refreshes, at most %d at once; want %d, at most %d", n, most, due, defaultRefreshConcurrency)
	}
	if b, l := beta.calls.Load(), lapses.Load(); b != 1 || l != 1 {
		t.Fatalf("beta refreshed %d times, the lapse ran %d times; want once each", b, l)
	}
}

// watchKV calls onSwap before each compare-and-swap (the refresh's write of
// what the provider answered) and onSet before each Set (a 429's slow-down).
type watchKV struct {
	*kv.Memory
	onSwap, onSet func(key string)
}

func (k *watchKV) CompareAndSwap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	if k.onSwap != nil {
		k.onSwap(key)
	}
	return k.Memory.CompareAndSwap(ctx, key, old, value, ttl)
}

func (k *watchKV) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if k.onSet != nil {
		k.onSet(key)
	}
	return k.Memory.Set(ctx, key, value, ttl)
}

// oneDueUnderOneSlot is a TokenStore over store whose one connection, u1's
// to p ("acme"), is due for refresh ahead now under a limit of one in
// flight, and a worker that runs it.
func oneDueUnderOneSlot(t *testing.T, p Provider, store kv.Store) (*TokenStore, *worker.Worker) {
	t.Helper()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	s := NewTokenStore(store, reg, WithClock(clock.Now), WithLogger(slog.New(slog.DiscardHandler)),
		withRefreshAhead(5*time.Minute, 3*time.Hour), withRefreshLimits(map[string]RefreshLimit{"acme": {Concurrency: 1}}))
	ctx := context.Background()
	if err := s.StoreTokens(ctx, "u1", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: clock.Now().Add(4 * time.Minute).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetValidAccessToken(ctx, "u1", "acme"); err != nil { // marks it read: due now
		t.Fatal(err)
	}
	w := worker.New(store, worker.Config{Now: clock.Now, Every: time.Hour})
	w.Handle(jobAhead, aheadShare, s.ahead.job)
	return s, w
}

// A refresh ahead holds its slot under the provider's limit while its request
// is at the provider, not while the answer is written: the limit bounds the
// requests in flight, and the store's time is not taken out of it.
func TestRefreshAheadSlotFreeWhileTheAnswerIsWritten(t *testing.T) {
	t.Parallel()
	p, store := &countingProvider{}, &watchKV{Memory: kv.NewMemory(nil)}
	s, w := oneDueUnderOneSlot(t, p, store)
	heldAtWrite := int64(-1)
	store.onSwap = func(key string) {
		if key == keyspace.Token("u1", "acme") {
			heldAtWrite = int64(s.ahead.limiter.Held("acme"))
		}
	}
	w.Pass(context.Background())
	waitWorker(t, w)
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("%d refreshes, want 1", n)
	}
	if heldAtWrite != 0 {
		t.Fatalf("%d of the provider's slots held while the refreshed tokens were written, want 0 (-1: never written)", heldAtWrite)
	}
	if held := s.ahead.limiter.Held("acme"); held != 0 {
		t.Fatalf("%d slots held once the refresh is done, want 0", held)
	}
}

// storeExpiringIn stores u's acme tokens on s, expiring d after now.
func storeExpiringIn(t *testing.T, s *TokenStore, now time.Time, d time.Duration) {
	t.Helper()
	if err := s.StoreTokens(context.Background(), "u", "acme", StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: now.Add(d).UnixMilli()}); err != nil {
		t.Fatal(err)
	}
}

// An entry an earlier version wrote ("ahead:{provider}:{user}") still runs,
// and leaves the index for the connection's entry under the current kind.
func TestRefreshAheadLegacyEntryMovesToTheCurrentKind(t *testing.T) {
	t.Parallel()
	s, store, p, clock := aheadStore(t)
	ctx := context.Background()
	storeExpiringIn(t, s, clock.Now(), time.Hour)
	if _, err := s.GetValidAccessToken(ctx, "u", "acme"); err != nil { // marks it read
		t.Fatal(err)
	}
	if err := kv.UnscheduleSharded(ctx, store, dueIndex, worker.Member(jobAhead, aheadMember("u", "acme"))); err != nil {
		t.Fatal(err)
	}
	legacy := worker.Member(jobAheadLegacy, aheadMember("u", "acme"))
	if err := kv.ScheduleSharded(ctx, store, dueIndex, legacy, clock.Now()); err != nil { // as an earlier version left it
		t.Fatal(err)
	}
	w := worker.New(store, worker.Config{Now: clock.Now, Every: time.Hour})
	w.Handle(jobAhead, aheadShare, s.ahead.job)
	w.Handle(jobAheadLegacy, aheadShare, s.ahead.legacyJob)
	w.Pass(ctx)
	waitWorker(t, w)
	if _, ok, err := kv.ScoreSharded(ctx, store, dueIndex, legacy); err != nil || ok {
		t.Fatalf("the earlier version's entry is still in the index (err %v)", err)
	}
	if due, ok := dueOf(t, store, aheadMember("u", "acme")); !ok || !due.After(clock.Now()) {
		t.Fatalf("the connection's entry under the current kind: due %v, there %v; want it due ahead of its expiry", due, ok)
	}
	if n := p.calls.Load(); n != 0 {
		t.Fatalf("%d refreshes of a token an hour from its expiry, want none", n)
	}
}

// A Module's worker runs an earlier version's entries too.
func TestModuleRunsLegacyRefreshAheadEntries(t *testing.T) {
	t.Parallel()
	p, clock := &countingProvider{}, fakeclock.New(time.Unix(1_800_000_000, 0))
	reg := NewRegistry()
	if err := reg.Register(p); err != nil {
		t.Fatal(err)
	}
	store := newMemoryKV(clock.Now)
	ctx := context.Background()
	m, err := New(ctx, Config{KV: store, Registry: reg, Now: clock.Now, RefreshAhead: 5 * time.Minute,
		WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	storeExpiringIn(t, m.Tokens, clock.Now(), 4*time.Minute)
	legacy := worker.Member(jobAheadLegacy, aheadMember("u", "acme"))
	if err := kv.ScheduleSharded(ctx, store.m, dueIndex, legacy, clock.Now()); err != nil {
		t.Fatal(err)
	}
	m.work.Pass(ctx)
	waitWorker(t, m.work)
	if _, ok, err := kv.ScoreSharded(ctx, store.m, dueIndex, legacy); err != nil || ok {
		t.Fatalf("the earlier version's entry was not run (err %v)", err)
	}
	if n := p.calls.Load(); n != 1 {
		t.Fatalf("%d refreshes of the due connection, want 1", n)
	}
}

// waitWorker waits, with a deadline, for the pieces w has in flight.
func waitWorker(t *testing.T, w *worker.Worker) {
	t.Helper()
	done := make(chan struct{})
	go func() { w.Wait(); close(done) }()
	waitfor.Recv(t, done, "the worker's pieces in flight")
}

// A refresh ahead that hears 429 keeps its slot until the slow-down is
// shared: a refresh queued for the slot asks after it, never before.
func TestRefreshAheadSlotHeldUntilA429IsShared(t *testing.T) {
	t.Parallel()
	p, store := &heldProvider{}, &watchKV{Memory: kv.NewMemory(nil)}
	p.status.Store(http.StatusTooManyRequests)
	s, w := oneDueUnderOneSlot(t, p, store)
	heldAtSlowDown := -1
	store.onSet = func(key string) {
		if strings.HasSuffix(key, ":acme") && strings.Contains(key, "slow") {
			heldAtSlowDown = s.ahead.limiter.Held("acme")
		}
	}
	w.Pass(context.Background())
	waitWorker(t, w)
	if heldAtSlowDown != 1 {
		t.Fatalf("%d of the provider's slots held while its 429 was shared, want 1 (-1: never shared)", heldAtSlowDown)
	}
}
