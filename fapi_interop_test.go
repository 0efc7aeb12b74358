package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/require"
)

// Interop under the FAPI 2.0 Security Profile: oidc-provider in its FAPI
// 2.0 mode (oidcpeer.Options.FAPI), which refuses a client that breaks any
// of the profile's rules, found by discovery with the FAPI client's signing
// key. That the peer itself enforces each rule is shown, with raw requests,
// in internal/testkit/oidcpeer's fapi_test.go; these tests show that the
// library, driven through its own handlers, keeps every one of them.

// assertionType is the client_assertion_type of private_key_jwt (RFC 7523
// §2.2).
const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// fapiEnv is a FAPI peer and instances of the host app sharing one store,
// each with the peer as provider "peer", discovered with FAPIClient's key.
// Every provider's redirect goes to instance 0's callback; a test may
// deliver it to any instance.
type fapiEnv struct {
	peer *oidcpeer.Peer
	key  oidcpeer.ClientKey
	wire *fapiWire // every request the instances' providers send to the peer
	apps []*fapiApp
}

type fapiApp struct {
	mod  *oauthflow.Module
	api  *httptest.Server
	prov *providers.OAuth2
}

// newFAPIEnv starts a FAPI peer with opts and n instances on one store,
// each Config changed by config (nil: none).
func newFAPIEnv(t *testing.T, opts oidcpeer.Options, n int, config func(*oauthflow.Config)) *fapiEnv {
	t.Helper()
	key := oidcpeer.NewClientKey(t)
	opts.FAPI, opts.ClientJWKS = oidcpeer.FAPI20, key.JWKS(t)
	env := &fapiEnv{peer: oidcpeer.Start(t, opts), key: key, wire: &fapiWire{}}
	kv := sharedRedisAny(t)
	var redirect string
	for i := range n {
		mux := http.NewServeMux()
		api := httptest.NewServer(mux)
		t.Cleanup(api.Close)
		if i == 0 {
			redirect = api.URL + oauthflow.CallbackPath
		}
		prov := env.discover(t, redirect)
		reg := oauthflow.NewRegistry()
		require.NoError(t, reg.Register(prov))
		cfg := oauthflow.Config{KV: kv, Registry: reg, Logger: slog.New(slog.DiscardHandler), WorkerInterval: deviceWorkerInterval}
		if config != nil {
			config(&cfg)
		}
		mod, err := oauthflow.New(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = mod.Close() })
		mod.Mount(mux)
		env.apps = append(env.apps, &fapiApp{mod: mod, api: api, prov: prov})
	}
	return env
}

// discover builds the peer's provider from its metadata with FAPIClient's
// key and no secret, over the recording wire. The peer's metadata describes
// the profile (PAR required, iss, DPoP ES256, private_key_jwt alone), so no
// WithProfile is needed: Discover infers it.
func (env *fapiEnv) discover(t *testing.T, redirect string) *providers.OAuth2 {
	t.Helper()
	prov, err := providers.Discover(context.Background(), "peer", env.peer.Issuer(),
		providers.Credentials{ClientID: oidcpeer.FAPIClient, SigningKey: env.key.Private, KeyID: env.key.KID, RedirectURL: redirect},
		providers.WithHTTPClient(&http.Client{Transport: env.wire, Timeout: 10 * time.Second}))
	require.NoError(t, err, "discovery builds the FAPI provider")
	return prov
}

// callback is where the peer sends the browser back: instance 0's callback.
func (env *fapiEnv) callback() string { return env.apps[0].api.URL + oauthflow.CallbackPath }

// startSignIn starts alice's sign-in on instance 0, opens its link (which
// pushes the request) and returns the run, its prompt and the URL the
// browser is sent to at the peer.
func (env *fapiEnv) startSignIn(t *testing.T, user string) (*oauthflow.Run, *oauthflow.OAuthPromptDocument, string) {
	t.Helper()
	run, doc, err := env.apps[0].mod.StartSignIn(context.Background(), user, "peer", "openid", "offline_access", "read")
	require.NoError(t, err)
	return run, doc, openLink(t, doc.AuthURL)
}

