package oauthflow_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

type storeFixture struct {
	kv     oauthflow.KV
	clock  *fakeclock.Clock
	prov   *fakeProvider
	store  *oauthflow.TokenStore
	events *eventLog
	logs   *lockedWriter
}

func newStoreFixture(t *testing.T, kv oauthflow.KV, opts ...oauthflow.TokenStoreOption) *storeFixture {
	t.Helper()
	f := &storeFixture{kv: kv, clock: fakeclock.New(epoch), prov: newFakeProvider("acme"),
		events: &eventLog{}, logs: &lockedWriter{w: &bytes.Buffer{}}}
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(f.prov))
	log := slog.New(slog.NewTextHandler(f.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	opts = append([]oauthflow.TokenStoreOption{oauthflow.WithClock(f.clock.Now),
		oauthflow.WithEventHook(f.events.hook), oauthflow.WithLogger(log)}, opts...)
	f.store = oauthflow.NewTokenStore(kv, reg, opts...)
	return f
}

type lockedWriter struct {
	mu sync.Mutex
	w  *bytes.Buffer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// String is what was written so far; a refresh that outlived its caller may still write.
func (l *lockedWriter) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.String()
}

var ctx = context.Background()

func TestTokenStoreExpiryAndTTL(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			tests := []struct {
				name       string
				set        oauthflow.TokenSet
				wantExpiry int64 // Unix ms
				wantTTL    time.Duration
			}{
				{"refresh token keeps 30 days", oauthflow.TokenSet{AccessToken: "a", RefreshToken: "r", ExpiresIn: 3600, Scope: "read"},
					epoch.UnixMilli() + 3_600_000, 30 * 24 * time.Hour},
				{"no refresh token lives as long as the token", oauthflow.TokenSet{AccessToken: "a", ExpiresIn: 3600, Scope: "read"},
					epoch.UnixMilli() + 3_600_000, time.Hour},
				{"no expiry never expires, kept 30 days", oauthflow.TokenSet{AccessToken: "a", Scope: "read"},
					0, 30 * 24 * time.Hour},
			}
			for _, tt := range tests {
				f := newStoreFixture(t, be.new(t))
				require.NoError(t, f.store.StoreFromTokenSet(ctx, "alice", "acme", &tt.set), tt.name)
				got, err := f.store.GetTokens(ctx, "alice", "acme")
				require.NoError(t, err)
				assert.Equal(t, tt.wantExpiry, got.ExpiresAt, tt.name)
				ttl, err := f.kv.TTL(ctx, "oauth:alice:acme")
				require.NoError(t, err)
				assert.InDelta(t, tt.wantTTL.Seconds(), ttl.Seconds(), 2, tt.name)
			}
		})
	}
}

func TestTokenStoreTTLOfStoredTokensWithoutRefresh(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, sharedRedis(t, true))
	// 1.5 s left rounds up to 2 s; an expiry in the past still gets the 1 s minimum.
	// The TTL read back has run down by at most the time the write and the
	// read took, however loaded the machine: that time is the only slack.
	ttlAfter := func(user string, expiresAt int64) (ttl, took time.Duration) {
		start := time.Now()
		require.NoError(t, f.store.StoreTokens(ctx, user, "acme", oauthflow.StoredTokens{AccessToken: "a", ExpiresAt: expiresAt, Scope: "s"}))
		ttl, err := f.kv.TTL(ctx, "oauth:"+user+":acme")
		require.NoError(t, err)
		return ttl, time.Since(start)
	}
	for _, c := range []struct {
		user      string
		expiresAt int64
		want      time.Duration
	}{{"u", epoch.UnixMilli() + 1500, 2 * time.Second}, {"v", epoch.UnixMilli() - 5000, time.Second}} {
		ttl, took := ttlAfter(c.user, c.expiresAt)
		if ttl > c.want || ttl < c.want-took-10*time.Millisecond {
			t.Errorf("%s: TTL %v, %v after the write began; want %v less at most that", c.user, ttl, took, c.want)
		}
	}
}

