package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/require"
)

// Code injection (RFC 9700 §4.5): a code issued for alice's sign-in, played
// into mallory's callback (his own state), does not connect mallory: the
// code is bound to alice's PKCE challenge, and mallory's session holds his
// own verifier, so the provider refuses the exchange.
func TestInjectedCodeDoesNotConnect(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	_, alice := env.startSignIn(0, "alice")
	stolen, err := url.Parse(env.consent(alice.AuthURL, 0))
	require.NoError(t, err)
	_, mallory := env.startSignIn(0, "mallory")

	injected := env.replicas[0].api.URL + oauthflow.CallbackPath + "?" + url.Values{
		"code": {stolen.Query().Get("code")}, "state": {mallory.State}}.Encode()
	status, _, _ := get(t, injected)
	require.Equal(t, http.StatusBadRequest, status)
	require.Zero(t, env.as.Stats().CodesExchanged, "the provider exchanged nothing")
	_, err = env.mod(0).Tokens.GetTokens(context.Background(), "mallory", "demo")
	require.ErrorIs(t, err, oauthflow.ErrNoToken, "mallory is not connected with alice's account")
}

// Open redirection (RFC 9700 §4.11): no endpoint sends the browser to a URL
// the request names. The callback answers with a page, never a redirect, and
// /start sends a bound sign-in to the authorization URL its session rebuilds.
func TestNoEndpointRedirectsWhereTheRequestSays(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	api := env.replicas[0].api.URL
	_, doc := env.startSignIn(0, "alice")
	evil := "https://evil.example/landing"
	for _, q := range []url.Values{
		{"state": {doc.State}, "code": {"x"}, "redirect_uri": {evil}, "return_to": {evil}, "next": {evil}},
		{"state": {doc.State}, "error": {"access_denied"}, "error_uri": {evil}, "redirect_uri": {evil}},
	} {
		_, _, h := do(t, http.DefaultClient, newRequest(t, "GET", api+oauthflow.CallbackPath+"?"+q.Encode(), ""))
		require.Empty(t, h.Get("Location"), "the callback never redirects")
	}
	form := url.Values{"state": {doc.State}, "binding": {doc.Binding}, "authUrl": {evil}, "redirect_uri": {evil}}
	status, _, h := do(t, http.DefaultClient, newRequest(t, "POST", api+oauthflow.StartPath, form.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", api))
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, doc.AuthURL, h.Get("Location"), "/start goes to the provider its session names, whatever the form says")
}

// wireSecrets is a provider transport that keeps every secret it carries:
// codes, verifiers, client secrets and tokens in requests, tokens in answers.
type wireSecrets struct {
	mu      sync.Mutex
	secrets map[string]bool
}

func (w *wireSecrets) keep(v string) {
	if len(v) >= 8 { // a value this long can be searched for without matching by chance
		w.mu.Lock()
		defer w.mu.Unlock()
		w.secrets[v] = true
	}
}

func (w *wireSecrets) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(b))
		form, _ := url.ParseQuery(string(b))
		for _, name := range []string{"code", "code_verifier", "client_secret", "refresh_token", "token"} {
			w.keep(form.Get(name))
		}
	}
	if _, pass, ok := req.BasicAuth(); ok {
		w.keep(pass)
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(b))
	var answer map[string]any
	if json.Unmarshal(b, &answer) == nil {
		for _, name := range []string{"access_token", "refresh_token", "id_token"} {
			if s, ok := answer[name].(string); ok {
				w.keep(s)
			}
		}
	}
	return resp, nil
}

// Whole flows (success, denial, a provider error, refresh, a dead grant,
// revocation) with the logger at debug level and an event hook that logs
// every event write down none of the secrets that went over the wire, nor a
// state; neither do the errors the calls return.
func TestFlowsWriteNoSecrets(t *testing.T) {
	t.Parallel()
	as := authserver.Start(authserver.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true})
	t.Cleanup(as.Close)
	wire := &wireSecrets{secrets: map[string]bool{"demo-secret": true}}
	var out lockedWriter
	out.w = &bytes.Buffer{}
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, _ := wiredModule(t, as, wire, oauthflow.Config{KV: sharedRedisAny(t), Logger: log,
		OnEvent: func(_ context.Context, e oauthflow.Event) { fmt.Fprintf(&out, "event %+v err=%v\n", e, e.Err) }})
	ctx := context.Background()
	var states []string
	errs := &bytes.Buffer{}
	note := func(err error) {
		if err != nil {
			fmt.Fprintf(errs, "%v\n%+v\n", err, err)
		}
	}
	callback := func(user, hint string, fail ...authserver.Failure) {
		_, doc, err := m.StartSignIn(ctx, user, "demo")
		require.NoError(t, err)
		states = append(states, doc.State)
		authURL := doc.AuthURL
		if hint != "" {
			authURL = setParam(authURL, "login_hint", hint)
		}
		c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := c.Get(authURL)
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusFound, resp.StatusCode)
		loc := resp.Header.Get("Location")
		if u, err := url.Parse(loc); err == nil {
			wire.keep(u.Query().Get("code"))
		}
		as.FailNext(fail...)
		status, body, _ := get(t, loc)
		fmt.Fprintf(errs, "%d\n", status)
		_ = body // the page carries the state to its opener on purpose
	}

	callback("alice", "")                                                                                       // success
	callback("bob", "deny")                                                                                     // denial
	callback("carol", "", authserver.Failure{Grant: authserver.GrantAuthorizationCode, Error: "invalid_grant"}) // provider error
	_, err := m.Tokens.GetValidAccessToken(ctx, "alice", "demo")                                                // a refresh (30 s is inside the skew)
	note(err)
	callback("dave", "")
	as.FailNext(authserver.Failure{Grant: authserver.GrantRefreshToken, Error: "invalid_grant"})
	_, err = m.Tokens.GetValidAccessToken(ctx, "dave", "demo") // a dead grant
	note(err)
	note(m.Tokens.DeleteTokens(ctx, "alice", "demo")) // revocation

	written := out.String() + errs.String()
	require.Contains(t, written, "tokens_refreshed", "the flows ran")
	require.Contains(t, written, "tokens_deleted", "the flows ran")
	require.Contains(t, written, "refresh_failed", "the flows ran")
	require.Contains(t, written, "access_denied", "the flows ran")
	wire.mu.Lock()
	defer wire.mu.Unlock()
	require.Greater(t, len(wire.secrets), 5, "the wire carried secrets")
	for s := range wire.secrets {
		if strings.Contains(written, s) {
			t.Errorf("a secret seen on the wire was written: %q", s)
		}
	}
	for _, s := range states {
		if strings.Contains(written, s) {
			t.Errorf("a state was written: %q", s)
		}
	}
}

// wiredModule is a Module made from cfg with one provider, "demo" on as,
// whose calls to as go through wire, mounted on a test server.
func wiredModule(t *testing.T, as *authserver.Server, wire *wireSecrets, cfg oauthflow.Config) (*oauthflow.Module, *httptest.Server) {
	t.Helper()
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	demo, err := providers.NewOAuth2(providers.Config{ID: "demo", AuthURL: as.AuthURL(), TokenURL: as.TokenURL(),
		RevocationURL: as.RevokeURL(), Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret", RedirectURL: api.URL + oauthflow.CallbackPath},
		providers.WithHTTPClient(&http.Client{Transport: wire}))
	require.NoError(t, err)
	cfg.Registry = oauthflow.NewRegistry()
	require.NoError(t, cfg.Registry.Register(demo))
	m, err := oauthflow.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	m.Mount(mux)
	return m, api
}
