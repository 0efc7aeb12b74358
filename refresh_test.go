package oauthflow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// The edges of a refresh (issue 21): a re-encryption or a disconnect between a
// refresh's read and its write. Each runs on memory, miniredis and the real Redis.

// A Reencrypt walk that re-seals the record while a refresh is at the provider
// changes the record's bytes, not its tokens: that is not a newer record, and
// the rotated refresh token is written, never dropped.
func TestRefreshSurvivesReencrypt(t *testing.T) {
	t.Parallel()
	k1, k2 := newKey(t, "k1"), newKey(t, "k2")
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		res, release := inFlight(t, f, newRotating("rt-1").answer)
		p, err := oauthflow.Reencrypt(ctx, f.kv, keyRing(t, k2, k1), oauthflow.ReencryptOptions{})
		require.NoError(t, err)
		require.Equal(t, 1, p.Rewritten, "the walk re-seals the record mid-refresh")
		release()
		r := within(t, res, "the read's answer")
		require.NoError(t, r.err)
		assert.Equal(t, "access-1", r.tok, "the caller gets the refreshed token")
		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "rt-2", got.RefreshToken, "the rotated refresh token is stored")

		f.clock.Advance(2 * time.Hour) // the next refresh presents rt-2, the live one
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err, "the user stays connected")
		assert.Equal(t, "access-2", tok)
	}, oauthflow.WithEncryption(keyRing(t, k1, k2)))
}

// liveProvider rotates refresh tokens and counts the tokens it would still
// accept: a refresh spends the one presented and issues the next; a revocation
// ends the one named. It rotates before it answers, and its answer waits for
// release, so a disconnect can land while the new token is only in flight.
type liveProvider struct {
	mu      sync.Mutex
	live    map[string]bool
	n       int
	started chan string
	release chan struct{}
}

func newLiveProvider(first string) *liveProvider {
	return &liveProvider{live: map[string]bool{first: true}, started: make(chan string, 8), release: make(chan struct{})}
}

func (p *liveProvider) ProviderID() string      { return "acme" }
func (p *liveProvider) DefaultScopes() []string { return nil }
func (p *liveProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "https://auth.example/authorize"
}
func (p *liveProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return nil, fmt.Errorf("not used")
}

func (p *liveProvider) RefreshToken(ctx context.Context, rt string) (*oauthflow.TokenSet, error) {
	p.mu.Lock()
	if !p.live[rt] {
		p.mu.Unlock()
		return nil, errInvalidGrant
	}
	delete(p.live, rt)
	p.n++
	next := fmt.Sprintf("rt-%d", p.n+1)
	p.live[next] = true
	p.mu.Unlock()
	p.started <- next
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &oauthflow.TokenSet{AccessToken: "access-" + next, RefreshToken: next, ExpiresIn: 3600}, nil
}

func (p *liveProvider) RevokeToken(_ context.Context, token, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, token)
	return nil
}

func (p *liveProvider) liveTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for tok := range p.live {
		out = append(out, tok)
	}
	return out
}

// A disconnect while a refresh is at the provider leaves no token valid
// there: the disconnect revokes the refresh token it deleted, which the
// provider has already rotated away, and the refresh, finding its record
// gone, revokes the token it got.
func TestDisconnectDuringRefreshLeavesNothingLive(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			kv, prov := be.new(t), newLiveProvider("rt-1")
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(prov))
			store := oauthflow.NewTokenStore(kv, reg, oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, store.StoreFromTokenSet(ctx, "u", "acme",
				&oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "rt-1", ExpiresIn: 30}))

			res := goRead(ctx, store, "u")
			within(t, prov.started, "the provider's rotation")
			require.NoError(t, store.DeleteTokens(ctx, "u", "acme"))
			close(prov.release)
			r := within(t, res, "the read's answer")
			assert.ErrorIs(t, r.err, oauthflow.ErrNoToken, "the user is disconnected")
			_, err := store.GetTokens(ctx, "u", "acme")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken, "the refresh does not write the record back")
			assert.Empty(t, prov.liveTokens(), "no token of the connection stays valid at the provider")
		})
	}
}