func TestTokenStoreSkew(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "old", RefreshToken: "r", ExpiresIn: 120}))
	f.clock.Advance(59 * time.Second) // 61 s left: still valid
	tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, "old", tok)
	assert.Zero(t, f.prov.refreshes.Load())
	f.clock.Advance(2 * time.Second) // 59 s left: inside the 60 s skew
	tok, err = f.store.GetValidAccessToken(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, "access-1", tok)
	assert.EqualValues(t, 1, f.prov.refreshes.Load())
}

func TestTokenStoreRefreshMerge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		answer      oauthflow.TokenSet
		wantRefresh string
		wantScope   string
		wantExpiry  int64
	}{
		{"rotation replaces the refresh token", oauthflow.TokenSet{AccessToken: "new", RefreshToken: "rt-2", ExpiresIn: 600},
			"rt-2", "read", epoch.UnixMilli() + 7_200_000 + 600_000},
		{"no new refresh token keeps the old one", oauthflow.TokenSet{AccessToken: "new", ExpiresIn: 600},
			"rt-1", "read", epoch.UnixMilli() + 7_200_000 + 600_000},
		{"a new scope replaces the old one", oauthflow.TokenSet{AccessToken: "new", Scope: "read write", ExpiresIn: 600},
			"rt-1", "read write", epoch.UnixMilli() + 7_200_000 + 600_000},
		{"no expiry in the answer never expires", oauthflow.TokenSet{AccessToken: "new"},
			"rt-1", "read", 0},
	}
	for _, be := range backends() {
		for _, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				f := newStoreFixture(t, be.new(t))
				require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
					&oauthflow.TokenSet{AccessToken: "old", RefreshToken: "rt-1", ExpiresIn: 3600, Scope: "read"}))
				var gotRT string
				f.prov.setRefresh(func(_ context.Context, rt string, _ int64) (*oauthflow.TokenSet, error) {
					gotRT = rt
					ans := tt.answer
					return &ans, nil
				})
				f.clock.Advance(2 * time.Hour)
				tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
				require.NoError(t, err)
				assert.Equal(t, "new", tok)
				assert.Equal(t, "rt-1", gotRT, "the provider must get the stored refresh token")
				got, err := f.store.GetTokens(ctx, "u", "acme")
				require.NoError(t, err)
				assert.Equal(t, oauthflow.StoredTokens{AccessToken: "new", RefreshToken: tt.wantRefresh, ExpiresAt: tt.wantExpiry, Scope: tt.wantScope}, *got)
				ttl, err := f.kv.TTL(ctx, "oauth:u:acme")
				require.NoError(t, err)
				assert.InDelta(t, (30 * 24 * time.Hour).Seconds(), ttl.Seconds(), 2)
				e, ok := f.events.last(oauthflow.EventTokensRefreshed)
				assert.True(t, ok)
				assert.Equal(t, "u", e.UserID)
			})
		}
	}
}

func TestTokenStoreRefreshFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		answer     func(ctx context.Context) error
		wantNoTok  bool // the record is gone and the user must sign in again
		transient  bool
		storeOpts  []oauthflow.TokenStoreOption
		callerWait time.Duration
	}{
		{name: "invalid_grant deletes the record", wantNoTok: true,
			answer: func(context.Context) error {
				return &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400, Code: "invalid_grant", Description: "revoked"}
			}},
		{name: "invalid_grant as oauth2.RetrieveError", wantNoTok: true,
			answer: func(context.Context) error {
				return &oauth2.RetrieveError{Response: &http.Response{StatusCode: 400}, ErrorCode: "invalid_grant"}
			}},
		{name: "503 keeps the record", transient: true,
			answer: func(context.Context) error { return &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 503} }},
		{name: "network error keeps the record", transient: true,
			answer: func(context.Context) error { return &oauthflow.ProviderError{ProviderID: "acme", Err: errUnreachable} }},
		{name: "provider hangs past the refresh timeout: record kept", transient: true,
			storeOpts: []oauthflow.TokenStoreOption{oauthflow.WithRefreshTimeout(150 * time.Millisecond)},
			answer:    func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }},
		{name: "caller's own deadline ends its wait: record kept", transient: true, callerWait: 100 * time.Millisecond,
			answer: func(ctx context.Context) error {
				select {
				case <-ctx.Done():
				case <-time.After(300 * time.Millisecond):
				}
				return &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 504}
			}},
		{name: "a provider that panics keeps the record",
			answer: func(context.Context) error { panic("provider bug") }},
	}
	for _, be := range backends() {
		for _, tt := range tests {
			t.Run(be.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				f := newStoreFixture(t, be.new(t), tt.storeOpts...)
				require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
					&oauthflow.TokenSet{AccessToken: "secret-access", RefreshToken: "secret-refresh", ExpiresIn: 60, Scope: "read"}))
				f.prov.setRefresh(func(ctx context.Context, _ string, _ int64) (*oauthflow.TokenSet, error) {
					return nil, tt.answer(ctx)
				})
				callCtx := ctx
				if tt.callerWait > 0 {
					var cancel context.CancelFunc
					callCtx, cancel = context.WithTimeout(ctx, tt.callerWait)
					defer cancel()
				}
				tok, err := f.store.GetValidAccessToken(callCtx, "u", "acme")
				require.Error(t, err)
				assert.Empty(t, tok)
				assert.Equal(t, tt.wantNoTok, errors.Is(err, oauthflow.ErrNoToken), "ErrNoToken: %v", err)
				if tt.transient {
					assert.True(t, oauthflow.IsTransient(err), "IsTransient(%v)", err)
				}
				got, gerr := f.store.GetTokens(ctx, "u", "acme")
				if tt.wantNoTok {
					assert.ErrorIs(t, gerr, oauthflow.ErrNoToken)
					e, ok := f.events.last(oauthflow.EventRefreshFailed)
					require.True(t, ok)
					assert.True(t, e.GrantDead)
				} else {
					require.NoError(t, gerr)
					assert.Equal(t, "secret-refresh", got.RefreshToken, "the record must be kept")
				}
				assert.NotContains(t, f.logs.String(), "secret-", "a token reached the log")
			})
		}
	}
}

func TestTokenStoreNoUsableToken(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	_, err := f.store.GetValidAccessToken(ctx, "nobody", "acme")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "a", ExpiresIn: 120}))
	f.clock.Advance(time.Hour)
	_, err = f.store.GetValidAccessToken(ctx, "u", "acme")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken, "expired without a refresh token")
	assert.Zero(t, f.prov.refreshes.Load())
}

func TestTokenStoreUnknownProviderKeepsRecord(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithClock(fakeclock.New(epoch).Now),
		oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, store.StoreTokens(ctx, "u", "gone", oauthflow.StoredTokens{AccessToken: "a", RefreshToken: "r", ExpiresAt: 1, Scope: ""}))
	_, err := store.GetValidAccessToken(ctx, "u", "gone")
	assert.ErrorIs(t, err, oauthflow.ErrUnknownProvider)
	_, err = store.GetTokens(ctx, "u", "gone")
	assert.NoError(t, err)
}

func TestTokenStoreCorruptRecord(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f := newStoreFixture(t, be.new(t))
			for _, raw := range []string{``, `{`, `null`, `[]`, `{"accessToken":1}`, `{"accessToken":"a","expiresAt":1,"scope":"s","extra":1}`,
				`{"accessToken":"a","expiresAt":1}`, `{"accessToken":"a","expiresAt":1,"scope":"s"} trailing`, "\xff\xfe"} {
				require.NoError(t, f.kv.Set(ctx, "oauth:u:acme", []byte(raw), time.Minute))
				_, err := f.store.GetValidAccessToken(ctx, "u", "acme")
				assert.ErrorIs(t, err, oauthflow.ErrCorruptRecord, "record %q", raw)
				_, err = f.store.GetTokens(ctx, "u", "acme")
				assert.ErrorIs(t, err, oauthflow.ErrCorruptRecord, "record %q", raw)
			}
			require.NoError(t, f.store.DeleteTokens(ctx, "u", "acme"), "a corrupt record can still be deleted")
			_, err := f.kv.Get(ctx, "oauth:u:acme")
			assert.ErrorIs(t, err, oauthflow.ErrNotFound)
		})
	}
}

