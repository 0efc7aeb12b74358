package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// signInAndList signs alice in on env through the browser, with extra
// parameters added to the provider's redirect, and returns her one
// connection and the sign-in's prompt.
func signInAndList(t *testing.T, env *flowEnv, extra string) (oauthflow.Connection, oauthflow.OAuthPromptDocument) {
	t.Helper()
	run, doc := env.startSignIn(0, "alice")
	status, body, _ := get(t, env.consent(doc.AuthURL, 0)+extra)
	require.Equal(t, http.StatusOK, status, body)
	conns, err := env.mod(0).Tokens.Connections(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	return conns[0], env.prompt(run.ID)
}

// demoUser is who the demo API says alice's token is for.
func demoUser(t *testing.T, env *flowEnv) string {
	t.Helper()
	resp, err := env.mod(0).Tokens.Client(context.Background(), "alice", "demo").Get(env.as.APIURL())
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var me authserver.Me
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&me))
	require.NotEmpty(t, me.User)
	return me.User
}

func TestSignInNamesTheAccount(t *testing.T) {
	t.Parallel()
	for _, bound := range []bool{false, true} {
		t.Run(map[bool]string{false: "bearer", true: "DPoP-bound"}[bound], func(t *testing.T) {
			t.Parallel()
			env := newFlowEnv(t, envOptions{dpop: bound, as: authserver.Options{DPoP: bound}, demo: func(c *providers.Config) {
				c.UserinfoURL, c.AccountField = strings.TrimSuffix(c.AuthURL, authserver.PathAuthorize)+authserver.PathAPI, "user"
			}})
			c, prompt := signInAndList(t, env, "")
			assert.NotEmpty(t, c.Account, "read from the provider's user info after the sign-in")
			assert.Equal(t, c.Account, prompt.Account, "and the prompt says who is connected")
			assert.Equal(t, c.Account, demoUser(t, env))
			apiCalls := env.as.Stats().APICalls // the sign-in's call, and demoUser's
			for range 3 {
				_, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
				require.NoError(t, err)
			}
			assert.Equal(t, apiCalls, env.as.Stats().APICalls, "never on a token read")

			// A refresh keeps the account.
			tok, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
			require.NoError(t, err)
			expired := *tok
			expired.ExpiresAt = 1
			require.NoError(t, env.mod(0).Tokens.StoreTokens(context.Background(), "alice", "demo", expired))
			_, err = env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
			require.NoError(t, err)
			refreshed, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
			require.NoError(t, err)
			require.NotEqual(t, tok.AccessToken, refreshed.AccessToken)
			assert.Equal(t, c.Account, refreshed.Account)
		})
	}
}

// A user-info endpoint that fails leaves the connection without an account,
// never without its tokens.
func TestSignInWithoutTheAccount(t *testing.T) {
	t.Parallel()
	broken := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusInternalServerError)
	}))
	t.Cleanup(broken.Close)
	env := newFlowEnv(t, envOptions{demo: func(c *providers.Config) { c.UserinfoURL, c.AccountField = broken.URL, "login" }})
	c, _ := signInAndList(t, env, "")
	assert.Empty(t, c.Account)
	_, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
	require.NoError(t, err, "the sign-in stored its tokens")
}

// The callback parameters a provider keeps (QuickBooks' realmId) are stored
// with the tokens; others are not.
func TestSignInKeepsCallbackFields(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{demo: func(c *providers.Config) { c.CallbackFields = []string{"realmId"} }})
	c, _ := signInAndList(t, env, "&realmId=4620816365&other=x")
	assert.Equal(t, map[string]string{"realmId": "4620816365"}, c.Metadata)
}