// A refresh that lands between a disconnect's read and its delete is not
// deleted unrevoked: the disconnect deletes only the record it read, and
// revokes what it deletes.
func TestDisconnectRevokesTheRecordItDeletes(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			prov := newLiveProvider("rt-1")
			close(prov.release)
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(prov))
			kv := &refreshAfterRead{KV: be.new(t)}
			store := oauthflow.NewTokenStore(kv, reg, oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, store.StoreFromTokenSet(ctx, "u", "acme",
				&oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "rt-1", ExpiresIn: 30}))
			kv.refresh = func() {
				_, err := store.GetValidAccessToken(ctx, "u", "acme")
				assert.NoError(t, err, "the refresh between the disconnect's read and its delete")
			}
			require.NoError(t, store.DeleteTokens(ctx, "u", "acme"))
			_, err := store.GetTokens(ctx, "u", "acme")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken)
			assert.Equal(t, 1, kv.refreshed, "the refresh ran inside the disconnect")
			assert.Empty(t, prov.liveTokens(), "the refreshed token is revoked with the record")
		})
	}
}

// refreshAfterRead runs refresh once, right after the next read of the token
// record (the disconnect's): a refresh elsewhere writing in between.
type refreshAfterRead struct {
	oauthflow.KV
	refresh   func()
	refreshed int
}

func (k *refreshAfterRead) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := k.KV.Get(ctx, key)
	if key == "oauth:u:acme" && k.refresh != nil {
		run := k.refresh
		k.refresh = nil // the refresh's own reads pass
		run()
		k.refreshed++
	}
	return b, err
}

// The fenced write is two commands, the lease check and the compare-and-swap
// (the lock and the record are two keys, which a Cluster may keep on two
// nodes, so no one script can hold both). A holder that stalls between them
// past its lease cannot lose anything to that: the swap is against the exact
// bytes the holder read, so of two holders that read the same record exactly
// one write lands, whichever reaches the store first, and the other holder
// hands out the tokens that landed. (A stall past the lease anywhere after the
// provider call lets the next holder present a refresh token already spent; a
// one-step fence would not change that, only the lease's length does.)
func TestFencedWriteStalledPastItsLease(t *testing.T) {
	t.Parallel()
	for _, stalledFirst := range []bool{false, true} {
		name := map[bool]string{false: "the new holder writes first", true: "the stalled holder writes first"}[stalledFirst]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wrap := func(inner oauthflow.KV) oauthflow.KV { return newStallKV(inner, stalledFirst) }
			onEveryBackend(t, wrap, func(t *testing.T, f *storeFixture) {
				testFencedWriteStalled(t, f, f.kv.(*stallKV), stalledFirst)
			})
		})
	}
}

func testFencedWriteStalled(t *testing.T, f *storeFixture, kv *stallKV, stalledFirst bool) {
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(f.prov))
	other := oauthflow.NewTokenStore(f.kv, reg, oauthflow.WithClock(f.clock.Now),
		oauthflow.WithLogger(slog.New(slog.DiscardHandler)))

	stalled := goRead(ctx, f.store, "u") // refresh 1: access-1, then stalls after its lease check
	within(t, kv.stalled, "the first holder's stall between its lease check and its swap")
	require.NoError(t, f.kv.Del(ctx, "oauth:lock:u:acme")) // its lease lapses
	late := goRead(ctx, other, "u")                        // refresh 2: access-2
	var lateRes readResult
	if stalledFirst {
		within(t, kv.atSecond, "the new holder's swap")
		close(kv.resume)
		lateRes = within(t, late, "the new holder's answer")
	} else {
		lateRes = within(t, late, "the new holder's answer")
		close(kv.resume)
	}

	want := map[bool]string{false: "access-2", true: "access-1"}[stalledFirst]
	for _, r := range []readResult{within(t, stalled, "the stalled holder's answer"), lateRes} {
		require.NoError(t, r.err)
		assert.Equal(t, want, r.tok, "both holders hand out the tokens that landed")
	}
	got, err := f.store.GetTokens(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, want, got.AccessToken)
	assert.EqualValues(t, 1, kv.landed.Load(), "exactly one write landed")
	assert.EqualValues(t, 2, f.prov.refreshes.Load())
}

// stallKV holds the first compare-and-swap of the token record until resume
// is closed (a holder stalled between its lease check and its swap). With
// secondWaits, the second one waits until the first has landed.
type stallKV struct {
	oauthflow.KV
	secondWaits               bool
	calls, landed             atomic.Int64
	stalled, resume, atSecond chan struct{}
	firstDone                 chan struct{}
}

func newStallKV(inner oauthflow.KV, secondWaits bool) *stallKV {
	return &stallKV{KV: inner, secondWaits: secondWaits, stalled: make(chan struct{}), resume: make(chan struct{}),
		atSecond: make(chan struct{}), firstDone: make(chan struct{})}
}

