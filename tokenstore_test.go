package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
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
	kv := &leaseCountingKV{KV: oauthflow.NewMemoryKVOn(clock.Now)}
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

// A read that needs scopes the grant lacks is ErrNoToken with a *ScopeError
// naming them, without a refresh (a refresh never adds scopes); with the
// scopes granted it is the token, refreshed as usual.
func TestGetValidAccessTokenForNamesMissingScopes(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f := newStoreFixture(t, b.new(t))
			require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
				&oauthflow.TokenSet{AccessToken: "at", RefreshToken: "rt", ExpiresIn: 30, Scope: "read profile"}))

			_, err := f.store.GetValidAccessToken(ctx, "u", "acme", "read", "write", "admin")
			require.ErrorIs(t, err, oauthflow.ErrNoToken, "a tool says unauthorized")
			var se *oauthflow.ScopeError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "acme", se.ProviderID)
			assert.Equal(t, []string{"write", "admin"}, se.Missing)
			assert.Equal(t, []string{"read", "profile"}, se.Granted)
			assert.Equal(t, []string{"read", "profile", "write", "admin"}, se.Scopes(), "what a new sign-in asks for")
			assert.Zero(t, f.prov.refreshes.Load(), "no refresh for a grant that lacks scopes")

			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme", "read")
			require.NoError(t, err)
			assert.Equal(t, "access-1", tok, "due (30 s is inside the skew), so refreshed")
		})
	}
}