// Against oidc-provider: the account is read from its userinfo endpoint
// with the new grant's token, bound to its key (the peer's userinfo checks
// the proof), for a redirect sign-in and a device sign-in alike.
func TestInteropAccount(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{UserinfoTokens: true, ATTTL: time.Hour})
	space := newDeviceSpace(t)
	discovered := discoverDevicePeer(t, peer).Config()
	require.True(t, discovered.DPoP)
	discovered.UserinfoURL, discovered.AccountField = peer.UserinfoURL(), "sub"
	p, err := providers.NewOAuth2(discovered, providers.Credentials{ClientID: oidcpeer.DeviceBasicClient, ClientSecret: oidcpeer.DeviceBasicSecret})
	require.NoError(t, err)
	a := newDeviceAppWith(t, space, p)

	run, doc := a.start(t)
	peer.ApproveDevice(t, doc.UserCode)
	require.Equal(t, oauthflow.RunCompleted, a.ended(t, run.ID).Status)
	conns, err := a.mod.Tokens.Connections(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	require.NotEmpty(t, conns[0].Account)

	resp, err := a.mod.Tokens.Client(context.Background(), "alice", "peer").Get(peer.UserinfoURL())
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var claims struct {
		Sub string `json:"sub"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&claims))
	assert.Equal(t, claims.Sub, conns[0].Account, "the account is who the peer says the grant is for")
}

// The account read sends the new token to the user-info endpoint only and
// follows no redirect, whose target does not speak for the provider. What comes back is kept
// bounded and free of characters that would not show as themselves.
func TestAccountReadIsGuarded(t *testing.T) {
	t.Parallel()
	var leaked atomic.Value
	leaked.Store("")
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		leaked.Store(r.Header.Get("Authorization") + r.Header.Get("DPoP"))
		_, _ = w.Write([]byte(`{"login":"mallory"}`))
	}))
	t.Cleanup(elsewhere.Close)
	redirecting := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL, http.StatusFound)
	}))
	t.Cleanup(redirecting.Close)
	env := newFlowEnv(t, envOptions{demo: func(c *providers.Config) { c.UserinfoURL, c.AccountField = redirecting.URL, "login" }})
	c, _ := signInAndList(t, env, "")
	assert.Empty(t, leaked.Load(), "the token went to another origin")
	assert.Empty(t, c.Account, "a page elsewhere does not speak for the provider")

	long := strings.Repeat("ä", 400) // 800 bytes
	talkative := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"login":"\u202eoctocat\u0007` + long + `"}`))
	}))
	t.Cleanup(talkative.Close)
	env = newFlowEnv(t, envOptions{demo: func(c *providers.Config) { c.UserinfoURL, c.AccountField = talkative.URL, "login" }})
	c, _ = signInAndList(t, env, "")
	assert.True(t, strings.HasPrefix(c.Account, "octocatää"), c.Account)
	assert.LessOrEqual(t, len(c.Account), 256)
	assert.True(t, utf8.ValidString(c.Account))
}

// cancellingReader is acme whose user-info call ends its caller's context
// (cancel) before it answers: the caller gave up while the account was read.
type cancellingReader struct {
	*fakeProvider
	cancel context.CancelFunc
}

func (p *cancellingReader) ReadAccount(ctx context.Context, _ *http.Client) (string, error) {
	p.cancel()
	if err := ctx.Err(); err != nil {
		return "", err
	}
	return "octocat", nil
}

// A sign-in whose caller goes away while the account is read is stored with
// its account: the read is detached from the caller's cancellation, and so is
// the write of the new grant, whose code is spent (on a store that heeds
// contexts, as Redis does, a write under the ended context lost the sign-in).
func TestSignInAccountOutlivesTheCaller(t *testing.T) {
	t.Parallel()
	for name, kv := range map[string]func(*testing.T) oauthflow.KV{
		"memory": func(*testing.T) oauthflow.KV { return oauthflow.NewMemoryKV() },
		"redis":  sharedRedisAny,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(&cancellingReader{fakeProvider: newFakeProvider("acme"), cancel: cancel}))
			m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv(t), Registry: reg, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = m.Close() })
			tc := oauthflow.ToolContext{UserID: "alice"}
			res, err := m.BuildOAuthURL.Call(ctx, tc, json.RawMessage(`{"provider":"acme","scopes":[]}`))
			require.NoError(t, err)
			var out oauthflow.BuildOAuthURLResult
			require.NoError(t, json.Unmarshal(res, &out))
			args, _ := json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: "acme", Code: "c", State: out.State, ExpectedState: out.State})
			_, err = m.ExchangeOAuthToken.Call(ctx, tc, args)
			require.NoError(t, err, "the grant is stored though its caller left")
			require.Error(t, ctx.Err(), "the caller left during the account read")
			conns, err := m.Tokens.Connections(context.Background(), "alice")
			require.NoError(t, err)
			require.Len(t, conns, 1)
			assert.Equal(t, "octocat", conns[0].Account)
		})
	}
}

