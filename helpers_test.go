package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// fakeProvider is a Provider whose refresh answers are scripted by the test.
type fakeProvider struct {
	id        string
	refreshes atomic.Int64
	revoked   atomic.Int64

	mu        sync.Mutex
	onRefresh func(ctx context.Context, rt string, n int64) (*oauthflow.TokenSet, error)
	revokeErr error
}

func newFakeProvider(id string) *fakeProvider {
	return &fakeProvider{id: id, onRefresh: func(_ context.Context, rt string, n int64) (*oauthflow.TokenSet, error) {
		return &oauthflow.TokenSet{AccessToken: fmt.Sprintf("access-%d", n), ExpiresIn: 3600}, nil
	}}
}

func (p *fakeProvider) ProviderID() string      { return p.id }
func (p *fakeProvider) DefaultScopes() []string { return []string{"read"} }
func (p *fakeProvider) BuildAuthURL(scopes []string, state string, _ ...oauth2.AuthCodeOption) string {
	return "https://auth.example/authorize?state=" + state
}
func (p *fakeProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return &oauthflow.TokenSet{AccessToken: "from-code", RefreshToken: "rt-0", ExpiresIn: 3600, Scope: "read"}, nil
}
func (p *fakeProvider) RefreshToken(ctx context.Context, rt string) (*oauthflow.TokenSet, error) {
	n := p.refreshes.Add(1)
	p.mu.Lock()
	fn := p.onRefresh
	p.mu.Unlock()
	return fn(ctx, rt, n)
}
func (p *fakeProvider) RevokeToken(context.Context, string, string) error {
	p.revoked.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.revokeErr
}

func (p *fakeProvider) setRefresh(fn func(ctx context.Context, rt string, n int64) (*oauthflow.TokenSet, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onRefresh = fn
}

// backend is one KV under test, with a way to read TTLs back from it.
type backend struct {
	name string
	new  func(t *testing.T) oauthflow.KV
}

// backends returns memory, miniredis and the real Redis (required under CI=true).
func backends() []backend {
	return []backend{
		{"memory", func(*testing.T) oauthflow.KV { return oauthflow.NewMemoryKV() }},
		{"miniredis", func(t *testing.T) oauthflow.KV { _, c := redistest.Mini(t); return oauthflow.NewRedisKV(c) }},
		{"redis", func(t *testing.T) oauthflow.KV {
			c := redistest.Real(t)
			return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
		}},
	}
}

// redisBackends are the backends two replicas can share.
func sharedRedis(t *testing.T, real bool) oauthflow.KV {
	if real {
		c := redistest.Real(t)
		return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
	}
	_, c := redistest.Mini(t)
	return oauthflow.NewRedisKV(c)
}

// eventLog records events from a hook.
type eventLog struct {
	mu     sync.Mutex
	events []oauthflow.Event
}

func (l *eventLog) hook(_ context.Context, e oauthflow.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) kinds() []oauthflow.EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []oauthflow.EventKind
	for _, e := range l.events {
		ks = append(ks, e.Kind)
	}
	return ks
}

func (l *eventLog) last(kind oauthflow.EventKind) (oauthflow.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		if l.events[i].Kind == kind {
			return l.events[i], true
		}
	}
	return oauthflow.Event{}, false
}

var errUnreachable = errors.New("dial tcp: connection refused")

var epoch = time.Unix(1_800_000_000, 0)

// flowEnv is a host app (one or more replicas sharing one KV) with the local
// authorization server as its "demo" provider.
type flowEnv struct {
	t        *testing.T
	as       *authserver.Server
	kv       *switchKV
	replicas []*replica
	events   *eventLog
	dpop     bool                    // the demo provider binds its grants to a key
	device   bool                    // the demo provider offers the device grant
	demo     func(*providers.Config) // changes the demo provider's Config
	demoOpts []providers.Option      // the demo provider's options
}

type replica struct {
	mod *oauthflow.Module
	api *httptest.Server
}

type envOptions struct {
	replicas int
	as       authserver.Options
	kv       oauthflow.KV // nil: the real Redis (miniredis outside CI when none answers)
	setup    func(m *oauthflow.Module)
	config   func(c *oauthflow.Config) // changes each replica's Config before New
	dpop     bool                      // the demo provider binds its grants to a key (providers.Config.DPoP)
	device   bool                      // the demo provider offers the device grant (providers.Config.DeviceAuthURL)
	demo     func(*providers.Config)   // changes the demo provider's Config
	demoOpts []providers.Option        // the demo provider's options (its HTTP client, say)
}

func newFlowEnv(t *testing.T, o envOptions) *flowEnv {
	t.Helper()
	if o.replicas == 0 {
		o.replicas = 1
	}
	as := authserver.Start(o.as)
	t.Cleanup(as.Close)
	base := o.kv
	if base == nil {
		base = sharedRedisAny(t)
	}
	env := &flowEnv{t: t, as: as, kv: &switchKV{KV: base}, events: &eventLog{}, dpop: o.dpop, device: o.device, demo: o.demo,
		demoOpts: o.demoOpts}
	// Every replica's provider redirects to the first replica's callback; the
	// test may deliver the redirect to any replica.
	mux0 := http.NewServeMux()
	api0 := httptest.NewServer(mux0)
	t.Cleanup(api0.Close)
	for i := range o.replicas {
		api, mux := api0, mux0
		if i > 0 {
			mux = http.NewServeMux()
			api = httptest.NewServer(mux)
			t.Cleanup(api.Close)
		}
		mod := env.newModule(api0.URL+oauthflow.CallbackPath, o.setup, o.config)
		mod.Mount(mux)
		env.replicas = append(env.replicas, &replica{mod: mod, api: api})
	}
	return env
}