// A tool whose store read lacks scopes answers unauthorized with the
// provider, the missing scopes and the scopes to ask for.
func TestToolReportsMissingScopes(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "at", ExpiresIn: 3600, Scope: "read"}))
	tok, err := f.store.GetValidAccessToken(ctx, "u", "acme") // valid: MemoryKV now keeps it decoded
	require.NoError(t, err)
	require.Equal(t, "at", tok)
	tool := oauthflow.NewTool("write_thing", "Writes.", oauthflow.Schema{Type: "object", Properties: map[string]oauthflow.Property{}},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			return f.store.GetValidAccessToken(ctx, tc.UserID, "acme", "read", "write")
		})
	res, err := tool.Call(context.Background(), oauthflow.ToolContext{UserID: "u"}, json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"error":"unauthorized","provider":"acme","missingScopes":["write"],"scopes":["read","write"]}`, string(res))
	u, ok := oauthflow.UnauthorizedResult(res)
	require.True(t, ok)
	assert.Equal(t, oauthflow.Unauthorized{Error: "unauthorized", Provider: "acme", MissingScopes: []string{"write"},
		Scopes: []string{"read", "write"}}, u)
	_, ok = oauthflow.UnauthorizedResult(json.RawMessage(`{"repos":[]}`))
	assert.False(t, ok)
}

// writerWorkflow is the agent pattern with scopes: its tool needs "read
// write"; on unauthorized it launches the "oauth" workflow asking for the
// scopes the tool's answer names (what was granted, and what is missing).
func writerWorkflow(m *oauthflow.Module) *oauthflow.Workflow {
	tool := oauthflow.NewTool("write_note", "Writes a note.", oauthflow.Schema{Type: "object", Properties: map[string]oauthflow.Property{}},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			if _, err := m.Tokens.GetValidAccessToken(ctx, tc.UserID, "peer", "read", "write"); err != nil {
				return nil, err
			}
			return map[string]bool{"written": true}, nil
		})
	return &oauthflow.Workflow{
		Name:   "writer",
		States: []string{oauthflow.StateStart, oauthflow.StateAwaitingAuth, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "write", From: oauthflow.StateStart, To: oauthflow.StateEnd,
				Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
					res, err := tool.Call(ctx, oauthflow.ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID}, json.RawMessage(`{}`))
					if err != nil {
						return err
					}
					if u, ok := oauthflow.UnauthorizedResult(res); ok {
						tc.GoTo(oauthflow.StateAwaitingAuth)
						_, err := tc.Launch(ctx, oauthflow.OAuthWorkflowName, oauthflow.OAuthWorkflowArgs{Provider: "peer", Scopes: u.Scopes},
							oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "authCompleted"}})
						return err
					}
					return tc.SetResult(json.RawMessage(res))
				}},
			{Name: "authCompleted", From: oauthflow.StateAwaitingAuth, To: oauthflow.StateStart, Wait: true,
				Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }},
		},
	}
}

// Step-up from "read" to "read write" against the independent oidc-provider:
// alice signed in with read; a tool that needs write answers unauthorized
// naming it; the workflow's sign-in asks for the union, the peer grants it,
// the parent resumes and the tool succeeds; the stored scope is the peer's.
func TestInteropScopeStepUp(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
	_, _, redirect := app.signIn(t, "alice") // openid offline_access read
	status, _, _ := get(t, redirect.String())
	require.Equal(t, http.StatusOK, status)
	before, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	require.NotContains(t, strings.Fields(before.Scope), "write")

	require.NoError(t, app.mod.Engine.Register(writerWorkflow(app.mod)))
	parent, err := app.mod.Engine.Launch(context.Background(), "alice", "writer", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, oauthflow.StateAwaitingAuth, parent.State, "the grant lacks write: the parent waits for a sign-in")
	require.Len(t, parent.Children, 1)
	doc := app.prompt(t, parent.Children[0])
	// The peer offers PAR, so the scopes asked for are in the pushed request,
	// which the pending sign-in records, not in the URL.
	pending, err := oauthflow.PeekSession(app.mod.Sessions, context.Background(), doc.State)
	require.NoError(t, err)
	assert.ElementsMatch(t, append(strings.Fields(before.Scope), "write"), pending.Scopes, "the union of granted and missing")

	status, _, _ = get(t, peer.Authorize(t, doc.AuthURL, app.api.URL+oauthflow.CallbackPath).String())
	require.Equal(t, http.StatusOK, status)
	parent, err = app.mod.Engine.Get(context.Background(), parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status)
	assert.JSONEq(t, `{"written":true}`, string(parent.Result), "the tool ran again with the wider grant")
	after, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	assert.Subset(t, strings.Fields(after.Scope), []string{"read", "write"}, "the stored scope is what the peer granted")
}

// The hot read over a MemoryKV keeps each stored record decoded beside it. These
// tests hold it to what the general read does: every write is seen at once, an
// expired token is refreshed, a record gone is gone, and nothing is allocated.

func memoryKVs(clock *fakeclock.Clock) map[string]oauthflow.KV {
	return map[string]oauthflow.KV{
		"plain":    oauthflow.NewMemoryKVOn(clock.Now),
		"prefixed": oauthflow.WithKeyPrefix(oauthflow.NewMemoryKVOn(clock.Now), "app1:"),
	}
}

func TestMemoryReadSeesEveryWrite(t *testing.T) {
	t.Parallel()
	for name, kv := range memoryKVs(fakeclock.New(epoch)) {
		t.Run(name, func(t *testing.T) {
			f := newStoreFixture(t, kv)
			read := func() (string, error) { return f.store.GetValidAccessToken(ctx, "u", "acme") }
			expires := epoch.Add(time.Hour).UnixMilli()
			require.NoError(t, f.store.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "a1", RefreshToken: "r1", ExpiresAt: expires, Scope: "s"}))
			assertRead(t, read, "a1")
			assertRead(t, read, "a1")

			require.NoError(t, f.store.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "a2", RefreshToken: "r1", ExpiresAt: expires, Scope: "s"}))
			assertRead(t, read, "a2")

			raw, err := kv.Get(ctx, "oauth:u:acme")
			require.NoError(t, err)
			a3 := []byte(`{"accessToken":"a3","refreshToken":"r1","expiresAt":` + strconv.FormatInt(expires, 10) + `,"scope":"s"}`)
			swapped, err := kv.CompareAndSwap(ctx, "oauth:u:acme", raw, a3, time.Hour)
			require.NoError(t, err)
			require.True(t, swapped)
			assertRead(t, read, "a3")

			f.clock.Advance(time.Hour) // a3 has expired: the read refreshes
			assertRead(t, read, "access-1")
			assert.EqualValues(t, 1, f.prov.refreshes.Load())
			assertRead(t, read, "access-1")

			require.NoError(t, kv.Del(ctx, "oauth:u:acme"))
			_, err = read()
			assert.ErrorIs(t, err, oauthflow.ErrNoToken)

			require.NoError(t, kv.Set(ctx, "oauth:u:acme", []byte(`{"accessToken":"a4"`), time.Minute))
			_, err = read()
			assert.ErrorIs(t, err, oauthflow.ErrCorruptRecord)
		})
	}
}

// A record whose key has expired in the store is not served from its decoded copy.
func TestMemoryReadHonoursTheStoreTTL(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	kv := oauthflow.NewMemoryKVOn(clock.Now)
	f := newStoreFixture(t, kv)
	f.clock = clock
	record := []byte(`{"accessToken":"a1","expiresAt":0,"scope":"s"}`)
	require.NoError(t, kv.Set(ctx, "oauth:u:acme", record, time.Minute))
	assertRead(t, func() (string, error) { return f.store.GetValidAccessToken(ctx, "u", "acme") }, "a1")
	clock.Advance(time.Minute)
	_, err := f.store.GetValidAccessToken(ctx, "u", "acme")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)
}

func TestValidTokenReadAllocations(t *testing.T) {
	for name, kv := range memoryKVs(fakeclock.New(epoch)) {
		t.Run(name, func(t *testing.T) {
			store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, store.StoreTokens(ctx, "bench-user", "github",
				oauthflow.StoredTokens{AccessToken: "gho_x", RefreshToken: "ghr_y", ExpiresAt: 0, Scope: "repo"}))
			var calls, wrong int
			var last error
			allocs := testing.AllocsPerRun(100, func() {
				tok, err := store.GetValidAccessToken(ctx, "bench-user", "github")
				calls++
				if err != nil || tok != "gho_x" {
					wrong, last = wrong+1, err
				}
			})
			// Measuring a read that fails would measure the error path, not the read.
			require.Zero(t, wrong, "%d of %d measured reads did not return the stored token (last error: %v)", wrong, calls, last)
			assert.Zero(t, allocs, "a valid-token read from memory allocates nothing: not the key, not the token string")
		})
	}
}

func assertRead(t *testing.T, read func() (string, error), want string) {
	t.Helper()
	got, err := read()
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

// The world moving on while a refresh is in flight: a new sign-in, a
// disconnect, a lost lease, a store that fails the write. Each runs on memory,
// miniredis and the real Redis.

// within waits for ch, failing the test with what never happened after a
// generous bound instead of hanging.
func within[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	return waitfor.Recv(t, ch, what)
}

type readResult struct {
	tok string
	err error
}

// goRead reads the user's valid token on its own goroutine.
func goRead(ctx context.Context, s *oauthflow.TokenStore, userID string) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		tok, err := s.GetValidAccessToken(ctx, userID, "acme")
		ch <- readResult{tok, err}
	}()
	return ch
}

// gate makes refresh call number n wait for release before it answers with
// answer; started hears every call's number as it begins.
func gate(f *storeFixture, n int64, answer func(ctx context.Context, rt string, n int64) (*oauthflow.TokenSet, error)) (started chan int64, release chan struct{}) {
	started, release = make(chan int64, 16), make(chan struct{})
	f.prov.setRefresh(func(ctx context.Context, rt string, i int64) (*oauthflow.TokenSet, error) {
		started <- i
		if i == n {
			select {
			case <-release:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		return answer(ctx, rt, i)
	})
	return started, release
}

// rotating answers like a provider that accepts each refresh token once and
// rotates it: rt-1 gives access-N and a new refresh token rt-N+1.
type rotating struct {
	mu     sync.Mutex
	valid  map[string]bool
	reused int // refresh tokens presented after they were spent
}

func newRotating(first string) *rotating { return &rotating{valid: map[string]bool{first: true}} }

func (r *rotating) answer(_ context.Context, rt string, n int64) (*oauthflow.TokenSet, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.valid[rt] {
		r.reused++
		return nil, &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400, Code: "invalid_grant"}
	}
	delete(r.valid, rt)
	next := fmt.Sprintf("rt-%d", n+1)
	r.valid[next] = true
	return &oauthflow.TokenSet{AccessToken: fmt.Sprintf("access-%d", n), RefreshToken: next, ExpiresIn: 3600}, nil
}

// onEveryBackend runs body as a parallel subtest on every backend, with a
// fixture over it (wrapped when wrap is given) that holds a stale record for
// user "u" with refresh token rt-1.
func onEveryBackend(t *testing.T, wrap func(oauthflow.KV) oauthflow.KV, body func(t *testing.T, f *storeFixture), opts ...oauthflow.TokenStoreOption) {
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			kv := be.new(t)
			if wrap != nil {
				kv = wrap(kv)
			}
			f := newStoreFixture(t, kv, opts...)
			staleRecord(t, f, "u", "rt-1")
			body(t, f)
		})
	}
}

func withFaults(kv oauthflow.KV) oauthflow.KV { return &faultKV{KV: kv} }

// inFlight starts a read of user u whose refresh waits for release before it
// answers with answer, and returns once that refresh has begun.
func inFlight(t *testing.T, f *storeFixture, answer func(context.Context, string, int64) (*oauthflow.TokenSet, error)) (res <-chan readResult, release func()) {
	t.Helper()
	started, gateOpen := gate(f, 1, answer)
	res = goRead(ctx, f.store, "u")
	within(t, started, "the refresh")
	return res, func() { close(gateOpen) }
}

// staleRecord stores an expired-in-skew token with refresh token rt for user u.
func staleRecord(t *testing.T, f *storeFixture, u, rt string) {
	t.Helper()
	require.NoError(t, f.store.StoreFromTokenSet(ctx, u, "acme",
		&oauthflow.TokenSet{AccessToken: "stale", RefreshToken: rt, ExpiresIn: 30, Scope: "read"}))
}

var errInvalidGrant = &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400, Code: "invalid_grant"}

func TestRefreshLosesToSignIn(t *testing.T) {
	t.Parallel()
	signIn := oauthflow.TokenSet{AccessToken: "new", RefreshToken: "rt-new", ExpiresIn: 3600, Scope: "read write"}
	answers := map[string]func(context.Context, string, int64) (*oauthflow.TokenSet, error){
		"old grant is dead": func(context.Context, string, int64) (*oauthflow.TokenSet, error) { return nil, errInvalidGrant },
		"old grant answers": func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
			return &oauthflow.TokenSet{AccessToken: "from-old", RefreshToken: "rt-old-2", ExpiresIn: 3600, Scope: "read"}, nil
		},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
				res, release := inFlight(t, f, answer)
				require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &signIn))
				release()
				r := within(t, res, "the read's answer")
				require.NoError(t, r.err, "the caller gets the current valid token")
				assert.Equal(t, "new", r.tok)
				got, err := f.store.GetTokens(ctx, "u", "acme")
				require.NoError(t, err, "the new sign-in must survive the refresh")
				assert.Equal(t, "new", got.AccessToken)
				assert.Equal(t, "rt-new", got.RefreshToken)
				assert.Equal(t, "read write", got.Scope)
				e, failed := f.events.last(oauthflow.EventRefreshFailed)
				assert.False(t, failed && e.GrantDead, "no dead-grant event for a connection that is alive")
			})
		})
	}
}

func TestRefreshLosesToDisconnect(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		res, release := inFlight(t, f, newRotating("rt-1").answer)
		require.NoError(t, f.store.DeleteTokens(ctx, "u", "acme"))
		release()
		r := within(t, res, "the read's answer")
		assert.ErrorIs(t, r.err, oauthflow.ErrNoToken)
		_, err := f.store.GetTokens(ctx, "u", "acme")
		assert.ErrorIs(t, err, oauthflow.ErrNoToken, "the refresh must not write the record back")
		_, err = f.kv.Get(ctx, "oauth:u:acme")
		assert.ErrorIs(t, err, oauthflow.ErrNotFound)
	})
}

// A lease holder whose lock was taken by another owner (its renewal failed and
// the lease ran out) writes nothing; the caller still gets the provider's
// token, and this process writes it later once the record is still the one it
// refreshed and the lock is its own again.
func TestRefreshLostLeaseStopsBeforeWrite(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		res, release := inFlight(t, f, newRotating("rt-1").answer)
		require.NoError(t, f.kv.Set(ctx, "oauth:lock:u:acme", []byte("another-owner"), time.Minute))
		release()
		r := within(t, res, "the read's answer")
		require.NoError(t, r.err)
		assert.Equal(t, "access-1", r.tok)
		raw, err := f.kv.Get(ctx, "oauth:u:acme")
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"stale"`, "a holder that lost its lock must not write")
		_, unsaved := f.events.last(oauthflow.EventRefreshUnsaved)
		assert.True(t, unsaved, "an event says the refreshed tokens are not saved")

		require.NoError(t, f.kv.Del(ctx, "oauth:lock:u:acme")) // the other owner is done
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "access-1", tok)
		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "rt-2", got.RefreshToken, "the rotated refresh token is written, never dropped")
		assert.EqualValues(t, 1, f.prov.refreshes.Load())
	})
}