// fieldsNamed are n metadata fields named prefix00, prefix01, ...
func fieldsNamed(prefix string, n int) map[string]string {
	md := make(map[string]string, n)
	for i := range n {
		md[fmt.Sprintf("%s%02d", prefix, i)] = "v"
	}
	return md
}

// At most 16 metadata fields are kept with tokens: a sign-in's answer that
// names more keeps the first 16 by name, and refreshes that each name new
// fields replace old ones (the refresh's own first) instead of adding to
// them, so no record, read or Connections list grows without bound.
func TestMetadataIsBounded(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{
		AccessToken: "a", RefreshToken: "rt", ExpiresIn: 1, Metadata: fieldsNamed("sign-in-", 40)}))
	got, err := f.store.GetTokens(ctx, "u", "acme")
	require.NoError(t, err)
	assert.Equal(t, fieldsNamed("sign-in-", 16), got.Metadata)

	f.prov.setRefresh(func(_ context.Context, _ string, n int64) (*oauthflow.TokenSet, error) {
		return &oauthflow.TokenSet{AccessToken: fmt.Sprintf("access-%d", n), ExpiresIn: 1,
			Metadata: fieldsNamed(fmt.Sprintf("z-refresh-%d-", n), 12)}, nil
	})
	for n := 1; n <= 3; n++ {
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		require.Equal(t, fmt.Sprintf("access-%d", n), tok, "each read refreshes")
		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Len(t, got.Metadata, 16, "refresh %d", n)
		assert.Subset(t, got.Metadata, fieldsNamed(fmt.Sprintf("z-refresh-%d-", n), 12), "the refresh's own fields are kept")
	}
	conns, err := f.store.Connections(ctx, "u")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	assert.Len(t, conns[0].Metadata, 16)
}

// issuerProvider is a provider whose sign-ins go to issuer, which advertises
// RFC 9207 or not (oauthflow.IssuerReporter); it counts its code exchanges.
type issuerProvider struct {
	*fakeProvider
	issuer     string
	advertised bool
	exchanges  atomic.Int64
}

func (p *issuerProvider) AuthorizationIssuer() (string, bool) { return p.issuer, p.advertised }

func (p *issuerProvider) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	p.exchanges.Add(1)
	return p.fakeProvider.ExchangeCode(ctx, code, opts...)
}

func issuerModule(t *testing.T, p oauthflow.Provider) *oauthflow.Module {
	t.Helper()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(p))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

const honestIssuer = "https://as.example"

// issuerCases: what a callback's iss does to a sign-in whose provider names
// honestIssuer, advertised or not, or through Issuer() alone.
var issuerCases = []struct {
	name, provider, iss string
	ok                  bool
}{
	{"not advertised, its own iss", "quiet", honestIssuer, true},
	{"not advertised, no iss", "quiet", "", true},
	{"not advertised, another's iss", "quiet", "https://honest-elsewhere.example", false},
	{"advertised, its own iss", "loud", honestIssuer, true},
	{"advertised, no iss", "loud", "", false},
	{"advertised, another's iss", "loud", "https://honest-elsewhere.example", false},
	{"Issuer() alone, no iss", "legacy", "", false},
	{"Issuer() alone, its own iss", "legacy", honestIssuer, true},
}

func issuerProviderFor(name string) (oauthflow.Provider, *issuerProvider) {
	p := &issuerProvider{fakeProvider: newFakeProvider(name), issuer: honestIssuer, advertised: name == "loud"}
	if name == "legacy" {
		return &legacyOnly{p: p, issuer: honestIssuer}, p
	}
	return p, p
}

// legacyOnly names its issuer through Issuer() alone, not IssuerReporter.
type legacyOnly struct {
	p      *issuerProvider
	issuer string
}

