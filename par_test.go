package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// Pushed authorization requests (RFC 9126): a sign-in with a provider that
// has a PAR endpoint pushes its request there, and the browser carries
// client_id and the request_uri alone.

// pushedDemo makes the demo provider push its sign-ins to the local
// authorization server's PAR endpoint, which requires them.
func pushedDemo(c *providers.Config) {
	c.PushedAuthURL = strings.TrimSuffix(c.AuthURL, authserver.PathAuthorize) + authserver.PathPAR
	c.RequirePAR = true
}

// requirePushedURL checks that authURL is the authorization endpoint with
// client_id and a request_uri, and nothing else, and returns the request_uri.
func requirePushedURL(t *testing.T, env *flowEnv, authURL string) string {
	t.Helper()
	u, err := url.Parse(authURL)
	require.NoError(t, err)
	require.Equal(t, env.as.AuthURL(), u.Scheme+"://"+u.Host+u.Path)
	q := u.Query()
	require.Len(t, q, 2, "the URL carries only client_id and request_uri: %s", authURL)
	require.Equal(t, authserver.DefaultClientID, q.Get("client_id"))
	require.True(t, strings.HasPrefix(q.Get("request_uri"), "urn:ietf:params:oauth:request_uri:"), authURL)
	for _, k := range []string{"scope", "state", "code_challenge", "redirect_uri", "response_type", "dpop_jkt"} {
		require.False(t, q.Has(k), "the URL carries no %s", k)
	}
	return q.Get("request_uri")
}

// openLink opens a pushed sign-in's link as a browser does and returns
// where it is sent: the link is the module's start link, carrying the state
// alone, and answers 303 to the provider, uncached.
func openLink(t *testing.T, link string) string {
	t.Helper()
	u, err := url.Parse(link)
	require.NoError(t, err)
	require.Equal(t, oauthflow.StartPath, u.Path, "a pushed sign-in's link is the module's start link: %s", link)
	require.Equal(t, []string{"state"}, slices.Collect(maps.Keys(u.Query())), link)
	status, body, h := do(t, http.DefaultClient, newRequest(t, "GET", link, ""))
	require.Equal(t, http.StatusSeeOther, status, body)
	require.Equal(t, "no-store", h.Get("Cache-Control"))
	require.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
	return h.Get("Location")
}

// A whole sign-in against a server that requires PAR, on two instances
// sharing one store: the URL the browser is sent to carries client_id and
// request_uri only, the pushed request carried the scopes, state, redirect URI
// and PKCE challenge (the callback's state and the exchange's verifier
// match), and the other instance completes it.
func TestPARSignInOnTwoInstances(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{replicas: 2, as: authserver.Options{RequirePAR: true, IssParameter: true},
		demo: func(c *providers.Config) {
			pushedDemo(c)
			c.Issuer = strings.TrimSuffix(c.AuthURL, authserver.PathAuthorize)
		}})
	run, doc := env.startSignIn(0, "alice")
	require.Zero(t, env.as.Stats().PARRequests, "nothing is pushed before the link is opened")
	authURL := openLink(t, doc.AuthURL)
	requirePushedURL(t, env, authURL)
	status, body, _ := get(t, env.consent(authURL, 1))
	require.Equal(t, http.StatusOK, status, body)
	require.Equal(t, oauthflow.PromptSuccess, env.prompt(run.ID).Status)
	tok, err := env.mod(0).Tokens.GetTokens(t.Context(), "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, "read", tok.Scope)
	require.Equal(t, http.StatusOK, env.callAPI("alice", 1))
	st := env.as.Stats()
	require.EqualValues(t, 1, st.PARRequests)
	require.EqualValues(t, 1, st.RequestURIsRedeemed)
	require.EqualValues(t, 1, st.CodesExchanged)
	require.Zero(t, st.RequestURIsRefused)
}