// authorize plays the user at the peer from authURL and returns the redirect
// back, rewritten to reach instance i.
func (env *fapiEnv) authorize(t *testing.T, authURL string, i int) string {
	t.Helper()
	back := env.peer.Authorize(t, authURL, env.callback())
	to, err := url.Parse(env.apps[i].api.URL)
	require.NoError(t, err)
	back.Host = to.Host
	return back.String()
}

// complete delivers the redirect back and checks the sign-in succeeded.
func (env *fapiEnv) complete(t *testing.T, runID, redirect string) {
	t.Helper()
	status, body, _ := get(t, redirect)
	require.Equal(t, http.StatusOK, status, "%s\npeer log:\n%s", body, env.peer.Output())
	require.Equal(t, oauthflow.PromptSuccess, env.prompt(t, runID).Status)
}

func (env *fapiEnv) prompt(t *testing.T, runID string) oauthflow.OAuthPromptDocument {
	t.Helper()
	var doc oauthflow.OAuthPromptDocument
	require.NoError(t, env.apps[0].mod.Engine.Document(context.Background(), runID, oauthflow.PromptDocumentName, &doc))
	return doc
}

// tokens returns alice's stored grant as instance i reads it.
func (env *fapiEnv) tokens(t *testing.T, i int, user string) *oauthflow.StoredTokens {
	t.Helper()
	tok, err := env.apps[i].mod.Tokens.GetTokens(context.Background(), user, "peer")
	require.NoError(t, err)
	return tok
}

// userinfo calls the peer's userinfo endpoint as user through instance i's
// Tokens.Client and returns the status.
func (env *fapiEnv) userinfo(t *testing.T, i int, user string) int {
	t.Helper()
	resp, err := env.apps[i].mod.Tokens.Client(context.Background(), user, "peer").Get(env.peer.UserinfoURL())
	require.NoError(t, err)
	discardBody(resp)
	return resp.StatusCode
}

// requireBound checks tok is a DPoP-bound token whose key is the one the
// peer bound its access token to.
func (env *fapiEnv) requireBound(t *testing.T, tok *oauthflow.StoredTokens) {
	t.Helper()
	require.Equal(t, "DPoP", tok.TokenType, "the peer answered token_type DPoP")
	require.NotEmpty(t, tok.DPoPKey, "the grant's key is stored with it")
	require.Equal(t, thumbprintOf(t, tok.DPoPKey), env.peer.BoundToWithKey(t, tok.AccessToken, env.key),
		"the peer bound the access token to the stored key")
}