func (k *stallKV) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	if key != "oauth:u:acme" {
		return k.KV.CompareAndSwap(ctx, key, old, v, ttl)
	}
	switch k.calls.Add(1) {
	case 1:
		close(k.stalled)
		defer close(k.firstDone)
		if _, err := waitfor.RecvErr(k.resume, "the stalled holder's resume"); err != nil {
			return false, err
		}
	case 2:
		if k.secondWaits {
			close(k.atSecond)
			if _, err := waitfor.RecvErr(k.firstDone, "the stalled holder's swap"); err != nil {
				return false, err
			}
		}
	}
	ok, err := k.KV.CompareAndSwap(ctx, key, old, v, ttl)
	if ok {
		k.landed.Add(1)
	}
	return ok, err
}

// GetTokens hands out the tokens a refresh kept unwritten even when their
// write lands between its read of the record and its look-up of them: a
// Reencrypt that makes a kept write follow the re-sealed record made that
// window real (a retry's follow-up write landing beside a reader).
func TestGetTokensWhileTheKeptWriteLands(t *testing.T) {
	t.Parallel()
	wrap := func(kv oauthflow.KV) oauthflow.KV { return &refreshAfterRead{KV: &faultKV{KV: kv}} }
	onEveryBackend(t, wrap, func(t *testing.T, f *storeFixture) {
		hook := f.kv.(*refreshAfterRead)
		faults := hook.KV.(*faultKV)
		f.prov.setRefresh(newRotating("rt-1").answer)
		faults.down.Store(true)
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		require.Equal(t, "access-1", tok)
		waitCount(t, &faults.writes, 2, "a second try of the write")
		require.NoError(t, f.kv.Set(ctx, "oauth:lock:u:acme", []byte("another-owner"), time.Minute))
		waitEvent(t, f, oauthflow.EventRefreshUnsaved) // the refresh gave up; rt-2 is kept in the process
		require.NoError(t, f.kv.Del(ctx, "oauth:lock:u:acme"))
		faults.down.Store(false)

		hook.refresh = func() { // right after GetTokens' read, the kept write lands
			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			assert.NoError(t, err)
			assert.Equal(t, "access-1", tok)
		}
		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err)
		require.Equal(t, 1, hook.refreshed, "the kept write landed inside the read")
		assert.Equal(t, "rt-2", got.RefreshToken, "GetTokens never hands out the spent refresh token")
	})
}

// A refresh still at the provider when its Module closes is written before
// Close returns, though its caller has gone: Close is followed by the process's
// exit or the KV's close, and a rotated refresh token the provider has already
// spent the old one for would be lost with it. The provider answers only once
// Close has begun.
func TestCloseWritesTheRefreshInFlight(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	p := newFakeProvider("acme")
	called, release := make(chan struct{}), make(chan struct{})
	p.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
		close(called)
		if _, err := waitfor.RecvErr(release, "the test's release"); err != nil {
			return nil, err
		}
		return &oauthflow.TokenSet{AccessToken: "rotated", RefreshToken: "rt-1", ExpiresIn: 3600, Scope: "read"}, nil
	})
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(p))
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: kv, Registry: reg, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	require.NoError(t, m.Tokens.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "old",
		RefreshToken: "rt-0", ExpiresAt: time.Now().Add(-time.Minute).UnixMilli(), Scope: "read"}))

	caller, leave := context.WithCancel(ctx)
	go func() { _, _ = m.Tokens.GetValidAccessToken(caller, "u", "acme") }()
	waitfor.Recv(t, called, "the refresh at the provider")
	leave() // the caller is gone; the refresh goes on

	closing, closed := make(chan struct{}), make(chan struct{})
	go func() {
		close(closing)
		_ = m.Close()
		close(closed)
	}()
	waitfor.Recv(t, closing, "Close begun")
	close(release)
	waitfor.Recv(t, closed, "Close returned")

	after := oauthflow.NewTokenStore(kv, reg)
	got, err := after.GetTokens(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, "rt-1", got.RefreshToken, "the rotated refresh token was written before Close returned")
}