// Each opening of a link pushes a request of its own: two sign-ins never
// share a request_uri, and the server refuses a request_uri once used and
// once expired. A link opened after its last request expired, or opened
// again after a sign-in that went nowhere, pushes anew and still starts the
// sign-in, instead of sending the user to the server's error page.
func TestPARLinkOutlivesItsRequest(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	env := newFlowEnv(t, envOptions{as: authserver.Options{RequirePAR: true, RequestURITTL: time.Minute, Now: clock.Now}, demo: pushedDemo})
	build := func() string {
		raw, err := env.mod(0).BuildOAuthURL.Call(t.Context(), oauthflow.ToolContext{UserID: "alice"},
			json.RawMessage(`{"provider":"demo","scopes":[]}`))
		require.NoError(t, err)
		var res oauthflow.BuildOAuthURLResult
		require.NoError(t, json.Unmarshal(raw, &res))
		return res.AuthURL
	}
	first, second := build(), build()
	firstURL, secondURL := openLink(t, first), openLink(t, second)
	require.NotEqual(t, requirePushedURL(t, env, firstURL), requirePushedURL(t, env, secondURL), "each sign-in pushes its own")
	require.EqualValues(t, 2, env.as.Stats().PARRequests)

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	clock.Advance(time.Minute) // the server's RequestURITTL
	resp, err := noFollow.Get(firstURL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the server refuses an expired request_uri")

	again := openLink(t, first)
	require.NotEqual(t, requirePushedURL(t, env, firstURL), requirePushedURL(t, env, again), "the link pushed a fresh request")
	status, body, _ := get(t, env.consent(again, 0))
	require.Equal(t, http.StatusOK, status, body)
	_, err = env.mod(0).Tokens.GetTokens(t.Context(), "alice", "demo")
	require.NoError(t, err, "the sign-in completed through the link opened after its request expired")
	resp, err = noFollow.Get(again)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusBadRequest, resp.StatusCode, "the server refuses a used request_uri")

	status, body, _ = do(t, http.DefaultClient, newRequest(t, "GET", first, ""))
	require.Equal(t, http.StatusForbidden, status, "a finished sign-in's link opens nothing")
	require.Contains(t, body, "This sign-in link has expired or was already used.")
	st := env.as.Stats()
	require.EqualValues(t, 3, st.PARRequests)
	require.EqualValues(t, 2, st.RequestURIsRefused)
	require.EqualValues(t, 1, st.RequestURIsRedeemed)
}

// The start link refuses a state this service did not issue, and a bound
// sign-in (Config.BindSignIns), which opens through the POST with its
// secret only; neither pushes anything.
func TestPARLinkRefusals(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{as: authserver.Options{RequirePAR: true}, demo: pushedDemo,
		config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	_, doc := env.startSignIn(0, "alice")
	link := env.replicas[0].api.URL + oauthflow.StartPath + "?state="
	status, body, h := do(t, http.DefaultClient, newRequest(t, "GET", link+url.QueryEscape(doc.State), ""))
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "This sign-in can only be started from the app.")
	require.Empty(t, h.Get("Location"))
	status, body, _ = do(t, http.DefaultClient, newRequest(t, "GET", link+"not-a-state", ""))
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "not one this service issued")
	require.Zero(t, env.as.Stats().PARRequests)
}

// With DPoP the push carries a proof of the sign-in's key, which binds the
// code to it; the exchange proves the same key and the token is bound to it.
// Behind a server that demands nonces, the push answers the challenge once.
func TestPARSignInWithDPoP(t *testing.T) {
	t.Parallel()
	for name, as := range map[string]authserver.Options{
		"dpop":             {RequirePAR: true, DPoP: true},
		"dpop with nonces": {RequirePAR: true, DPoPNonces: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := newFlowEnv(t, envOptions{replicas: 2, dpop: true, as: as, demo: pushedDemo})
			_, doc := env.startSignIn(0, "alice")
			authURL := openLink(t, doc.AuthURL)
			requirePushedURL(t, env, authURL)
			s, err := oauthflow.PeekSession(env.mod(0).Sessions, t.Context(), doc.State)
			require.NoError(t, err)
			status, body, _ := get(t, env.consent(authURL, 1))
			require.Equal(t, http.StatusOK, status, body)
			tok, err := env.mod(1).Tokens.GetTokens(t.Context(), "alice", "demo")
			require.NoError(t, err)
			require.Equal(t, "DPoP", tok.TokenType)
			require.Equal(t, thumbprintOf(t, s.DPoPKey), thumbprintOf(t, tok.DPoPKey), "the grant is bound to the sign-in's key")
			require.Equal(t, http.StatusOK, env.callAPI("alice", 0))
			st := env.as.Stats()
			require.NotZero(t, st.PARRequests)
			require.Equal(t, st.PARRequests, st.DPoPPARRequests, "every push carried a proof")
			require.EqualValues(t, 1, st.RequestURIsRedeemed)
			require.Zero(t, st.DPoPKeyMismatches+st.DPoPProofsInvalid+st.DPoPProofsMissing)
		})
	}
}