// A whole FAPI 2.0 grant through two instances: the provider is built under
// the profile from the peer's metadata; the sign-in started on one instance
// completes on the other with a DPoP-bound token, which calls the peer's
// userinfo with proofs, is refreshed with a proof of the same key and is
// revoked at the peer when deleted.
func TestInteropFAPI2SignInRefreshRevoke(t *testing.T) {
	t.Parallel()
	// Access tokens live an hour, past the store's skew: the test decides
	// when the refresh comes.
	env := newFAPIEnv(t, oidcpeer.Options{UserinfoTokens: true, ATTTL: time.Hour}, 2, nil)
	for _, a := range env.apps {
		cfg := a.prov.Config()
		require.Equal(t, providers.ProfileFAPI2, cfg.Profile, "the peer's metadata describes the profile")
		require.Equal(t, env.peer.PushedRequestURL(), cfg.PushedAuthURL)
		require.Equal(t, env.peer.Issuer(), cfg.Issuer)
		require.True(t, a.prov.UsesDPoP())
	}

	run, _, authURL := env.startSignIn(t, "alice")
	env.complete(t, run.ID, env.authorize(t, authURL, 1))
	signedIn := env.tokens(t, 1, "alice")
	env.requireBound(t, signedIn)
	require.NotEmpty(t, signedIn.RefreshToken)

	require.Equal(t, http.StatusOK, env.userinfo(t, 0, "alice"), "userinfo takes the token with a proof of its key")
	require.Equal(t, signedIn.AccessToken, env.tokens(t, 0, "alice").AccessToken, "no refresh yet")
	refusedWithoutProof(t, env.peer, signedIn.AccessToken)

	expired := *signedIn
	expired.ExpiresAt = time.Now().Add(-time.Minute).UnixMilli()
	require.NoError(t, env.apps[0].mod.Tokens.StoreTokens(context.Background(), "alice", "peer", expired))
	access, err := env.apps[1].mod.Tokens.GetValidAccessToken(context.Background(), "alice", "peer")
	require.NoError(t, err, "peer log:\n%s", env.peer.Output())
	require.NotEqual(t, signedIn.AccessToken, access, "refreshed at the peer")
	refreshed := env.tokens(t, 0, "alice")
	require.Equal(t, access, refreshed.AccessToken)
	require.Equal(t, signedIn.DPoPKey, refreshed.DPoPKey, "a refresh keeps the grant's key")
	env.requireBound(t, refreshed)
	require.Equal(t, http.StatusOK, env.userinfo(t, 1, "alice"))

	require.True(t, env.peer.IntrospectWithKey(t, refreshed.RefreshToken, env.key))
	require.NoError(t, env.apps[1].mod.Tokens.DeleteTokens(context.Background(), "alice", "peer"))
	require.False(t, env.peer.IntrospectWithKey(t, refreshed.RefreshToken, env.key), "revoked at the peer")
	_, err = env.apps[0].mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.ErrorIs(t, err, oauthflow.ErrNoToken)
}