func (env *flowEnv) newModule(redirect string, setup func(*oauthflow.Module), config ...func(*oauthflow.Config)) *oauthflow.Module {
	t := env.t
	var deviceURL string
	if env.device {
		deviceURL = env.as.DeviceAuthorizationURL()
	}
	pcfg := providers.Config{ID: "demo", DeviceAuthURL: deviceURL, DisplayName: "Demo <Cloud>", AuthURL: env.as.AuthURL(),
		TokenURL: env.as.TokenURL(), RevocationURL: env.as.RevokeURL(), Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader,
		DPoP: env.dpop}
	if env.demo != nil {
		env.demo(&pcfg)
	}
	demo, err := providers.NewOAuth2(pcfg,
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret", RedirectURL: redirect}, env.demoOpts...)
	require.NoError(t, err)
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(demo))
	cfg := oauthflow.Config{KV: env.kv, Registry: reg, Logger: slog.New(slog.DiscardHandler), OnEvent: env.events.hook}
	for _, c := range config {
		if c != nil {
			c(&cfg)
		}
	}
	mod, err := oauthflow.New(context.Background(), cfg)
	require.NoError(t, err)
	if setup != nil {
		setup(mod)
	}
	return mod
}

func (env *flowEnv) mod(i int) *oauthflow.Module { return env.replicas[i].mod }

// startSignIn launches the oauth workflow on replica i and returns the run and its prompt.
func (env *flowEnv) startSignIn(i int, user string) (*oauthflow.Run, *oauthflow.OAuthPromptDocument) {
	env.t.Helper()
	r, doc, err := env.mod(i).StartSignIn(context.Background(), user, "demo")
	require.NoError(env.t, err)
	return r, doc
}

// consent plays the user at the authorization server and returns the redirect
// it sends the browser to, rewritten to reach replica i.
func (env *flowEnv) consent(authURL string, i int) string {
	env.t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	require.NoError(env.t, err)
	_ = resp.Body.Close()
	require.Equal(env.t, http.StatusFound, resp.StatusCode, "authorize answered %d", resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(env.t, err)
	to, _ := url.Parse(env.replicas[i].api.URL)
	loc.Host = to.Host
	return loc.String()
}

// get fetches a URL and returns status, body and headers.
func get(t *testing.T, u string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(u)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

// postComplete sends a body to replica i's /complete and decodes the JSON answer.
func (env *flowEnv) postComplete(i int, contentType, body string) (int, map[string]any) {
	env.t.Helper()
	resp, err := http.Post(env.replicas[i].api.URL+oauthflow.CompletePath, contentType, strings.NewReader(body))
	require.NoError(env.t, err)
	defer func() { _ = resp.Body.Close() }()
	var out map[string]any
	require.NoError(env.t, json.NewDecoder(resp.Body).Decode(&out))
	return resp.StatusCode, out
}

func (env *flowEnv) prompt(runID string) oauthflow.OAuthPromptDocument {
	env.t.Helper()
	var doc oauthflow.OAuthPromptDocument
	require.NoError(env.t, env.mod(0).Engine.Document(context.Background(), runID, oauthflow.PromptDocumentName, &doc))
	return doc
}

func (env *flowEnv) run(runID string) *oauthflow.Run {
	env.t.Helper()
	r, err := env.mod(0).Engine.Get(context.Background(), runID)
	require.NoError(env.t, err)
	return r
}

// sharedRedisAny is the real Redis (required under CI=true), or miniredis
// outside CI when none answers.
func sharedRedisAny(t *testing.T) oauthflow.KV {
	c, real := redistest.Any(t)
	if real {
		return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
	}
	return oauthflow.NewRedisKV(c)
}

// switchKV is a KV that can be made to fail, to play a store outage.
type switchKV struct {
	oauthflow.KV
	down atomic.Bool
}

var errStoreDown = &net503{}

type net503 struct{}

func (*net503) Error() string   { return "dial tcp 127.0.0.1:6379: connect: connection refused" }
func (*net503) Timeout() bool   { return false }
func (*net503) Temporary() bool { return true }

func (s *switchKV) fail() error {
	if s.down.Load() {
		return errStoreDown
	}
	return nil
}

func (s *switchKV) Get(ctx context.Context, k string) ([]byte, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.KV.Get(ctx, k)
}

func (s *switchKV) GetDel(ctx context.Context, k string) ([]byte, error) {
	if err := s.fail(); err != nil {
		return nil, err
	}
	return s.KV.GetDel(ctx, k)
}

func (s *switchKV) Set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	if err := s.fail(); err != nil {
		return err
	}
	return s.KV.Set(ctx, k, v, ttl)
}

func (s *switchKV) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	if err := s.fail(); err != nil {
		return false, err
	}
	return s.KV.SetNX(ctx, k, v, ttl)
}

// unknownState has the form of an issued state but was never issued.
const unknownState = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
