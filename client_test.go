package oauthflow_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// revokingAPI answers 401 to any token but the one it currently accepts, and
// echoes the body of the requests it accepts.
type revokingAPI struct {
	mu       sync.Mutex
	accepted string
	calls    atomic.Int64
}

func (a *revokingAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.calls.Add(1)
	a.mu.Lock()
	ok := r.Header.Get("Authorization") == "Bearer "+a.accepted
	a.mu.Unlock()
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
		http.Error(w, "invalid token", http.StatusUnauthorized)
		return
	}
	b, _ := io.ReadAll(r.Body)
	fmt.Fprintf(w, "ok %s", b)
}

func (a *revokingAPI) accept(tok string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.accepted = tok
}

// clientFixture is a store holding a valid token that the API no longer
// accepts (the provider revoked it early), and whose refresh gives one it does.
func clientFixture(t *testing.T, kv oauthflow.KV) (*storeFixture, *revokingAPI, *httptest.Server) {
	f := newStoreFixture(t, kv)
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
		&oauthflow.TokenSet{AccessToken: "revoked-early", RefreshToken: "rt-1", ExpiresIn: 3600, Scope: "read"}))
	api := &revokingAPI{}
	api.accept("access-1") // what the fake provider's first refresh answers
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	return f, api, srv
}

// A 401 for the token just sent is answered by one forced refresh and one
// retry of the request, its body included when it can be replayed.
func TestClientRecoversFromA401(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f, api, srv := clientFixture(t, b.new(t))
			c := f.store.Client(context.Background(), "u", "acme")

			resp, err := c.Post(srv.URL, "text/plain", strings.NewReader("the body")) // GetBody is set
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.Equal(t, "ok the body", string(body), "the retry carried the same body")
			assert.EqualValues(t, 1, f.prov.refreshes.Load(), "one forced refresh")
			assert.EqualValues(t, 2, api.calls.Load(), "one retry")
			got, err := f.store.GetTokens(ctx, "u", "acme")
			require.NoError(t, err)
			assert.Equal(t, "access-1", got.AccessToken, "the refreshed token is stored")

			resp, err = c.Get(srv.URL)
			require.NoError(t, err)
			_ = resp.Body.Close()
			assert.Equal(t, http.StatusOK, resp.StatusCode)
			assert.EqualValues(t, 1, f.prov.refreshes.Load(), "the next request uses the new token at once")
		})
	}
}

// A body that cannot be replayed is sent once: the 401 is the answer, and no
// refresh is forced for a request that could not be retried anyway.
func TestClientDoesNotRetryABodyItCannotReplay(t *testing.T) {
	t.Parallel()
	f, api, srv := clientFixture(t, oauthflow.NewMemoryKV())
	req, err := http.NewRequest(http.MethodPost, srv.URL, io.NopCloser(strings.NewReader("once")))
	require.NoError(t, err)
	require.Nil(t, req.GetBody)
	resp, err := f.store.Client(context.Background(), "u", "acme").Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.EqualValues(t, 1, api.calls.Load())
	assert.Zero(t, f.prov.refreshes.Load())
}

// When the forced refresh finds the grant dead, the request fails with
// ErrNoToken (the user must sign in again), and the record is gone.
func TestClientReportsADeadGrantAfterA401(t *testing.T) {
	t.Parallel()
	f, _, srv := clientFixture(t, oauthflow.NewMemoryKV())
	f.prov.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) { return nil, errInvalidGrant })
	_, err := f.store.Client(context.Background(), "u", "acme").Get(srv.URL)
	require.ErrorIs(t, err, oauthflow.ErrNoToken)
	_, err = f.store.GetTokens(ctx, "u", "acme")
	require.ErrorIs(t, err, oauthflow.ErrNoToken)
}

// A transient refresh failure leaves the caller the API's own 401, and the
// record as it was.
func TestClientKeepsThe401WhenTheRefreshFails(t *testing.T) {
	t.Parallel()
	f, _, srv := clientFixture(t, oauthflow.NewMemoryKV())
	f.prov.setRefresh(func(context.Context, string, int64) (*oauthflow.TokenSet, error) {
		return nil, &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 503, Code: "temporarily_unavailable"}
	})
	resp, err := f.store.Client(context.Background(), "u", "acme").Get(srv.URL)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	assert.Contains(t, string(body), "invalid token", "the API's answer, unread by the transport")
	got, err := f.store.GetTokens(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, "revoked-early", got.AccessToken)
}