// What the library sends a FAPI peer, request by request: the browser
// carries client_id and request_uri alone; every request that authenticates
// the client (the push, each token request, the revocation) carries a fresh
// private_key_jwt assertion for the issuer and never a secret; every token
// request proves the grant's key with DPoP; and a callback without the
// peer's iss is refused before any code is exchanged. The peer's side of
// each rule is in oidcpeer's fapi_test.go: TestFAPIAuthorizationRequestMustBePushed,
// TestFAPIClientAuthentication, TestFAPITokensAreDPoPBound and
// TestFAPIAuthorizationResponseCarriesIss.
func TestInteropFAPI2WhatTheLibrarySends(t *testing.T) {
	t.Parallel()
	env := newFAPIEnv(t, oidcpeer.Options{ATTTL: time.Hour}, 1, nil)
	run, _, authURL := env.startSignIn(t, "alice")
	u, err := url.Parse(authURL)
	require.NoError(t, err)
	require.Equal(t, env.peer.Issuer()+"/auth", u.Scheme+"://"+u.Host+u.Path)
	require.ElementsMatch(t, []string{"client_id", "request_uri"}, slices.Collect(maps.Keys(u.Query())),
		"the browser carries client_id and request_uri only: %s", authURL)
	require.Equal(t, oidcpeer.FAPIClient, u.Query().Get("client_id"))
	env.complete(t, run.ID, env.authorize(t, authURL, 0))

	signedIn := env.tokens(t, 0, "alice")
	expired := *signedIn
	expired.ExpiresAt = time.Now().Add(-time.Minute).UnixMilli()
	require.NoError(t, env.apps[0].mod.Tokens.StoreTokens(context.Background(), "alice", "peer", expired))
	_, err = env.apps[0].mod.Tokens.GetValidAccessToken(context.Background(), "alice", "peer")
	require.NoError(t, err, "peer log:\n%s", env.peer.Output())
	require.NoError(t, env.apps[0].mod.Tokens.DeleteTokens(context.Background(), "alice", "peer"))

	sent := env.wire.sent()
	pushes, tokens, revocations := filterSent(sent, "/request"), filterSent(sent, "/token"), filterSent(sent, "/token/revocation")
	require.Len(t, pushes, 1, "one push")
	require.Len(t, tokens, 2, "the code exchange and the refresh")
	require.Len(t, revocations, 1, "one revocation")
	require.Empty(t, filterSent(sent, "/auth"), "nothing goes to the authorization endpoint but the browser")
	require.Equal(t, "S256", pushes[0].form.Get("code_challenge_method"), "the push carries PKCE S256")
	require.Equal(t, "authorization_code", tokens[0].form.Get("grant_type"))
	require.Equal(t, "refresh_token", tokens[1].form.Get("grant_type"))

	jtis := map[string]bool{}
	for _, r := range slices.Concat(pushes, tokens, revocations) {
		claims := requireAssertion(t, env.peer.Issuer(), r)
		require.False(t, jtis[claims.Jti], "%s reuses jti %s", r.path, claims.Jti)
		jtis[claims.Jti] = true
	}
	for _, r := range tokens {
		require.NotEmpty(t, r.header.Get("DPoP"), "the %s request proves the grant's key", r.form.Get("grant_type"))
	}
	require.NotEmpty(t, pushes[0].header.Get("DPoP"), "the push proves the sign-in's key")

	// A callback without iss (RFC 9207) is refused, and no code is
	// exchanged for it.
	run, _, authURL = env.startSignIn(t, "bob")
	status, _, _ := get(t, dropParam(env.authorize(t, authURL, 0), "iss"))
	require.Equal(t, http.StatusBadRequest, status)
	require.Equal(t, oauthflow.PromptError, env.prompt(t, run.ID).Status)
	_, err = env.apps[0].mod.Tokens.GetTokens(context.Background(), "bob", "peer")
	require.ErrorIs(t, err, oauthflow.ErrNoToken, "nothing stored")
	require.Len(t, filterSent(env.wire.sent(), "/token"), len(tokens), "no code exchanged")
}

// assertionClaims are the claims of a client assertion the tests read.
type assertionClaims struct {
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	Aud any    `json:"aud"` // a string, as FAPI 2.0 wants; anything else fails requireAssertion
	Jti string `json:"jti"`
}

// requireAssertion checks r authenticates FAPIClient with a client assertion
// for issuer alone, and with no secret, and returns the assertion's claims.
func requireAssertion(t *testing.T, issuer string, r sentRequest) assertionClaims {
	t.Helper()
	require.Equal(t, assertionType, r.form.Get("client_assertion_type"), r.path)
	require.False(t, r.form.Has("client_secret"), "%s carries no client_secret", r.path)
	require.Empty(t, r.header.Get("Authorization"), "%s carries no Authorization header (HTTP Basic)", r.path)
	parts := strings.Split(r.form.Get("client_assertion"), ".")
	require.Len(t, parts, 3, "%s: a signed JWT", r.path)
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	var c assertionClaims
	require.NoError(t, json.Unmarshal(payload, &c))
	require.Equal(t, issuer, c.Aud, "%s: the assertion's aud is the issuer itself", r.path)
	require.Equal(t, oidcpeer.FAPIClient, c.Iss)
	require.Equal(t, oidcpeer.FAPIClient, c.Sub)
	require.NotEmpty(t, c.Jti)
	return c
}