// With BindSignIns, the sign-in is pushed when POST /start opens it, and
// only then: nothing is pushed when it is built. The browser goes on with a
// request_uri proved with the sign-in's key, and completes.
func TestPARBoundSignInStartPushes(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	env := newFlowEnv(t, envOptions{dpop: true, as: authserver.Options{RequirePAR: true, DPoP: true}, demo: pushedDemo,
		config: func(c *oauthflow.Config) { c.BindSignIns, c.FrontendOrigins = true, []string{app} }})
	_, doc := env.startSignIn(0, "alice")
	require.Zero(t, env.as.Stats().PARRequests, "nothing is pushed before the sign-in is opened")
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	status, _, h := do(t, browser, newRequest(t, "POST", env.replicas[0].api.URL+oauthflow.StartPath,
		url.Values{"state": {doc.State}, "binding": {doc.Binding}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", app))
	require.Equal(t, http.StatusSeeOther, status)
	started := h.Get("Location")
	requirePushedURL(t, env, started)
	st := env.as.Stats()
	require.EqualValues(t, 1, st.PARRequests)
	require.EqualValues(t, 1, st.DPoPPARRequests, "the push proved the sign-in's key")

	status, body, _ := do(t, browser, newRequest(t, "GET", env.consent(started, 0), ""))
	require.Equal(t, http.StatusOK, status, body)
	tok, err := env.mod(0).Tokens.GetTokens(t.Context(), "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, "DPoP", tok.TokenType)
}

// A push that fails, whatever the failure (the PAR endpoint down, too slow
// for the provider's client, whose timeout ends the push, or answering an
// error), sends the browser nowhere: opening the link shows a page telling
// the user to try later (502), no request goes to the authorization endpoint
// in a URL, and no code is exchanged. The sign-in stays pending, and the
// same link opened once the provider answers again starts it.
func TestPARFailureAtTheLink(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for name, tc := range map[string]struct {
		failure *authserver.Failure
		demo    func(*providers.Config)
	}{
		"down":             {demo: func(c *providers.Config) { pushedDemo(c); c.PushedAuthURL = down.URL + authserver.PathPAR }},
		"slow":             {failure: &authserver.Failure{Delay: time.Hour}},
		"unavailable":      {failure: &authserver.Failure{Status: http.StatusServiceUnavailable}},
		"an error answer":  {failure: &authserver.Failure{Error: "invalid_request", Description: "internal-detail"}},
		"a malformed page": {failure: &authserver.Failure{Status: http.StatusOK, Body: "<html>welcome</html>"}},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			demo := tc.demo
			if demo == nil {
				demo = pushedDemo
			}
			env := newFlowEnv(t, envOptions{as: authserver.Options{RequirePAR: true}, demo: demo,
				demoOpts: []providers.Option{providers.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond})}})
			if tc.failure != nil {
				env.as.FailNextPAR(*tc.failure)
			}
			run, doc := env.startSignIn(0, "alice")
			status, body, h := do(t, http.DefaultClient, newRequest(t, "GET", doc.AuthURL, ""))
			require.Equal(t, http.StatusBadGateway, status)
			require.Contains(t, body, "The provider could not start the sign-in. Try again later.")
			require.NotContains(t, body, "internal-detail", "the provider's text is not shown")
			require.Empty(t, h.Get("Location"))
			_, err := env.mod(0).Tokens.GetTokens(t.Context(), "alice", "demo")
			require.ErrorIs(t, err, oauthflow.ErrNoToken)
			st := env.as.Stats()
			require.Zero(t, st.Authorizations+st.RequestURIsRedeemed+st.RequestURIsRefused+st.TokenRequests)
			require.Equal(t, oauthflow.PromptPending, env.prompt(run.ID).Status, "the sign-in waits for the link to be opened again")
			if tc.failure == nil {
				return // the endpoint stays down
			}
			status, body, _ = get(t, env.consent(openLink(t, doc.AuthURL), 0))
			require.Equal(t, http.StatusOK, status, body)
			require.Equal(t, oauthflow.PromptSuccess, env.prompt(run.ID).Status)
		})
	}
}

