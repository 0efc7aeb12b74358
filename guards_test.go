package oauthflow_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Guards of issue 26 that no test noticed, seen from outside: the 401
// recovery's single retry, and kept writes giving way to a newer record.

// refusingAPI answers 401 to every token. From its third call on it cancels
// the request's context: a Client that retries more than once would otherwise
// go on until the test's timeout.
type refusingAPI struct {
	calls  atomic.Int64
	cancel context.CancelFunc
}

func (a *refusingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.calls.Add(1) > 2 {
		a.cancel()
	}
	w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	http.Error(w, "refused", http.StatusUnauthorized)
}

// An API that refuses the refreshed token too gets one refresh and one retry
// per request: the retry's 401 is the answer, not a reason to refresh again.
func TestClientRetriesA401Once(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
		&oauthflow.TokenSet{AccessToken: "revoked-early", RefreshToken: "rt-1", ExpiresIn: 3600, Scope: "read"}))
	reqCtx, cancel := context.WithCancel(context.Background())
	defer cancel()
	api := &refusingAPI{cancel: cancel}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)

	req, err := http.NewRequestWithContext(reqCtx, http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	resp, err := f.store.Client(context.Background(), "u", "acme").Do(req)
	assert.EqualValues(t, 2, api.calls.Load(), "the request and one retry, not a retry per refresh")
	assert.EqualValues(t, 1, f.prov.refreshes.Load(), "one forced refresh")
	require.NoError(t, err, "the API's own 401 is the answer")
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Contains(t, string(body), "refused")
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