// After the peer expires a sign-in's pushed request, it refuses that
// request_uri; the sign-in's link, opened again, pushes anew and completes.
func TestInteropFAPI2ExpiredRequestURI(t *testing.T) {
	t.Parallel()
	env := newFAPIEnv(t, oidcpeer.Options{}, 1, nil)
	run, doc, first := env.startSignIn(t, "alice")
	u, err := url.Parse(first)
	require.NoError(t, err)
	env.peer.ExpirePushedRequest(t, u.Query().Get("request_uri"))

	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status, body, _ := do(t, noFollow, newRequest(t, "GET", first, ""))
	require.Equal(t, http.StatusBadRequest, status, "the peer refuses the expired request_uri")
	require.Contains(t, body, "invalid_request_uri")

	again := openLink(t, doc.AuthURL)
	require.NotEqual(t, first, again, "the link pushed a fresh request")
	env.complete(t, run.ID, env.authorize(t, again, 0))
	env.requireBound(t, env.tokens(t, 0, "alice"))
	require.Len(t, filterSent(env.wire.sent(), "/request"), 2)
}

// A bound sign-in (Config.BindSignIns) is pushed when the app opens it with
// POST /start, and completes against the FAPI peer in the same browser.
func TestInteropFAPI2BindSignIns(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	env := newFAPIEnv(t, oidcpeer.Options{}, 1, func(c *oauthflow.Config) {
		c.BindSignIns, c.FrontendOrigins = true, []string{app}
	})
	run, doc, err := env.apps[0].mod.StartSignIn(context.Background(), "alice", "peer", "openid", "offline_access")
	require.NoError(t, err)
	require.NotEmpty(t, doc.Binding)
	require.Empty(t, filterSent(env.wire.sent(), "/request"), "nothing is pushed before the sign-in is opened")

	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	browser := &http.Client{Jar: jar}
	status, body, h := do(t, browser, newRequest(t, "POST", env.apps[0].api.URL+oauthflow.StartPath,
		url.Values{"state": {doc.State}, "binding": {doc.Binding}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", app))
	require.Equal(t, http.StatusSeeOther, status, body)
	require.Len(t, filterSent(env.wire.sent(), "/request"), 1, "opening it pushed")
	status, body, _ = do(t, browser, newRequest(t, "GET", env.authorize(t, h.Get("Location"), 0), ""))
	require.Equal(t, http.StatusOK, status, "%s\npeer log:\n%s", body, env.peer.Output())
	require.Equal(t, oauthflow.PromptSuccess, env.prompt(t, run.ID).Status)
	env.requireBound(t, env.tokens(t, 0, "alice"))
}

// The device grant (RFC 8628) under the profile: the device authorization
// request and every poll authenticate with private_key_jwt, the polls prove
// a key with DPoP (the peer refuses one without: TestFAPIDeviceGrant), and
// the tokens are bound to it.
func TestInteropFAPI2Device(t *testing.T) {
	t.Parallel()
	env := newFAPIEnv(t, oidcpeer.Options{UserinfoTokens: true, ATTTL: time.Hour}, 2, nil)
	run, doc, err := env.apps[0].mod.StartDeviceSignIn(context.Background(), "alice", "peer", "openid", "offline_access")
	require.NoError(t, err)
	require.Equal(t, oauthflow.PromptPending, doc.Status)
	env.peer.ApproveDevice(t, doc.UserCode)
	var r *oauthflow.Run
	require.Eventually(t, func() bool {
		r, err = env.apps[1].mod.Engine.Get(context.Background(), run.ID)
		require.NoError(t, err)
		return r.Status == oauthflow.RunCompleted || r.Status == oauthflow.RunFailed
	}, time.Minute, 20*time.Millisecond, "the device sign-in never ended")
	require.Equal(t, oauthflow.RunCompleted, r.Status, "%s\npeer log:\n%s", env.prompt(t, run.ID).Message, env.peer.Output())

	tok := env.tokens(t, 1, "alice")
	env.requireBound(t, tok)
	require.Equal(t, http.StatusOK, env.userinfo(t, 0, "alice"))

	sent := env.wire.sent()
	authorizations := filterSent(sent, "/device/auth")
	require.Len(t, authorizations, 1)
	requireAssertion(t, env.peer.Issuer(), authorizations[0])
	polls := filterSent(sent, "/token")
	require.NotEmpty(t, polls)
	for _, p := range polls {
		requireAssertion(t, env.peer.Issuer(), p)
		require.NotEmpty(t, p.header.Get("DPoP"), "every poll proves the key")
	}
}

// fapiWire is a transport that records every request sent through it: its
// path, headers and form.
type fapiWire struct {
	mu       sync.Mutex
	requests []sentRequest
}

type sentRequest struct {
	method, path string
	header       http.Header
	form         url.Values
}

func (w *fapiWire) RoundTrip(req *http.Request) (*http.Response, error) {
	r := sentRequest{method: req.Method, path: req.URL.Path, header: req.Header.Clone(), form: url.Values{}}
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		if form, err := url.ParseQuery(string(body)); err == nil {
			r.form = form
		}
	}
	w.mu.Lock()
	w.requests = append(w.requests, r)
	w.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (w *fapiWire) sent() []sentRequest {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.requests)
}

// filterSent returns the POSTs to path.
func filterSent(sent []sentRequest, path string) []sentRequest {
	var out []sentRequest
	for _, r := range sent {
		if r.method == http.MethodPost && r.path == path {
			out = append(out, r)
		}
	}
	return out
}

// Rich authorization requests (RFC 9396) under the profile: the details a
// sign-in asks for travel in the pushed request, never in the browser's
// URL; what the peer granted comes back in the token answer, is kept with
// the connection on every instance and read back from it, and a refresh,
// whose answer names the details again, keeps them.
func TestInteropFAPI2AuthorizationDetails(t *testing.T) {
	t.Parallel()
	const details = `[{"type":"` + oidcpeer.PaymentInitiation + `","instructedAmount":{"currency":"EUR","amount":"12.50"},"creditorName":"Merchant A"}]`
	env := newFAPIEnv(t, oidcpeer.Options{ATTTL: time.Hour}, 2, nil)
	run, err := env.apps[0].mod.Engine.Launch(context.Background(), "alice", oauthflow.OAuthWorkflowName,
		oauthflow.OAuthWorkflowArgs{Provider: "peer", Scopes: []string{"openid", "offline_access", "read"},
			AuthorizationDetails: json.RawMessage(details)}, oauthflow.RunOptions{})
	require.NoError(t, err)
	doc, err := env.apps[0].mod.SignInStatus(context.Background(), run.ID)
	require.NoError(t, err)
	authURL := openLink(t, doc.AuthURL)
	require.NotContains(t, authURL, "authorization_details", "the details are pushed, not sent in the URL")
	pushed := filterSent(env.wire.sent(), "/request")
	require.Len(t, pushed, 1)
	require.JSONEq(t, details, pushed[0].form.Get("authorization_details"), "the push carried the details")

	env.complete(t, run.ID, env.authorize(t, authURL, 1))
	granted := func(i int) string {
		conns, err := env.apps[i].mod.Tokens.Connections(context.Background(), "alice")
		require.NoError(t, err)
		require.Len(t, conns, 1)
		require.NotEmpty(t, conns[0].AuthorizationDetails, "the connection shows what was granted")
		return string(conns[0].AuthorizationDetails)
	}
	require.JSONEq(t, details, granted(0), "the peer granted what was asked, and instance 0 reads it")

	signedIn := env.tokens(t, 1, "alice")
	expired := *signedIn
	expired.ExpiresAt = time.Now().Add(-time.Minute).UnixMilli()
	require.NoError(t, env.apps[0].mod.Tokens.StoreTokens(context.Background(), "alice", "peer", expired))
	access, err := env.apps[1].mod.Tokens.GetValidAccessToken(context.Background(), "alice", "peer")
	require.NoError(t, err, "peer log:\n%s", env.peer.Output())
	require.NotEqual(t, signedIn.AccessToken, access, "refreshed at the peer")
	require.JSONEq(t, details, granted(0), "a refresh keeps the granted details")
}
