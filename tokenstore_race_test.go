package oauthflow_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