// A rotated refresh token that a store outage kept from the store past the
// refresh's deadline lives only in this process: Close says so, naming the
// connection (never a token), instead of returning nil before an exit that
// loses the grant. Once the write has landed, or when the refresh rotated
// nothing (the stored refresh token still works), Close has nothing to say.
func TestCloseReportsARotatedTokenLeftUnwritten(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name               string
		rotates, storeBack bool
	}{
		{"store down", true, false},
		{"store back", true, true},
		{"nothing rotated", false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			faults := &faultKV{KV: oauthflow.NewMemoryKV()}
			p := newFakeProvider("acme")
			p.setRefresh(newRotating("rt-1").answer)
			if !c.rotates {
				p.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
					return &oauthflow.TokenSet{AccessToken: "access-1", ExpiresIn: 3600}, nil
				})
			}
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(p))
			m, err := oauthflow.New(ctx, oauthflow.Config{KV: faults, Registry: reg, WorkerInterval: time.Hour,
				Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			oauthflow.SetRefreshTimeout(m, 2*time.Second) // the outage outlasts it; a store back is written within it
			require.NoError(t, m.Tokens.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "old",
				RefreshToken: "rt-1", ExpiresAt: time.Now().Add(-time.Minute).UnixMilli(), Scope: "read"}))

			faults.down.Store(true)
			tok, err := m.Tokens.GetValidAccessToken(ctx, "u", "acme")
			require.NoError(t, err)
			require.Equal(t, "access-1", tok, "the caller got the refreshed tokens though the write failed")
			switch {
			case c.storeBack:
				faults.down.Store(false)
				assert.NoError(t, m.Close())
				raw, err := faults.KV.Get(ctx, "oauth:u:acme")
				require.NoError(t, err)
				assert.Contains(t, string(raw), `"rt-2"`, "the kept write landed before Close returned")
			case !c.rotates:
				assert.NoError(t, m.Close(), "the store's refresh token still works: nothing is lost")
			default:
				err = m.Close()
				require.Error(t, err, "the rotated refresh token dies with the process")
				assert.ErrorIs(t, err, oauthflow.ErrStoreUnavailable)
				assert.Contains(t, err.Error(), `user "u" provider "acme"`)
				for _, secret := range []string{"rt-2", "access-1", "rt-1"} {
					assert.NotContains(t, err.Error(), secret)
				}
			}
		})
	}
}

// failingProvider makes f's provider answer 503 to every refresh until
// recover is called, then new tokens.
func failingProvider(f *storeFixture) (recover func()) {
	f.prov.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
		return nil, &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 503, Code: "temporarily_unavailable"}
	})
	return func() {
		f.prov.setRefresh(func(_ context.Context, _ string, n int64) (*oauthflow.TokenSet, error) {
			return &oauthflow.TokenSet{AccessToken: "recovered", RefreshToken: "rt-new", ExpiresIn: 3600}, nil
		})
	}
}

// A provider that fails transiently is called with a backoff, not by every
// read: over 20 simulated seconds of reads every 250 ms, with a backoff of
// 1 s doubling to 4 s, it is called at 0, 1, 3, 7, 11, 15 and 19 s. Reads in
// between get a RefreshFailingError at once, the listing shows the failing
// connection, and the refresh that succeeds again emits the recovered event
// with the count.
func TestRefreshBackoff(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f := newStoreFixture(t, b.new(t), oauthflow.WithRefreshBackoff(oauthflow.Backoff{First: time.Second, Max: 4 * time.Second}))
			require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
				&oauthflow.TokenSet{AccessToken: "at", RefreshToken: "rt", ExpiresIn: 120, Scope: "read"}))
			recover := failingProvider(f)
			f.clock.Advance(2 * time.Minute) // expired
			start := f.clock.Now()

			var calls []time.Duration // when the provider was called, from start
			for at := time.Duration(0); at < 20*time.Second; at += 250 * time.Millisecond {
				f.clock.Set(start.Add(at))
				before := f.prov.refreshes.Load()
				_, err := f.store.GetValidAccessToken(ctx, "u", "acme")
				require.Error(t, err)
				assert.True(t, oauthflow.IsTransient(err), "%v", err)
				assert.NotErrorIs(t, err, oauthflow.ErrNoToken)
				if f.prov.refreshes.Load() > before {
					calls = append(calls, at)
					continue
				}
				var failing *oauthflow.RefreshFailingError
				require.ErrorAs(t, err, &failing, "a read between attempts")
				assert.Equal(t, len(calls), failing.Attempts)
				assert.Contains(t, failing.LastError, "503")
			}
			s := time.Second
			assert.Equal(t, []time.Duration{0, 1 * s, 3 * s, 7 * s, 11 * s, 15 * s, 19 * s}, calls)

			e, ok := f.events.last(oauthflow.EventRefreshFailed)
			require.True(t, ok)
			assert.Equal(t, 7, e.Attempts)
			assert.Equal(t, 1, countKind(f.events, oauthflow.EventConnectionFailing), "failing is told once, when it starts")

			list, err := f.store.Connections(ctx, "u")
			require.NoError(t, err)
			require.Len(t, list, 1)
			c := list[0]
			assert.Equal(t, oauthflow.HealthRefreshFailing, c.Health)
			assert.Equal(t, 7, c.Attempts)
			assert.Equal(t, "provider acme answered HTTP 503 temporarily_unavailable", c.LastError)
			assert.Equal(t, start.Add(19*s+4*s).UnixMilli(), c.NextAttempt.UnixMilli())
			assert.True(t, c.HasRefreshToken, "the record is kept")

			recover()
			f.clock.Set(start.Add(23 * s))
			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			require.NoError(t, err)
			assert.Equal(t, "recovered", tok)
			e, ok = f.events.last(oauthflow.EventConnectionRecovered)
			require.True(t, ok, "recovered is told")
			assert.Equal(t, 7, e.Attempts)

			list, err = f.store.Connections(ctx, "u")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, oauthflow.HealthHealthy, list[0].Health)
			assert.Zero(t, list[0].Attempts)
			assert.Equal(t, start.Add(23*s).UnixMilli(), list[0].RefreshedAt.UnixMilli())
			assert.NotContains(t, f.logs.String(), "rt-new", "a token reached the log")
		})
	}
}