// Two processes refresh at once because the first one's lease ran out; with a
// provider that accepts each refresh token once, the late one's invalid_grant
// must not delete the record the other one wrote.
func TestRefreshLateHolderDoesNotDeleteWinner(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		started, release := gate(f, 1, newRotating("rt-1").answer)
		reg := oauthflow.NewRegistry()
		require.NoError(t, reg.Register(f.prov))
		other := oauthflow.NewTokenStore(f.kv, reg, oauthflow.WithClock(f.clock.Now),
			oauthflow.WithLogger(slog.New(slog.DiscardHandler)))

		late := goRead(ctx, f.store, "u")
		within(t, started, "the first refresh")
		require.NoError(t, f.kv.Del(ctx, "oauth:lock:u:acme")) // its lease ran out
		tok, err := other.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "access-2", tok)
		close(release) // the late one now presents the spent rt-1
		r := within(t, late, "the late read's answer")
		require.NoError(t, r.err, "the late caller gets the winner's token")
		assert.Equal(t, "access-2", r.tok)
		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err, "the winner's record must survive the loser's invalid_grant")
		assert.Equal(t, "rt-3", got.RefreshToken)
	})
}

// faultKV fails writes of token records while told to: the one-packet outage.
type faultKV struct {
	oauthflow.KV
	failNext atomic.Int64 // writes left to fail
	down     atomic.Bool  // fail every write
	writes   atomic.Int64
}

