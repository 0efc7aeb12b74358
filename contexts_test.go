package oauthflow_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