// A failing connection whose access token is still valid keeps serving it:
// here an API refused the token (a 401), the forced refresh met a provider
// outage, and reads go on returning the stored token without calling the
// provider, while the listing tells the failure.
func TestFailingConnectionServesAValidToken(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f, api, srv := clientFixture(t, b.new(t))
			failingProvider(f)
			resp, err := f.store.Client(ctx, "u", "acme").Get(srv.URL)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the API's own answer: the refresh did not help")
			assert.EqualValues(t, 1, api.calls.Load())
			require.EqualValues(t, 1, f.prov.refreshes.Load())

			for range 5 {
				tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
				require.NoError(t, err)
				assert.Equal(t, "revoked-early", tok)
			}
			assert.EqualValues(t, 1, f.prov.refreshes.Load(), "reads of a valid token never call the provider")
			list, err := f.store.Connections(ctx, "u")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, oauthflow.HealthRefreshFailing, list[0].Health)
			assert.Equal(t, 1, list[0].Attempts)
		})
	}
}

// A sign-in after failed refreshes starts healthy: the health record speaks
// of the tokens it replaced. A dead grant and a disconnect take the record
// with the connection.
func TestHealthFollowsTheTokens(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			kv := b.new(t)
			backoff := oauthflow.Backoff{First: 10 * time.Minute}
			f := newStoreFixture(t, kv, oauthflow.WithRefreshBackoff(backoff))
			signIn := func(at string) {
				require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
					&oauthflow.TokenSet{AccessToken: at, RefreshToken: "rt-" + at, ExpiresIn: 120}))
			}
			signIn("first")
			failingProvider(f)
			f.clock.Advance(2 * time.Minute)
			_, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			require.Error(t, err)
			_, err = f.store.GetValidAccessToken(ctx, "u", "acme")
			var failing *oauthflow.RefreshFailingError
			require.ErrorAs(t, err, &failing)

			signIn("second")
			f.clock.Advance(2 * time.Minute) // expired again, within the first tokens' backoff
			list, err := f.store.Connections(ctx, "u")
			require.NoError(t, err)
			require.Len(t, list, 1)
			assert.Equal(t, oauthflow.HealthHealthy, list[0].Health, "the new sign-in is not failing")
			recover := failingProvider(f)
			recover()
			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			require.NoError(t, err, "the new tokens are refreshed at once")
			assert.Equal(t, "recovered", tok)
			assert.Zero(t, countKind(f.events, oauthflow.EventConnectionRecovered), "the new tokens never failed")

			require.NoError(t, f.store.DeleteTokens(ctx, "u", "acme"))
			_, err = kv.Get(ctx, "oauth:meta:u:acme")
			assert.ErrorIs(t, err, oauthflow.ErrNotFound, "a disconnect deletes the health record")

			signIn("third")
			failingProvider(f)
			f.clock.Advance(2 * time.Minute)
			_, err = f.store.GetValidAccessToken(ctx, "u", "acme")
			require.Error(t, err)
			_, err = kv.Get(ctx, "oauth:meta:u:acme")
			require.NoError(t, err, "the failure is recorded")
			f.clock.Advance(backoff.First)
			f.prov.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
				return nil, &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400, Code: "invalid_grant"}
			})
			_, err = f.store.GetValidAccessToken(ctx, "u", "acme")
			require.ErrorIs(t, err, oauthflow.ErrNoToken)
			_, err = kv.Get(ctx, "oauth:meta:u:acme")
			assert.ErrorIs(t, err, oauthflow.ErrNotFound, "a dead grant deletes the health record")
		})
	}
}