var errBlip = errors.New("redis: connection reset by peer")

func (f *faultKV) fail(key string) bool {
	if key != "oauth:u:acme" {
		return false
	}
	f.writes.Add(1)
	return f.down.Load() || f.failNext.Add(-1) >= 0
}

func (f *faultKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	if f.fail(key) {
		return errBlip
	}
	return f.KV.Set(ctx, key, v, ttl)
}

// casKV is the compare-and-set a fenced refresh writes through.
type casKV interface {
	CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error)
}

func (f *faultKV) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	if f.fail(key) {
		return false, errBlip
	}
	return f.KV.(casKV).CompareAndSwap(ctx, key, old, v, ttl)
}

// waitEvent waits until the fixture's hook has heard kind.
func waitEvent(t *testing.T, f *storeFixture, kind oauthflow.EventKind) oauthflow.Event {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if e, ok := f.events.last(kind); ok {
			return e
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("event %s never came; heard %v", kind, f.events.kinds())
	return oauthflow.Event{}
}

func TestRotatedTokenSurvivesStoreBlip(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, withFaults, func(t *testing.T, f *storeFixture) {
		kv := f.kv.(*faultKV)
		f.prov.setRefresh(newRotating("rt-1").answer)
		kv.failNext.Store(1)
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err, "the caller gets the new token although the write failed")
		assert.Equal(t, "access-1", tok)
		waitEvent(t, f, oauthflow.EventTokensRefreshed) // the retry landed
		raw, err := kv.KV.Get(ctx, "oauth:u:acme")
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"rt-2"`, "the retried write holds the rotated refresh token")

		f.clock.Advance(2 * time.Hour)
		tok, err = f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err, "the next refresh uses the rotated token, not the spent one")
		assert.Equal(t, "access-2", tok)
	})
}

// The refresh that cannot write keeps retrying until it gives up (here: once
// its second try is counted, its lock is taken from it, which ends the retries
// as its deadline would, without a race against a short timeout on a loaded
// machine); the rotated tokens stay in the process and are written later.
func TestRotatedTokenKeptWhileStoreDown(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, withFaults, func(t *testing.T, f *storeFixture) {
		kv := f.kv.(*faultKV)
		f.prov.setRefresh(newRotating("rt-1").answer)
		kv.down.Store(true)
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "access-1", tok)
		waitCount(t, &kv.writes, 2, "a second try of the write")
		require.NoError(t, kv.Set(ctx, "oauth:lock:u:acme", []byte("another-owner"), time.Minute))
		e := waitEvent(t, f, oauthflow.EventRefreshUnsaved)
		assert.Error(t, e.Err)
		require.NoError(t, kv.Del(ctx, "oauth:lock:u:acme")) // the other owner is done
		raw, err := kv.KV.Get(ctx, "oauth:u:acme")
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"rt-1"`, "nothing reached the store")
		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "rt-2", got.RefreshToken, "this process still knows the rotated token")

		kv.down.Store(false)
		tok, err = f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "access-1", tok, "the next read writes the kept tokens and hands them out")
		raw, err = kv.KV.Get(ctx, "oauth:u:acme")
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"rt-2"`)
		assert.EqualValues(t, 1, f.prov.refreshes.Load(), "no second refresh for the kept tokens")

		f.clock.Advance(2 * time.Hour)
		tok, err = f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err, "the user never has to sign in again")
		assert.Equal(t, "access-2", tok)
	})
}

// countingKV counts the attempts to take a refresh lock.
type countingKV struct {
	oauthflow.KV
	lockTries atomic.Int64
}

func (c *countingKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	c.lockTries.Add(1)
	return c.KV.SetNX(ctx, key, v, ttl)
}

// 1,000 callers in one process make one refresh and take the lock once: the
// in-process single-flight, not the KV lock, collapses them.
func TestRefreshInProcessTakesTheLockOnce(t *testing.T) {
	t.Parallel()
	kv := &countingKV{KV: oauthflow.NewMemoryKV()}
	f := newStoreFixture(t, kv)
	staleRecord(t, f, "u", "rt-1")
	started, release := gate(f, 1, newRotating("rt-1").answer)
	var wg sync.WaitGroup
	var entered atomic.Int64
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			entered.Add(1)
			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			assert.NoError(t, err)
			assert.Equal(t, "access-1", tok)
		}()
	}
	within(t, started, "the refresh")
	// While the refresh is held up, no other caller may even try the lock: give
	// them every chance to (all entered, then half a second), and count.
	for deadline := time.Now().Add(10 * time.Second); entered.Load() < 1000 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	for deadline := time.Now().Add(500 * time.Millisecond); kv.lockTries.Load() == 1 && time.Now().Before(deadline); {
		time.Sleep(time.Millisecond)
	}
	assert.EqualValues(t, 1, kv.lockTries.Load(), "lock attempts while one refresh runs")
	close(release)
	waitfor.Group(t, &wg, "1000 reads")
	assert.EqualValues(t, 1, f.prov.refreshes.Load())
}

// A waiter's own deadline ends its wait, however long the provider takes.
func TestRefreshWaiterHonoursItsOwnDeadline(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	staleRecord(t, f, "u", "rt-1")
	_, release := gate(f, 1, newRotating("rt-1").answer)
	t.Cleanup(func() { close(release) })
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	r := within(t, goRead(cctx, f.store, "u"), "the caller's deadline to end its wait")
	assert.ErrorIs(t, r.err, context.DeadlineExceeded)
	assert.NotErrorIs(t, r.err, oauthflow.ErrStoreUnavailable)
}

// The refresh runs under a context of its own: the caller that started it
// going away does not end it for the others.
func TestRefreshOutlivesTheCallerThatStartedIt(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		started, release := gate(f, 1, newRotating("rt-1").answer)
		first, cancel := context.WithCancel(ctx)
		firstRes := goRead(first, f.store, "u")
		within(t, started, "the refresh")
		second := goRead(ctx, f.store, "u")
		cancel()
		assert.ErrorIs(t, within(t, firstRes, "the first caller's return").err, context.Canceled)
		close(release)
		r := within(t, second, "the second caller's answer")
		require.NoError(t, r.err)
		assert.Equal(t, "access-1", r.tok)
		assert.EqualValues(t, 1, f.prov.refreshes.Load())
	})
}

// Only invalid_grant (and a provider's own listed codes) is a dead grant. A
// rotated client secret answering invalid_client must not delete every user's
// tokens, nor must a bare 400, an unauthorized_client or a 429.
func TestRefreshKeepsRecordUnlessGrantIsDead(t *testing.T) {
	t.Parallel()
	answers := map[string]error{
		"invalid_client":      &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 401, Code: "invalid_client"},
		"unauthorized_client": &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400, Code: "unauthorized_client"},
		"400 without a body":  &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400},
		"429":                 &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 429},
		"invalid_scope":       &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400, Code: "invalid_scope"},
	}
	for name, answer := range answers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
				f.prov.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) { return nil, answer })
				_, err := f.store.GetValidAccessToken(ctx, "u", "acme")
				require.Error(t, err)
				assert.NotErrorIs(t, err, oauthflow.ErrNoToken)
				got, err := f.store.GetTokens(ctx, "u", "acme")
				require.NoError(t, err, "the record must be kept")
				assert.Equal(t, "rt-1", got.RefreshToken)
			})
		})
	}
}

// A holder that lost its lock does not delete the record on invalid_grant
// either: the new holder decides. Here nobody else acts, so the caller gets a
// transient error at the refresh deadline and the record is kept.
func TestRefreshLostLeaseKeepsRecordOnDeadGrant(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		res, release := inFlight(t, f, func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
			return nil, errInvalidGrant
		})
		require.NoError(t, f.kv.Set(ctx, "oauth:lock:u:acme", []byte("another-owner"), time.Minute))
		release()
		r := within(t, res, "the read's answer")
		require.Error(t, r.err)
		assert.NotErrorIs(t, r.err, oauthflow.ErrNoToken)
		_, err := f.kv.Get(ctx, "oauth:u:acme")
		assert.NoError(t, err, "a holder that lost its lock must not delete")
	}, oauthflow.WithRefreshTimeout(300*time.Millisecond))
}

// The callers get the refreshed token at once, not after the write's retries.
func TestRefreshAnswersBeforeItsWriteRetries(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, withFaults, func(t *testing.T, f *storeFixture) {
		kv := f.kv.(*faultKV)
		f.prov.setRefresh(newRotating("rt-1").answer)
		kv.down.Store(true)
		caller, cancel := context.WithTimeout(ctx, 3*time.Second) // far less than the retries may take
		defer cancel()
		tok, err := f.store.GetValidAccessToken(caller, "u", "acme")
		require.NoError(t, err, "the caller must not wait for the store to come back")
		assert.Equal(t, "access-1", tok)
		tok, err = f.store.GetValidAccessToken(caller, "u", "acme")
		require.NoError(t, err, "nor must a later caller while the write is retried")
		assert.Equal(t, "access-1", tok)
		kv.down.Store(false)
		waitEvent(t, f, oauthflow.EventTokensRefreshed)
		raw, err := kv.KV.Get(ctx, "oauth:u:acme")
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"rt-2"`)
	}, oauthflow.WithRefreshTimeout(time.Minute))
}