func TestTokenStoreBadInput(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	var nilCtx context.Context
	cases := map[string]error{
		"empty user":         f.store.StoreTokens(ctx, "", "acme", oauthflow.StoredTokens{AccessToken: "a"}),
		"empty provider":     f.store.StoreTokens(ctx, "u", "", oauthflow.StoredTokens{AccessToken: "a"}),
		"provider with ':'":  f.store.StoreTokens(ctx, "u", "a:b", oauthflow.StoredTokens{AccessToken: "a"}),
		"empty access token": f.store.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{}),
		"negative expiresAt": f.store.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "a", ExpiresAt: -1}),
		"nil token set":      f.store.StoreFromTokenSet(ctx, "u", "acme", nil),
		"negative expiresIn": f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "a", ExpiresIn: -5}),
		"huge user ID":       f.store.StoreTokens(ctx, strings.Repeat("u", 600), "acme", oauthflow.StoredTokens{AccessToken: "a"}),
		"delete empty IDs":   f.store.DeleteTokens(ctx, "", ""),
	}
	for name, err := range cases {
		assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument, name)
	}
	_, err := f.store.GetValidAccessToken(ctx, "", "acme")
	assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
	_, err = f.store.GetTokens(ctx, "u", "")
	assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument)

	// A nil context is treated as context.Background, never a panic.
	require.NoError(t, f.store.StoreFromTokenSet(nilCtx, "u", "acme", &oauthflow.TokenSet{AccessToken: "a", ExpiresIn: 3600}))
	tok, err := f.store.GetValidAccessToken(nilCtx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, "a", tok)
	_, err = f.store.TokenSource(nilCtx, "u", "acme").Token()
	assert.NoError(t, err)
	assert.NoError(t, f.store.DeleteTokens(nilCtx, "u", "acme"))

	// A huge expiresIn is clamped, not overflowed into the past.
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "a", ExpiresIn: 1 << 62}))
	got, err := f.store.GetTokens(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Greater(t, got.ExpiresAt, epoch.UnixMilli())
}

func TestTokenStoreStoreUnavailableIsNotNoToken(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	store := oauthflow.NewTokenStore(oauthflow.NewRedisKV(c), oauthflow.NewRegistry())
	mr.Close()
	_, err := store.GetValidAccessToken(ctx, "u", "acme")
	assert.ErrorIs(t, err, oauthflow.ErrStoreUnavailable)
	assert.NotErrorIs(t, err, oauthflow.ErrNoToken)
	assert.True(t, oauthflow.IsTransient(err))
	err = store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "a"})
	assert.ErrorIs(t, err, oauthflow.ErrStoreUnavailable)
}

// The Done-when race: 1,000 callers on one expired token, spread over two
// TokenStores (two app replicas) sharing one Redis, make exactly one refresh.
func TestTokenStoreConcurrentRefreshAcrossReplicas(t *testing.T) {
	t.Parallel()
	for _, real := range []bool{false, true} {
		name := map[bool]string{false: "miniredis", true: "redis"}[real]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			assertOneRefreshAcrossReplicas(t, sharedRedis(t, real))
		})
	}
}

// assertOneRefreshAcrossReplicas races 1,000 callers over two TokenStores on kv
// for one expired token: one provider refresh, and every caller gets its result.
func assertOneRefreshAcrossReplicas(t *testing.T, kv oauthflow.KV) {
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
	waitfor.Group(t, &wg, "1000 reads on two replicas")
	for i := range results {
		require.NoError(t, errs[i], "caller %d", i)
		require.Equal(t, "fresh", results[i], "caller %d", i)
	}
	assert.EqualValues(t, 1, prov.refreshes.Load(), "provider refreshes")
}