func countKind(l *eventLog, kind oauthflow.EventKind) int {
	n := 0
	for _, k := range l.kinds() {
		if k == kind {
			n++
		}
	}
	return n
}

// Connections that fail together (a provider outage) do not all try again
// at once: the default backoff shortens each wait by up to a fifth, by an
// amount of each connection's own.
func TestRefreshBackoffSpreadsConnections(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV()) // the default backoff
	failingProvider(f)
	users := []string{"u1", "u2", "u3", "u4", "u5", "u6"}
	for _, u := range users {
		require.NoError(t, f.store.StoreFromTokenSet(ctx, u, "acme",
			&oauthflow.TokenSet{AccessToken: "at-" + u, RefreshToken: "rt-" + u, ExpiresIn: 120}))
	}
	f.clock.Advance(2 * time.Minute)
	start := f.clock.Now()
	first := oauthflow.DefaultRefreshBackoff.First
	seen := map[int64]bool{}
	for _, u := range users {
		_, err := f.store.GetValidAccessToken(ctx, u, "acme")
		require.Error(t, err)
		list, err := f.store.Connections(ctx, u)
		require.NoError(t, err)
		require.Len(t, list, 1)
		wait := list[0].NextAttempt.Sub(start)
		assert.LessOrEqual(t, wait, first, u)
		assert.GreaterOrEqual(t, wait, first-first/5-time.Millisecond, u)
		seen[list[0].NextAttempt.UnixMilli()] = true
	}
	assert.Greater(t, len(seen), 1, "the connections' next attempts are spread, not one instant")
}

// Tokens an instance refreshed but could not write are kept only while the
// record still holds what they were refreshed from. A sign-in made on another
// instance meanwhile supersedes them: GetTokens and the next read serve the
// sign-in, and the next refresh starts from its refresh token, never writing
// the kept tokens over it.
func TestKeptTokensGiveWayToANewerSignIn(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, withFaults, func(t *testing.T, f *storeFixture) {
		kv := f.kv.(*faultKV)
		f.prov.setRefresh(newRotating("rt-1").answer)
		kv.down.Store(true)
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		require.Equal(t, "access-1", tok)
		waitEvent(t, f, oauthflow.EventRefreshUnsaved) // rt-2 is kept, unwritten
		kv.down.Store(false)

		reg := oauthflow.NewRegistry()
		require.NoError(t, reg.Register(f.prov))
		other := oauthflow.NewTokenStore(kv.KV, reg, oauthflow.WithClock(f.clock.Now))
		require.NoError(t, other.StoreFromTokenSet(ctx, "u", "acme",
			&oauthflow.TokenSet{AccessToken: "signed-in", RefreshToken: "rt-new", ExpiresIn: 3600, Scope: "read"}))

		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "signed-in", got.AccessToken, "GetTokens serves the newer sign-in")
		assert.Equal(t, "rt-new", got.RefreshToken)
		tok, err = f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "signed-in", tok)

		var sent atomic.Value
		f.prov.setRefresh(func(_ context.Context, rt string, _ int64) (*oauthflow.TokenSet, error) {
			sent.Store(rt)
			return &oauthflow.TokenSet{AccessToken: "after-" + rt, ExpiresIn: 3600}, nil
		})
		f.clock.Advance(2 * time.Hour)
		tok, err = f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "after-rt-new", tok, "the refresh starts from the sign-in")
		assert.Equal(t, "rt-new", sent.Load())
		raw, err := kv.KV.Get(ctx, "oauth:u:acme")
		require.NoError(t, err)
		assert.Contains(t, string(raw), `"rt-new"`, "the kept rt-2 never lands")
	}, oauthflow.WithRefreshTimeout(300*time.Millisecond)) // the unwritten refresh gives up soon
}
