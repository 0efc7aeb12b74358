package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
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

// recordingKV records every key the code under test touches.
type recordingKV struct {
	oauthflow.KV
	mu   sync.Mutex
	seen map[string]bool
}

func (r *recordingKV) touch(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = make(map[string]bool)
	}
	r.seen[key] = true
}

// take returns the keys touched since the last take, sorted.
func (r *recordingKV) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.seen))
	for k := range r.seen {
		keys = append(keys, k)
	}
	r.seen = nil
	slices.Sort(keys)
	return keys
}

func (r *recordingKV) Get(ctx context.Context, k string) ([]byte, error) {
	r.touch(k)
	return r.KV.Get(ctx, k)
}
func (r *recordingKV) Set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	r.touch(k)
	return r.KV.Set(ctx, k, v, ttl)
}
func (r *recordingKV) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	r.touch(k)
	return r.KV.SetNX(ctx, k, v, ttl)
}
func (r *recordingKV) GetDel(ctx context.Context, k string) ([]byte, error) {
	r.touch(k)
	return r.KV.GetDel(ctx, k)
}
func (r *recordingKV) Del(ctx context.Context, k string) error {
	r.touch(k)
	return r.KV.Del(ctx, k)
}
func (r *recordingKV) TTL(ctx context.Context, k string) (time.Duration, error) {
	r.touch(k)
	return r.KV.TTL(ctx, k)
}
func (r *recordingKV) CompareAndDelete(ctx context.Context, k string, v []byte) (bool, error) {
	r.touch(k)
	return r.KV.CompareAndDelete(ctx, k, v)
}
func (r *recordingKV) CompareAndExpire(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	r.touch(k)
	return r.KV.CompareAndExpire(ctx, k, v, ttl)
}
func (r *recordingKV) CompareAndSwap(ctx context.Context, k string, old, v []byte, ttl time.Duration) (bool, error) {
	r.touch(k)
	return r.KV.(casKV).CompareAndSwap(ctx, k, old, v, ttl)
}

// hostileUserIDs are user IDs an attacker may choose to reach other records.
var hostileUserIDs = []string{
	"session", "lock:alice", "run:x", "doc:x:y", "lock", "run", "doc", "sys", "lock:run:x",
	"session:acme", ":", "::", "alice:", ":alice", "alice:acme", "~", "~alice",
	"~" + base64.RawURLEncoding.EncodeToString([]byte("session")), // the escaped form of "session", forged
	"ünïcødé ✓", "\x00\xff\xfe", strings.Repeat("x", 512), strings.Repeat(":", 512), strings.Repeat("é", 256),
}

// otherKinds are the key prefixes of records that are not tokens or their locks.
var otherKinds = []string{"oauth:session:", "oauth:run:", "oauth:doc:", "oauth:lock:run:"}

// No user ID, whatever its bytes, makes the token store touch a key that
// another user's tokens or lock use, or a key of another record kind.
func TestHostileUserIDsStayInTheirOwnKeys(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingKV{KV: be.new(t)}
			f := newStoreFixture(t, rec)
			sessions := oauthflow.NewSessionService(rec)
			require.NoError(t, sessions.Register(ctx, "acme", oauthflow.Session{UserID: "alice", Provider: "acme"}))
			owner := map[string]string{}
			for _, u := range append([]string{"alice"}, hostileUserIDs...) {
				rec.take()
				staleRecord(t, f, u, "rt-"+u)
				_, err := f.store.GetValidAccessToken(ctx, u, "acme") // a refresh: token key and lock key
				require.NoError(t, err, "user %q", u)
				_, err = f.store.GetTokens(ctx, u, "acme")
				require.NoError(t, err, "user %q", u)
				for _, k := range rec.take() {
					if prev, ok := owner[k]; ok && prev != u {
						t.Errorf("users %q and %q share the key %q", prev, u, k)
					}
					owner[k] = u
					for _, kind := range otherKinds {
						assert.False(t, strings.HasPrefix(k, kind), "user %q reached %q", u, k)
					}
				}
			}
			for _, u := range hostileUserIDs {
				require.NoError(t, f.store.DeleteTokens(ctx, u, "acme"))
			}
			got, err := f.store.GetTokens(ctx, "alice", "acme")
			require.NoError(t, err, "alice's tokens survive every hostile user")
			assert.Equal(t, "rt-alice", got.RefreshToken)
			s, err := sessions.Consume(ctx, "acme")
			require.NoError(t, err, "the pending sign-in under state \"acme\" survives user \"session\"")
			assert.Equal(t, "alice", s.UserID)
		})
	}
}

