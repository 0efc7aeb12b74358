package oauthflow_test

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