// Many requests that meet the 401 at once cause one refresh between them,
// and each is retried with the new token.
func TestClientConcurrent401sRefreshOnce(t *testing.T) {
	t.Parallel()
	f, _, srv := clientFixture(t, oauthflow.NewMemoryKV())
	c := f.store.Client(context.Background(), "u", "acme")
	var wg sync.WaitGroup
	var oks atomic.Int64
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := c.Get(srv.URL)
			if assert.NoError(t, err) {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					oks.Add(1)
				}
			}
		}()
	}
	waitfor.Group(t, &wg, "20 requests")
	assert.EqualValues(t, 20, oks.Load())
	assert.EqualValues(t, 1, f.prov.refreshes.Load())
}

// headerLog records the Authorization and DPoP headers each path received.
type headerLog struct {
	mu   sync.Mutex
	seen map[string][]string // path -> "Authorization|DPoP" of each request
}

func (l *headerLog) record(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen == nil {
		l.seen = map[string][]string{}
	}
	l.seen[r.URL.Path] = append(l.seen[r.URL.Path], r.Header.Get("Authorization")+"|"+r.Header.Get("DPoP"))
}

func (l *headerLog) of(path string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen[path]...)
}

// tokenFixture is a store holding the valid token "tok-1" for u at acme.
func tokenFixture(t *testing.T) *storeFixture {
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
		&oauthflow.TokenSet{AccessToken: "tok-1", RefreshToken: "rt-1", ExpiresIn: 3600, Scope: "read"}))
	return f
}

// An API that redirects to another origin (an open redirect, a CDN hop: here
// another port) does not get the user's token sent on: net/http's own rule
// never applies to a header the transport adds on each hop. A redirect within
// the origin keeps it, and a 401 from the other origin forces no refresh.
func TestClientKeepsTheTokenOffRedirectsToAnotherOrigin(t *testing.T) {
	t.Parallel()
	f := tokenFixture(t)
	var log headerLog
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		log.record(r)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(other.Close)
	mux := http.NewServeMux()
	mux.HandleFunc("/away", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+"/elsewhere", http.StatusFound)
	})
	mux.HandleFunc("/here", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/final", http.StatusFound)
	})
	mux.HandleFunc("/final", func(w http.ResponseWriter, r *http.Request) { log.record(r) })
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	c := f.store.Client(context.Background(), "u", "acme")

	for _, path := range []string{"/away", "/here"} {
		req, err := http.NewRequest(http.MethodGet, api.URL+path, nil)
		require.NoError(t, err)
		req.Header.Set("DPoP", "proof-for-the-api")
		resp, err := c.Do(req)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
	assert.Equal(t, []string{"|"}, log.of("/elsewhere"), "another origin gets neither the token nor the proof")
	assert.Equal(t, []string{"Bearer tok-1|proof-for-the-api"}, log.of("/final"), "the same origin keeps both")
	assert.Zero(t, f.prov.refreshes.Load(), "another origin's 401 forces no refresh")
}

// scriptedBase answers requests by URL without a network: a redirect from
// https://api.example:8443/start to http://api.example:8443/plain (the same
// host and port, downgraded to http), 200 for anything else; it records what
// each URL got.
type scriptedBase struct {
	log   headerLog
	mu    sync.Mutex
	calls int
}

func (b *scriptedBase) RoundTrip(req *http.Request) (*http.Response, error) {
	b.mu.Lock()
	b.calls++
	b.mu.Unlock()
	b.log.record(req)
	resp := &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: io.NopCloser(strings.NewReader("ok")), Request: req}
	if req.URL.String() == "https://api.example:8443/start" {
		resp.StatusCode = http.StatusFound
		resp.Header.Set("Location", "http://api.example:8443/plain")
	}
	return resp, nil
}

// A redirect from https to http, on the same host, is another origin: the
// token would cross the network in the clear. The base transport given to
// Transport carries every request.
func TestTransportKeepsTheTokenOffADowngrade(t *testing.T) {
	t.Parallel()
	f := tokenFixture(t)
	base := &scriptedBase{}
	c := &http.Client{Transport: f.store.Transport(context.Background(), "u", "acme", base)}
	resp, err := c.Get("https://api.example:8443/start")
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, []string{"Bearer tok-1|"}, base.log.of("/start"))
	assert.Equal(t, []string{"|"}, base.log.of("/plain"), "no token over http")
	base.mu.Lock()
	defer base.mu.Unlock()
	assert.Equal(t, 2, base.calls, "both hops went through the base transport")
}