func TestTokenStoreConcurrentRefreshInProcess(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "r", ExpiresIn: 10}))
	var wg sync.WaitGroup
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			assert.NoError(t, err)
			assert.Equal(t, "access-1", tok)
		}()
	}
	waitfor.Group(t, &wg, "1000 reads")
	assert.EqualValues(t, 1, f.prov.refreshes.Load())
}

// A replica that died holding the refresh lock blocks nobody past its lease.
func TestTokenStoreAbandonedLockExpires(t *testing.T) {
	t.Parallel()
	kv := sharedRedis(t, true)
	f := newStoreFixture(t, kv, oauthflow.WithLockLease(300*time.Millisecond))
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "r", ExpiresIn: 10}))
	require.NoError(t, kv.Set(ctx, "oauth:lock:u:acme", []byte("dead-replica"), 300*time.Millisecond))
	tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, "access-1", tok)
	assert.EqualValues(t, 1, f.prov.refreshes.Load())
}

// The lease is renewed while a slow refresh runs, so no second replica starts
// one. The lock lives in a store on a fake clock that the test moves four
// leases forward while the refresh is at the provider, a step of two thirds of
// a lease after each renewal it counts: without the renewals the lock would
// lapse at the second step. Counts, not sleeps, order the steps, so a loaded
// machine cannot change the outcome.
func TestTokenStoreLeaseRenewedDuringSlowRefresh(t *testing.T) {
	t.Parallel()
	const lease = 150 * time.Millisecond
	clock := fakeclock.New(epoch)
	kv := &leaseCountingKV{KV: oauthflow.NewMemoryKV(oauthflow.WithMemoryClock(clock.Now))}
	f := newStoreFixture(t, kv, oauthflow.WithClock(clock.Now), oauthflow.WithLockLease(lease))
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "r", ExpiresIn: 10}))
	started, release := gate(f, 1, func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
		return &oauthflow.TokenSet{AccessToken: "slow-fresh", ExpiresIn: 3600}, nil
	})
	first := goRead(ctx, f.store, "u")
	within(t, started, "the slow refresh")
	for range 6 {
		waitCount(t, &kv.renewals, kv.renewals.Load()+1, "a renewal of the refresh's lease")
		clock.Advance(lease * 2 / 3)
	}

	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(f.prov))
	other := oauthflow.NewTokenStore(kv, reg, oauthflow.WithClock(clock.Now), oauthflow.WithLockLease(lease),
		oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	refused := kv.refused.Load()
	second := goRead(ctx, other, "u")
	waitCount(t, &kv.refused, refused+1, "the second replica finding the lock held")
	close(release)
	for _, r := range []readResult{within(t, first, "the first answer"), within(t, second, "the second answer")} {
		require.NoError(t, r.err)
		assert.Equal(t, "slow-fresh", r.tok)
	}
	assert.EqualValues(t, 1, f.prov.refreshes.Load(), "one refresh across the replicas")
}

// leaseCountingKV counts the renewals of refresh locks that found the lock
// still held, and the attempts to take one that found it taken.
type leaseCountingKV struct {
	oauthflow.KV
	renewals, refused atomic.Int64
}

func (k *leaseCountingKV) CompareAndExpire(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.CompareAndExpire(ctx, key, v, ttl)
	if ok && strings.HasPrefix(key, "oauth:lock:") {
		k.renewals.Add(1)
	}
	return ok, err
}

func (k *leaseCountingKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.SetNX(ctx, key, v, ttl)
	if err == nil && !ok && strings.HasPrefix(key, "oauth:lock:") {
		k.refused.Add(1)
	}
	return ok, err
}

// waitCount waits until n holds at least want, failing with what after
// waitfor.Limit. It polls: the count is the order, the pause only yields.
func waitCount(t *testing.T, n *atomic.Int64, want int64, what string) {
	t.Helper()
	for deadline := time.Now().Add(waitfor.Limit); n.Load() < want; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s did not happen within %s", what, waitfor.Limit)
		}
	}
}