// A provider whose tokens live less than the skew is still refreshed once: a
// replica waiting on another's refresh takes the record it wrote.
func TestRefreshShortLivedAnswerRefreshedOnce(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		started, release := gate(f, 1, func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
			return &oauthflow.TokenSet{AccessToken: "short", ExpiresIn: 30}, nil
		})
		reg := oauthflow.NewRegistry()
		require.NoError(t, reg.Register(f.prov))
		otherKV := &countingKV{KV: f.kv}
		other := oauthflow.NewTokenStore(otherKV, reg, oauthflow.WithClock(f.clock.Now),
			oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
		first := goRead(ctx, f.store, "u")
		within(t, started, "the refresh")
		second := goRead(ctx, other, "u")
		for deadline := time.Now().Add(10 * time.Second); otherKV.lockTries.Load() == 0; {
			require.True(t, time.Now().Before(deadline), "the second replica never tried the lock")
			time.Sleep(time.Millisecond) // until it waits on the lock the first one holds
		}
		close(release)
		for _, r := range []readResult{within(t, first, "the first answer"), within(t, second, "the second answer")} {
			require.NoError(t, r.err)
			assert.Equal(t, "short", r.tok)
		}
		assert.EqualValues(t, 1, f.prov.refreshes.Load())
	})
}

// A MemoryKV on a clock of its own judges only its own expiries: a TokenStore
// on time.Now judges a token's freshness on time.Now, even on the fast read.
func TestMemoryReadOnTheStoresClock(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKVOn(fakeclock.New(time.Now().Add(-24 * time.Hour)).Now) // a day behind
	store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, store.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "a",
		ExpiresAt: time.Now().Add(-time.Hour).UnixMilli()})) // expired an hour ago on time.Now
	_, err := store.GetValidAccessToken(ctx, "u", "acme")
	require.ErrorIs(t, err, oauthflow.ErrNoToken, "an expired token was served on the MemoryKV's clock")
}