func (l *legacyOnly) ProviderID() string      { return l.p.ProviderID() }
func (l *legacyOnly) DefaultScopes() []string { return l.p.DefaultScopes() }
func (l *legacyOnly) Issuer() string          { return l.issuer }
func (l *legacyOnly) BuildAuthURL(s []string, state string, o ...oauth2.AuthCodeOption) string {
	return l.p.BuildAuthURL(s, state, o...)
}
func (l *legacyOnly) ExchangeCode(ctx context.Context, c string, o ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return l.p.ExchangeCode(ctx, c, o...)
}
func (l *legacyOnly) RefreshToken(ctx context.Context, rt string) (*oauthflow.TokenSet, error) {
	return l.p.RefreshToken(ctx, rt)
}

// Both completion paths compare the callback's iss with the issuer the
// sign-in was sent to: another issuer's is refused whether or not the
// server advertises RFC 9207, a missing one only when it does (or when the
// provider names its issuer through Issuer() alone, as before). A refused
// callback exchanges nothing and stores nothing.
func TestCallbackIssIsCheckedOnBothPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range issuerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"tool", "callback"} {
				p, counted := issuerProviderFor(tc.provider)
				m := issuerModule(t, p)
				out := buildIssuerURL(t, m, tc.provider)
				var err error
				if path == "tool" {
					args, _ := json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: tc.provider, Code: "c", State: out.State,
						ExpectedState: out.State, Iss: tc.iss})
					_, err = m.ExchangeOAuthToken.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"}, args)
				} else {
					err = callback(m, "code=c&state="+out.State+"&iss="+tc.iss)
				}
				_, stored := m.Tokens.GetTokens(context.Background(), "alice", tc.provider)
				if tc.ok {
					assert.NoError(t, err, path)
					assert.NoError(t, stored, path)
					continue
				}
				if path == "tool" {
					assert.ErrorIs(t, err, oauthflow.ErrIssuerMismatch, path)
				} else {
					assert.ErrorContains(t, err, "unexpected issuer", path)
				}
				assert.Zero(t, counted.exchanges.Load(), "%s: the code went nowhere", path)
				assert.ErrorIs(t, stored, oauthflow.ErrNoToken, path)
			}
		})
	}
}

// A provider's error redirect is recorded on the sign-in only when its iss
// passes the same check; another issuer's is refused.
func TestErrorRedirectIssIsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range issuerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := issuerProviderFor(tc.provider)
			m := issuerModule(t, p)
			out := buildIssuerURL(t, m, tc.provider)
			body, _ := json.Marshal(map[string]string{"state": out.State, "error": "access_denied", "iss": tc.iss})
			req := httptest.NewRequest(http.MethodPost, oauthflow.CompletePath, strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			m.CompleteHandler().ServeHTTP(rec, req)
			if tc.ok {
				assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			} else {
				assert.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
				assert.Contains(t, rec.Body.String(), "unexpected issuer")
			}
		})
	}
}

func buildIssuerURL(t *testing.T, m *oauthflow.Module, provider string) oauthflow.BuildOAuthURLResult {
	t.Helper()
	res, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"},
		json.RawMessage(`{"provider":"`+provider+`","scopes":[]}`))
	require.NoError(t, err)
	var out oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &out))
	return out
}

// callback sends GET /callback?query to m and returns its failure, if any.
func callback(m *oauthflow.Module, query string) error {
	req := httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?"+query, nil)
	rec := httptest.NewRecorder()
	m.CallbackHandler().ServeHTTP(rec, req)
	if rec.Code == http.StatusOK {
		return nil
	}
	return &callbackError{status: rec.Code, body: rec.Body.String()}
}

type callbackError struct {
	status int
	body   string
}

func (e *callbackError) Error() string { return http.StatusText(e.status) + ": " + e.body }

// queueOwner is an engine of the app's that owns sign-ins
// (Config.SignInOwners): it hears each checked answer and finishes the
// sign-in with mod, which may be another instance's module.
type queueOwner struct {
	mod      *oauthflow.Module
	refuse   error // when set, the owner fails the sign-in without exchanging
	mu       sync.Mutex
	heard    []oauthflow.CallbackAnswer
	signIns  []oauthflow.Session
	refusals []string // the error codes of the refusals it heard
}