// Plain user IDs keep the seed's key names, so existing deployments read their data.
func TestPlainUserIDsKeepSeedKeys(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	store := oauthflow.NewTokenStore(kv, nil, oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	for _, u := range []string{"alice", "user:42", "alice@example.com", "auth0|5f1c", "sessions", "Lock:x", "a~b"} {
		require.NoError(t, store.StoreTokens(ctx, u, "github", oauthflow.StoredTokens{AccessToken: "a", Scope: "s"}))
		_, err := kv.Get(ctx, "oauth:"+u+":github")
		assert.NoError(t, err, "user %q", u)
	}
}

// The public endpoints refuse a state not of the issued form before any store
// access: a state shaped like a provider ID never reaches "oauth:session:github",
// which the seed's keys shared with user "session"'s GitHub tokens.
func TestEndpointsRefuseForeignStateBeforeTheStore(t *testing.T) {
	t.Parallel()
	rec := &recordingKV{KV: oauthflow.NewMemoryKV()}
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: rec, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	m.Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	require.NoError(t, m.Tokens.StoreTokens(ctx, "session", "github",
		oauthflow.StoredTokens{AccessToken: "a", RefreshToken: "r", Scope: "repo"}))
	rec.take()
	for _, q := range []string{"code=x&state=github", "error=access_denied&state=github", "code=x&state=" + strings.Repeat("A", 44)} {
		status, body, _ := get(t, srv.URL+oauthflow.CallbackPath+"?"+q)
		assert.Equal(t, http.StatusBadRequest, status, q)
		assert.Contains(t, body, "Invalid callback", q)
		assert.NotContains(t, body, "github", "a foreign state is not echoed")
	}
	resp, err := http.Post(srv.URL+oauthflow.CompletePath, "application/json", strings.NewReader(`{"code":"x","state":"github"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), `"invalid_request"`)
	assert.Empty(t, rec.take(), "no store access for a foreign state")
	got, err := m.Tokens.GetTokens(ctx, "session", "github")
	require.NoError(t, err, "user session's GitHub tokens are untouched")
	assert.Equal(t, "r", got.RefreshToken)
}

// The engine refuses run IDs and document names not of its own form before any
// store access: a run ID with ":" could reach another run's documents.
func TestEngineRefusesForeignRunIDs(t *testing.T) {
	t.Parallel()
	rec := &recordingKV{KV: oauthflow.NewMemoryKV()}
	e := oauthflow.NewEngine(rec)
	const run = "0123456789abcdef0123456789abcdef"
	for _, id := range []string{"x", run + ":oauthPrompt", "RUN", strings.Repeat("a", 33), ""} {
		_, err := e.Get(ctx, id)
		assert.ErrorIs(t, err, oauthflow.ErrRunNotFound, id)
		_, err = e.Fire(ctx, id, "t", nil, "u")
		assert.ErrorIs(t, err, oauthflow.ErrRunNotFound, id)
		err = e.Document(ctx, id, "oauthPrompt", new(json.RawMessage))
		assert.ErrorIs(t, err, oauthflow.ErrNotFound, id)
	}
	err := e.Document(ctx, run, "a:b", new(json.RawMessage))
	assert.ErrorIs(t, err, oauthflow.ErrNotFound)
	assert.Empty(t, rec.take(), "no store access for a foreign run ID or document name")
}