func TestTokenStoreDeleteTokens(t *testing.T) {
	t.Parallel()
	for _, revokeErr := range []error{nil, errors.New("revocation endpoint down")} {
		t.Run(fmt.Sprint(revokeErr), func(t *testing.T) {
			t.Parallel()
			f := newStoreFixture(t, oauthflow.NewMemoryKV())
			f.prov.revokeErr = revokeErr
			require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "a", RefreshToken: "r"}))
			require.NoError(t, f.store.DeleteTokens(ctx, "u", "acme"))
			_, err := f.store.GetTokens(ctx, "u", "acme")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken)
			assert.EqualValues(t, 1, f.prov.revoked.Load())
			_, failed := f.events.last(oauthflow.EventRevokeFailed)
			assert.Equal(t, revokeErr != nil, failed)
			assert.Contains(t, f.events.kinds(), oauthflow.EventTokensDeleted)
			require.NoError(t, f.store.DeleteTokens(ctx, "u", "acme"), "deleting twice is fine")
		})
	}
}

func TestTokenStoreClientSendsBearer(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	var got string
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
	}))
	defer api.Close()
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "r", ExpiresIn: 10}))
	resp, err := f.store.Client(ctx, "u", "acme").Get(api.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, "Bearer access-1", got, "the client refreshes the expired token and sends it")

	_, err = f.store.Client(ctx, "nobody", "acme").Get(api.URL)
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)

	tok, err := f.store.TokenSource(ctx, "u", "acme").Token()
	require.NoError(t, err)
	assert.Equal(t, "Bearer", tok.TokenType)
	assert.Equal(t, epoch.Add(time.Hour-time.Minute).UnixMilli(), tok.Expiry.UnixMilli())
}

func TestTokenStoreEventHookPanicIsContained(t *testing.T) {
	t.Parallel()
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), nil,
		oauthflow.WithEventHook(func(context.Context, oauthflow.Event) { panic("hook bug") }),
		oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	assert.NoError(t, store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "a"}))
}

func TestErrorClassification(t *testing.T) {
	t.Parallel()
	retrieve := func(status int, code string) error {
		return &oauth2.RetrieveError{Response: &http.Response{StatusCode: status}, ErrorCode: code}
	}
	tests := []struct {
		err             error
		transient, dead bool
	}{
		{retrieve(503, ""), true, false},
		{retrieve(429, ""), true, false},
		{retrieve(400, "invalid_grant"), false, true},
		{retrieve(401, "invalid_client"), false, false},
		{&oauthflow.ProviderError{ProviderID: "acme", StatusCode: 502}, true, false},
		{&oauthflow.ProviderError{ProviderID: "acme", Err: errUnreachable}, true, false},
		{&oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400}, false, false},
		{fmt.Errorf("wrapped: %w", context.DeadlineExceeded), true, false},
		{context.Canceled, false, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.transient, oauthflow.IsTransient(tt.err), "IsTransient(%v)", tt.err)
		assert.Equal(t, tt.dead, oauthflow.IsGrantDead(tt.err), "IsGrantDead(%v)", tt.err)
	}
	assert.Equal(t, "oauthflow: provider acme: invalid_grant: revoked: boom",
		(&oauthflow.ProviderError{ProviderID: "acme", Code: "invalid_grant", Description: "revoked", Err: errors.New("boom")}).Error())
	assert.Equal(t, "oauthflow: provider acme: HTTP 503", (&oauthflow.ProviderError{ProviderID: "acme", StatusCode: 503}).Error())
	assert.Equal(t, "oauthflow: provider acme: request failed", (&oauthflow.ProviderError{ProviderID: "acme"}).Error())
}

// WithLockLease sets the lease the refresh lock is taken with.
func TestTokenStoreLockLeaseOption(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV(), oauthflow.WithLockLease(time.Hour))
	staleRecord(t, f, "u", "rt-1")
	res, release := inFlight(t, f, newRotating("rt-1").answer)
	ttl, err := f.kv.TTL(ctx, "oauth:lock:u:acme")
	require.NoError(t, err)
	assert.Greater(t, ttl, 30*time.Minute, "the lock is held with the configured lease, not the 10 s default")
	release()
	require.NoError(t, within(t, res, "the read's answer").err)
}
