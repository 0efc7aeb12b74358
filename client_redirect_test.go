package oauthflow_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