// A provider that redirects to a callback the module cannot name a start
// link beside (the frontend's callback page) is pushed when the sign-in is
// built: a push that fails fails the sign-in at once, with a message for the
// user, and stores nothing.
func TestPARFailureWithoutALink(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	env := newFlowEnv(t, envOptions{kv: kv, as: authserver.Options{RequirePAR: true}, demo: pushedDemo,
		demoOpts: []providers.Option{providers.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond})},
		config:   func(c *oauthflow.Config) { c.FrontendOrigins = []string{"http://127.0.0.1:1"} }})
	p, err := env.mod(0).Registry.Get("demo")
	require.NoError(t, err)
	cfg := p.(*providers.OAuth2).Config()
	cfg.ID = "front" // the demo provider, redirecting to the frontend's page
	front, err := providers.NewOAuth2(cfg, providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret",
		RedirectURL: "http://127.0.0.1:1/oauth/callback"}, providers.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond}))
	require.NoError(t, err)
	require.NoError(t, env.mod(0).Registry.Register(front))
	env.as.FailNextPAR(authserver.Failure{Status: http.StatusServiceUnavailable})
	before := oauthflow.MemoryLen(kv)
	_, err = env.mod(0).BuildOAuthURL.Call(t.Context(), oauthflow.ToolContext{UserID: "alice"},
		json.RawMessage(`{"provider":"front","scopes":[]}`))
	requirePushFailed(t, err, "front")
	require.Equal(t, before, oauthflow.MemoryLen(kv), "build_oauth_url stored nothing")
	raw, err := env.mod(0).BuildOAuthURL.Call(t.Context(), oauthflow.ToolContext{UserID: "alice"},
		json.RawMessage(`{"provider":"front","scopes":[]}`))
	require.NoError(t, err)
	var res oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(raw, &res))
	requirePushedURL(t, env, res.AuthURL)
}

// requirePushFailed checks that err fails a sign-in for its push, with the
// message for the user and the provider's failure as the cause.
func requirePushFailed(t *testing.T, err error, provider string) {
	t.Helper()
	var fe *oauthflow.FlowError
	require.True(t, errors.As(err, &fe), "got %v", err)
	require.Equal(t, "The provider could not start the sign-in. Try again later.", fe.Message)
	var pe *oauthflow.ProviderError
	require.True(t, errors.As(err, &pe), "the cause is the provider's: %v", err)
	require.Equal(t, provider, pe.ProviderID)
}

// A push that fails at POST /start is a page saying so (502), and the
// browser is sent nowhere.
func TestPARFailureAtStart(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	env := newFlowEnv(t, envOptions{as: authserver.Options{RequirePAR: true}, demo: pushedDemo,
		config: func(c *oauthflow.Config) { c.BindSignIns, c.FrontendOrigins = true, []string{app} }})
	_, doc := env.startSignIn(0, "alice")
	env.as.FailNextPAR(authserver.Failure{Status: http.StatusServiceUnavailable, Description: "internal-detail"})
	status, body, h := do(t, http.DefaultClient, newRequest(t, "POST", env.replicas[0].api.URL+oauthflow.StartPath,
		url.Values{"state": {doc.State}, "binding": {doc.Binding}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", app))
	require.Equal(t, http.StatusBadGateway, status)
	require.Contains(t, body, "The provider could not start the sign-in. Try again later.")
	require.NotContains(t, body, "internal-detail", "the provider's text is not shown")
	require.Empty(t, h.Get("Location"))
	require.Zero(t, env.as.Stats().RequestURIsRedeemed)
}

// A provider's PushAuthorization that panics fails the sign-in like a push
// that failed; the module goes on.
func TestPARPanicIsRecovered(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(&panickyPusher{fakeProvider: newFakeProvider("acme")}))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	_, err = m.BuildOAuthURL.Call(t.Context(), oauthflow.ToolContext{UserID: "alice"}, json.RawMessage(`{"provider":"acme","scopes":[]}`))
	var fe *oauthflow.FlowError
	require.True(t, errors.As(err, &fe), "got %v", err)
	require.Equal(t, "The provider could not start the sign-in. Try again later.", fe.Message)
	require.Contains(t, err.Error(), "PushAuthorization panicked")
}

type panickyPusher struct{ *fakeProvider }

func (*panickyPusher) PushesAuthorization() bool { return true }
func (*panickyPusher) PushAuthorization(context.Context, []string, string, ...oauth2.AuthCodeOption) (string, error) {
	panic("boom")
}