func (q *queueOwner) SignInRefused(_ context.Context, s *oauthflow.Session, refusal *oauthflow.ProviderError) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.refusals = append(q.refusals, refusal.Code)
}

func (q *queueOwner) CompleteSignIn(ctx context.Context, s *oauthflow.Session, a oauthflow.CallbackAnswer) error {
	q.mu.Lock()
	q.heard, q.signIns = append(q.heard, a), append(q.signIns, *s)
	q.mu.Unlock()
	if q.refuse != nil {
		return q.refuse
	}
	return q.mod.ExchangeSignIn(ctx, s, a)
}

// A sign-in built for an owner of the app's is checked by the callback
// endpoint like any other, then handed to that owner, once, which finishes
// it on another instance; the page tells the owner's real outcome.
func TestSignInOwnerFinishesItsSignIns(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		refuse error
		page   string
	}{
		{name: "exchanged", page: "account connected"},
		{name: "refused by its owner", refuse: &oauthflow.FlowError{Message: "The queue refused this sign-in.", Err: errors.New("queue full")},
			page: "The queue refused this sign-in."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			owner := &queueOwner{refuse: tt.refuse}
			env := newFlowEnv(t, envOptions{replicas: 2, config: func(c *oauthflow.Config) {
				c.SignInOwners = map[string]oauthflow.SignInOwner{"queue": owner}
			}})
			owner.mod = env.mod(1)
			ctx := context.Background()
			res, err := env.mod(0).BuildOAuthURL.Call(ctx, oauthflow.ToolContext{UserID: "alice", RunID: "wf-7", Owner: "queue"},
				json.RawMessage(`{"provider":"demo","scopes":[]}`))
			require.NoError(t, err)
			var built oauthflow.BuildOAuthURLResult
			require.NoError(t, json.Unmarshal(res, &built))

			callback := env.consent(built.AuthURL, 0)
			_, body, _ := get(t, callback)
			assert.Contains(t, body, tt.page)
			require.Len(t, owner.heard, 1, "the owner hears the answer once")
			a, s := owner.heard[0], owner.signIns[0]
			assert.Equal(t, built.State, a.State)
			assert.NotEmpty(t, a.Code)
			assert.Equal(t, oauthflow.Session{WorkflowID: "wf-7", UserID: "alice", Provider: "demo", Owner: "queue"},
				oauthflow.Session{WorkflowID: s.WorkflowID, UserID: s.UserID, Provider: s.Provider, Owner: s.Owner})

			_, err = env.mod(0).Tokens.GetTokens(ctx, "alice", "demo")
			if tt.refuse != nil {
				assert.ErrorIs(t, err, oauthflow.ErrNoToken, "a refused sign-in stores nothing")
				assert.Zero(t, env.as.Stats().TokenRequests, "a refused sign-in's code is not exchanged")
			} else {
				require.NoError(t, err)
				_, ok := env.events.last(oauthflow.EventConnected)
				assert.True(t, ok, "EventConnected was not emitted")
			}

			// The state is spent: the same answer again reaches no owner.
			_, body, _ = get(t, callback)
			assert.Contains(t, body, "expired or was already used")
			assert.Len(t, owner.heard, 1, "a replayed answer reached the owner")
		})
	}
}

