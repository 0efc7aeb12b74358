package oauthflow_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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

type traceKey struct{}

// bearerAPI answers with the Authorization header it got.
func bearerAPI(t *testing.T) (*httptest.Server, *string) {
	var got string
	api := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
	}))
	t.Cleanup(api.Close)
	return api, &got
}

// A Client or TokenSource made under a request's context keeps working after
// that request ended, and carries the context's values (a trace ID) into
// every read and refresh.
func TestClientOutlivesItsContext(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			f := newStoreFixture(t, be.new(t))
			staleRecord(t, f, "u", "rt-1")
			var trace any
			f.prov.setRefresh(func(ctx context.Context, _ string, n int64) (*oauthflow.TokenSet, error) {
				trace = ctx.Value(traceKey{})
				return &oauthflow.TokenSet{AccessToken: "access-1", ExpiresIn: 3600}, nil
			})
			made, cancel := context.WithCancel(context.WithValue(ctx, traceKey{}, "trace-1"))
			client := f.store.Client(made, "u", "acme")
			source := f.store.TokenSource(made, "u", "acme")
			cancel() // the request that made them is over

			api, got := bearerAPI(t)
			resp, err := client.Get(api.URL)
			require.NoError(t, err, "a later request with a live context of its own")
			_ = resp.Body.Close()
			assert.Equal(t, "Bearer access-1", *got)
			assert.Equal(t, "trace-1", trace, "the refresh sees the values of the context the client was made with")
			tok, err := source.Token()
			require.NoError(t, err)
			assert.Equal(t, "access-1", tok.AccessToken)

			gone, stop := context.WithCancel(ctx)
			stop()
			req, _ := http.NewRequestWithContext(gone, http.MethodGet, api.URL, nil)
			_, err = client.Do(req)
			assert.ErrorIs(t, err, context.Canceled, "a request's own cancellation is reported as such")
			assert.NotErrorIs(t, err, oauthflow.ErrStoreUnavailable)
		})
	}
}

// A caller's own cancelled context is context.Canceled on every path, never
// "store unavailable" (which sends users to "try again later" or, worse, is
// mistaken for an outage).
func TestCancelledContextIsNotStoreUnavailable(t *testing.T) {
	t.Parallel()
	for _, real := range []bool{false, true} {
		t.Run(map[bool]string{false: "miniredis", true: "redis"}[real], func(t *testing.T) {
			t.Parallel()
			kv := sharedRedis(t, real)
			m, err := oauthflow.New(ctx, oauthflow.Config{KV: kv, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			require.NoError(t, m.Registry.Register(newFakeProvider("acme")))
			require.NoError(t, m.Tokens.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "a", Scope: "s"}))
			gone, cancel := context.WithCancel(ctx)
			cancel()
			_, getErr := m.Tokens.GetValidAccessToken(gone, "u", "acme")
			_, tokErr := m.Tokens.GetTokens(gone, "u", "acme")
			_, consumeErr := m.Sessions.Consume(gone, unknownState)
			_, runErr := m.Engine.Get(gone, "0123456789abcdef0123456789abcdef")
			_, _, startErr := m.StartSignIn(gone, "u", "acme")
			for name, err := range map[string]error{
				"GetValidAccessToken": getErr, "GetTokens": tokErr,
				"StoreTokens":  m.Tokens.StoreTokens(gone, "u", "acme", oauthflow.StoredTokens{AccessToken: "a", Scope: "s"}),
				"DeleteTokens": m.Tokens.DeleteTokens(gone, "u", "acme"),
				"Consume":      consumeErr, "Engine.Get": runErr, "StartSignIn": startErr,
			} {
				assert.ErrorIs(t, err, context.Canceled, name)
				assert.NotErrorIs(t, err, oauthflow.ErrStoreUnavailable, name)
			}

			// A callback whose client went away is not a 503.
			for _, h := range []struct {
				handler http.Handler
				req     *http.Request
			}{
				{m.CallbackHandler(), httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=x&state="+unknownState, nil)},
				{m.CompleteHandler(), jsonRequest(oauthflow.CompletePath, `{"code":"x","state":"`+unknownState+`"}`)},
			} {
				rec := httptest.NewRecorder()
				h.handler.ServeHTTP(rec, h.req.WithContext(gone))
				assert.NotEqual(t, http.StatusServiceUnavailable, rec.Code, h.req.URL.Path)
				assert.Equal(t, 499, rec.Code, h.req.URL.Path)
			}
		})
	}
}

func jsonRequest(path, body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// The token read behind a Client request ends when that request's own context
// does, even while the provider hangs.
func TestClientReadsUnderTheRequestsContext(t *testing.T) {
	t.Parallel()
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		_, release := gate(f, 1, newRotating("rt-1").answer)
		t.Cleanup(func() { close(release) })
		api, _ := bearerAPI(t)
		client := f.store.Client(ctx, "u", "acme")
		reqCtx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(reqCtx, http.MethodGet, api.URL, nil)
		errs := make(chan error, 1)
		go func() {
			_, err := client.Do(req)
			errs <- err
		}()
		err := within(t, errs, "the request's deadline to end the token read")
		assert.ErrorIs(t, err, context.DeadlineExceeded)
	}, oauthflow.WithRefreshTimeout(time.Hour)) // a read under any other context would wait out the gate
}