// An owner is named when the sign-in is built, and must be one of the
// module's; a callback reaching an instance that lacks the sign-in's owner
// ends that sign-in with a clear page and exchanges nothing.
func TestSignInOwnerUnknown(t *testing.T) {
	t.Parallel()
	owner := &queueOwner{}
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.SignInOwners = map[string]oauthflow.SignInOwner{"queue": owner}
	}})
	owner.mod = env.mod(0)
	ctx := context.Background()
	_, err := env.mod(0).BuildOAuthURL.Call(ctx, oauthflow.ToolContext{UserID: "alice", RunID: "wf-1", Owner: "nope"},
		json.RawMessage(`{"provider":"demo","scopes":[]}`))
	assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument)

	res, err := env.mod(0).BuildOAuthURL.Call(ctx, oauthflow.ToolContext{UserID: "alice", RunID: "wf-1", Owner: "queue"},
		json.RawMessage(`{"provider":"demo","scopes":[]}`))
	require.NoError(t, err)
	var built oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &built))

	// An instance of the app that was started without the owner.
	lacking := env.newModule(env.replicas[0].api.URL+oauthflow.CallbackPath, nil)
	mux := http.NewServeMux()
	lacking.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	callback, err := url.Parse(env.consent(built.AuthURL, 0))
	require.NoError(t, err)
	callback.Host = strings.TrimPrefix(srv.URL, "http://")
	status, body, _ := get(t, callback.String())
	assert.Equal(t, http.StatusBadRequest, status, body)
	assert.Contains(t, body, "cannot be completed by this service")
	assert.Empty(t, owner.heard)
	assert.Zero(t, env.as.Stats().TokenRequests, "the code was exchanged")
	_, err = env.mod(0).Tokens.GetTokens(ctx, "alice", "demo")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)

	for _, bad := range []map[string]oauthflow.SignInOwner{{"": owner}, {"queue": nil}, {"queue": (*queueOwner)(nil)}} {
		_, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), SignInOwners: bad})
		assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument, "SignInOwners %v", bad)
	}
}

// A provider's error redirect for an owned sign-in, once checked like an
// answer, reaches the sign-in's owner and leaves the sign-in open.
func TestSignInOwnerHearsARefusal(t *testing.T) {
	t.Parallel()
	owner := &queueOwner{}
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.SignInOwners = map[string]oauthflow.SignInOwner{"queue": owner}
	}})
	owner.mod = env.mod(0)
	res, err := env.mod(0).BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "alice", RunID: "wf-2", Owner: "queue"},
		json.RawMessage(`{"provider":"demo","scopes":[]}`))
	require.NoError(t, err)
	var built oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &built))
	env.as.DenyNext()
	_, body, _ := get(t, env.consent(built.AuthURL, 0))
	assert.Contains(t, body, "Sign-in not completed")
	assert.Equal(t, []string{"access_denied"}, owner.refusals)
	assert.Empty(t, owner.heard)

	// The sign-in is still open: the same link, tried again, completes it.
	_, body, _ = get(t, env.consent(built.AuthURL, 0))
	assert.Contains(t, body, "account connected")
	assert.Len(t, owner.heard, 1)
}

// accountCounter is acme with a user-info call that counts its calls, and
// says through ReadsAccount whether it has an endpoint to call.
type accountCounter struct {
	*fakeProvider
	reads    bool
	accounts atomic.Int64
}

func (p *accountCounter) ReadsAccount() bool { return p.reads }
func (p *accountCounter) ReadAccount(context.Context, *http.Client) (string, error) {
	p.accounts.Add(1)
	return "octocat", nil
}

// A provider that says it reads no account (ReadsAccount false, a
// providers.OAuth2 without a user-info URL) is not asked after a sign-in:
// nothing of the account read (its client, its deadline) is built for it.
// One that reads accounts is asked once.
func TestSignInAsksForTheAccountOnlyWhereOneIsRead(t *testing.T) {
	t.Parallel()
	for _, reads := range []bool{false, true} {
		t.Run(fmt.Sprint("reads=", reads), func(t *testing.T) {
			t.Parallel()
			p := &accountCounter{fakeProvider: newFakeProvider("acme"), reads: reads}
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(p))
			m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg, Logger: slog.New(slog.DiscardHandler)})
			require.NoError(t, err)
			t.Cleanup(func() { _ = m.Close() })
			completeWithTool(t, m)
			want, account := int64(0), ""
			if reads {
				want, account = 1, "octocat"
			}
			assert.Equal(t, want, p.accounts.Load(), "user-info calls")
			conns, err := m.Tokens.Connections(context.Background(), "alice")
			require.NoError(t, err)
			require.Len(t, conns, 1)
			assert.Equal(t, account, conns[0].Account)
		})
	}
}
