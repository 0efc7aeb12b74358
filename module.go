package oauthflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/outbound"
	"github.com/oauthflow/oauthflow/internal/seal"
	"github.com/oauthflow/oauthflow/internal/web"
	"github.com/oauthflow/oauthflow/internal/worker"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Config wires a Module. Its zero value means: Redis from KVSTORE_* (memory if it
// cannot be reached), a new registry, slog.Default, a client with a timeout.
type Config struct {
	KV         KV           // nil: KVFromEnv (KVSTORE_*), memory if Redis cannot be reached
	RequireKV  bool         // with KV nil: fail instead of falling back to memory
	KeyPrefix  string       // put before every key, so that several apps share one Redis; ends in its separator ("myapp:")
	Registry   *Registry    // nil: NewRegistry()
	Logger     *slog.Logger // nil: slog.Default(); a sign-in, a store, a refresh or a delete logs at Debug, a failure at Warn
	HTTPClient *http.Client // for calls to providers that honour oauth2.HTTPClient; nil: a client with a 30 s timeout
	Now        func() time.Time
	OnEvent    EventHook // hears tokens stored, refreshed, refresh failed, deleted, connected and flow failed

	// VerifyUser, when set, is asked on both public endpoints whether the
	// browser completing a sign-in belongs to userID, who started it (the
	// app's own login cookie, say), before anything is consumed. An error
	// refuses: the answer is 403, the sign-in stays usable by the right user
	// until it expires, and EventSignInRefused is emitted.
	VerifyUser func(r *http.Request, userID string) error
	// CurrentUser names the app's signed-in user of a request (from its own
	// session cookie, say), or returns an error (or "") when there is none.
	// The library never keeps a session of its own: the connections
	// endpoint (GET, POST /api/v1/oauth/connections, DELETE
	// /api/v1/oauth/connections/{provider}) acts for this user only, and a
	// reconnect link ([Module.ReconnectLink]) opens for this user only.
	// nil: the connections endpoint answers 501 and ReconnectLink fails.
	CurrentUser func(r *http.Request) (userID string, err error)
	// BindSignIns binds each sign-in to the browser that opens it from the
	// app, for apps without a login session on the API origin: the widget
	// opens the provider through POST /api/v1/oauth/start, which sets a
	// short-lived HttpOnly SameSite=Lax cookie, and a completion without it is
	// refused. A link opened any other way (printed in a terminal, sent in a
	// chat) cannot complete. The secret is in [BuildOAuthURLResult].Binding
	// and the prompt document, never in a link; [Module.Mount] serves
	// the endpoint. A refusal is 403, leaves the sign-in usable by the right
	// browser until it expires, and emits [EventSignInRefused].
	BindSignIns bool
	// WithholdTokens leaves the tokens out of exchange_oauth_token's result,
	// which then only says the user is connected: {"connected": true,
	// "provider", "scope", "expiresIn"}. By default the result carries the
	// access and refresh tokens: {"accessToken", "refreshToken", "expiresIn",
	// "scope"}. Set this whenever the result can reach a
	// model (Tools hands the tool to an agent), where a prompt injection could
	// have them repeated or sent on. The tokens are stored for the user either
	// way, nothing in the library reads them from the result, and the tool's
	// description tells the model which result it gets.
	WithholdTokens bool

	// Encryption seals token records and pending sign-ins at rest (AES-256-GCM;
	// see KeyRing). nil: the ring in OAUTHFLOW_ENCRYPTION_KEYS, and records
	// stored plain when that is unset.
	Encryption *KeyRing

	// FrontendOrigins are the origins ("https://app.example.com", "http://localhost:3000")
	// of frontends served apart from the API. The API's callback page posts its result
	// to them as well as to its own origin, and POST /api/v1/oauth/complete answers them
	// with CORS. Each must be scheme://host[:port]; New refuses anything else, a
	// wildcard included. nil: the API's own origin only.
	FrontendOrigins []string

	// SignInTTL bounds a sign-in: its state expires then, and the background
	// worker ends its run as not authenticated and resumes the parent. 0: 10 minutes.
	SignInTTL time.Duration
	// FinishedRunTTL is how long a run that has ended (a finished sign-in, for
	// one) and its documents are kept. 0: 24 hours.
	FinishedRunTTL time.Duration
	// CompletionTimeout bounds a completion the server runs once a callback has
	// consumed its state (the exchange, the token write, the run's end, the
	// parent's resume). 0: one minute.
	CompletionTimeout time.Duration
	// RunLockLease is how long a run's lock outlives an instance that died
	// holding it. 0: 30 seconds.
	RunLockLease time.Duration
	// RefreshBackoff is how long a connection whose refresh failed
	// transiently waits before a refresh calls its provider again: reads of a
	// token that has expired fail at once until then, with an error for which
	// IsTransient is true (TokenStore.Connections shows the connection
	// HealthRefreshFailing, with its Attempts, LastError and NextAttempt);
	// reads of one still valid get it as usual. Zero fields: 2 s first, at
	// most 5 min, 20% jitter.
	RefreshBackoff Backoff
	// RefreshAhead, when set, has the background worker refresh a
	// connection's tokens this long before they expire, so that reads never
	// wait on the provider; it is raised to twice the 60 s skew when less.
	// Every instance refreshes its share, each connection once between them.
	// A connection is kept alive by reads: one not read for RefreshAheadIdle
	// (0: 7 days) is left to refresh on its next read. 0 (the default): off,
	// tokens are refreshed on read only; refreshing ahead spends provider
	// calls (and rate limits) on connections that may not be read again, and
	// rotates refresh tokens in the background, so it is the app's choice.
	// Set it on every instance alike: one without it takes connections out.
	RefreshAhead, RefreshAheadIdle time.Duration
	// ReplicaAcks is how many Redis replicas must hold a write of a rotated
	// refresh token or a new sign-in's tokens (Redis WAIT on the key's
	// master, at most ReplicaAckTimeout, default 500 ms). 0, the default,
	// does not wait: a failover in the moment after a rotation can then
	// cost the grant. A refreshed record that misses its replicas is kept
	// by the instance that refreshed it, and written again if a failover
	// loses it. RELIABILITY.md gives the recovery point of each setting.
	ReplicaAcks       int
	ReplicaAckTimeout time.Duration
	// WorkerInterval is how often the background worker looks for due work
	// (one store command when there is none). 0: one second.
	WorkerInterval time.Duration
	// RefreshLimits bound each provider's refreshes ahead, by provider ID
	// ("" for every provider not named): how many one instance runs at once
	// (100 by default) and how many a second all the instances together send
	// (no limit by default). A provider the map leaves out, with no "",
	// keeps to the limit it documents, if it reports one (the optional
	// RefreshLimit of [Provider]; the catalog's entries carry those their
	// providers publish). A provider that answers 429 slows the whole
	// fleet's refreshes ahead of its tokens for 30 seconds. Refreshes on
	// read are never held back.
	RefreshLimits map[string]RefreshLimit
	// SignInOwners are engines of the app's that finish sign-ins, by name:
	// a sign-in built with ToolContext.Owner set to a name here is finished
	// by that owner once its callback has been checked ([SignInOwner]). Every
	// instance that serves the callback endpoints has the same owners.
	SignInOwners map[string]SignInOwner
}

// Module is the whole library wired together: the services, the two OAuth tools,
// and an Engine with the "oauth" workflow registered. Create it once with New.
type Module struct {
	Registry           *Registry
	Tokens             *TokenStore
	Sessions           *SessionService
	Engine             *Engine
	BuildOAuthURL      *Tool // build_oauth_url
	ExchangeOAuthToken *Tool // exchange_oauth_token
	KV                 KV

	ring        *seal.Ring     // seals records at rest; nil: plain
	ownsKV      bool           // New made the store, and Close releases it
	flow        *oauthWorkflow // the sign-ins: their steps, runs and due work
	endpoints   *endpoints
	connections *connectionsAPI // the connections endpoint and reconnect links
	work        *worker.Worker  // the time-driven work: lapses, deliveries, abandoned completions, refreshes ahead, device polls
}

// defaultHTTPTimeout bounds each provider request made with the Module's
// default client (Config.HTTPClient nil), which is pooled with the providers'.
const defaultHTTPTimeout = 30 * time.Second

// New wires every service, tool and the OAuth workflow.
func New(ctx context.Context, cfg Config) (*Module, error) {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	origins, err := parseFrontendOrigins(cfg.FrontendOrigins)
	if err != nil {
		return nil, err
	}
	for name, o := range cfg.SignInOwners {
		if name == "" || errs.IsNil(o) {
			return nil, errs.Invalid("Config.SignInOwners[%q]: want a non-empty name and an owner", name)
		}
	}
	ring, err := moduleKeyRing(cfg)
	if err != nil {
		return nil, err
	}
	origins.credentials = cfg.VerifyUser != nil || cfg.BindSignIns
	store, owned, err := moduleKV(ctx, cfg, log)
	if err != nil {
		return nil, err
	}
	m := &Module{Registry: cfg.Registry, KV: store, ring: ring.sealer(), ownsKV: owned}
	if m.Registry == nil {
		m.Registry = NewRegistry()
	}
	m.Registry.watchRegistered(func(p Provider) { reportUnservedRedirect(log, p) })
	signInTTL, runLockLease := orDefault(cfg.SignInTTL, defaultSessionTTL), orDefault(cfg.RunLockLease, runLockLeaseDefault)
	m.Tokens = NewTokenStore(store, m.Registry, WithClock(cfg.Now), WithLogger(log), withEventHook(cfg.OnEvent),
		WithEncryption(ring), withRefreshBackoff(cfg.RefreshBackoff), withRefreshAhead(cfg.RefreshAhead, cfg.RefreshAheadIdle),
		withRefreshLimits(cfg.RefreshLimits),
		WithReplicaAcks(cfg.ReplicaAcks, orDefault(cfg.ReplicaAckTimeout, 500*time.Millisecond)))
	m.Sessions = newSessionService(store, withSessionClock(now), withSessionTTL(signInTTL), withSessionEncryption(ring))
	m.Engine = newEngine(store, withEngineClock(now), withEngineLogger(log), withFinishedRunTTL(cfg.FinishedRunTTL),
		withRunLease(runLockLease))
	m.work = worker.New(storeOf(store), worker.Config{Now: now, Log: log, Every: cfg.WorkerInterval, ErrorText: logSafeError})
	steps := m.newSignIns(cfg, log)
	steps.returnOrigin = origins.allows
	m.BuildOAuthURL, m.ExchangeOAuthToken = steps.tools()
	events := notifier{hook: cfg.OnEvent, log: log, now: now}
	m.flow = &oauthWorkflow{signIns: steps, engine: m.Engine, work: m.work, events: events, ring: m.ring, now: now,
		signInTTL: signInTTL, runLockLease: runLockLease}
	if err := m.Engine.Register(m.flow.workflow()); err != nil {
		return nil, err
	}
	m.endpoints = &endpoints{oauthWorkflow: m.flow, origins: origins,
		guard: userGuard{verifyUser: cfg.VerifyUser, bind: cfg.BindSignIns, events: events}}
	m.connections = newConnectionsAPI(m, cfg.CurrentUser)
	kind := worker.Share{Most: worker.KindShare}
	m.work.Handle(jobLapse, kind, m.flow.lapse)
	m.work.Handle(jobDeliver, kind, m.Engine.deliver)
	m.work.Handle(jobAbandon, kind, m.flow.abandon)
	m.work.Handle(jobAhead, aheadShare, m.Tokens.ahead.job)
	m.work.Handle(jobAheadLegacy, aheadShare, m.Tokens.ahead.legacyJob)
	m.work.Handle(jobDevice, kind, m.flow.pollDevice)
	m.work.Start()
	return m, nil
}

// newSignIns builds the steps of a sign-in over m's services.
func (m *Module) newSignIns(cfg Config, log *slog.Logger) *signIns {
	s := &signIns{registry: m.Registry, tokens: m.Tokens, sessions: m.Sessions, log: log, httpClient: cfg.HTTPClient,
		bindSignIns: cfg.BindSignIns, withhold: cfg.WithholdTokens,
		completionTimeout: orDefault(cfg.CompletionTimeout, defaultCompletionTimeout), owners: cfg.SignInOwners}
	if s.httpClient == nil {
		s.httpClient = outbound.Client(defaultHTTPTimeout)
	}
	return s
}

// moduleKeyRing is cfg.Encryption, else the ring OAUTHFLOW_ENCRYPTION_KEYS names.
func moduleKeyRing(cfg Config) (*KeyRing, error) {
	if cfg.Encryption != nil {
		if !cfg.Encryption.usable() {
			return nil, errs.Invalid("Config.Encryption is an empty KeyRing: make it with ParseKeyRing")
		}
		return cfg.Encryption, nil
	}
	return keyRingFromEnv()
}

func moduleKV(ctx context.Context, cfg Config, log *slog.Logger) (KV, bool, error) {
	if err := checkKeyPrefix(cfg.KeyPrefix); err != nil {
		return nil, false, err
	}
	store, owned := cfg.KV, false
	if store == nil {
		var err error
		if cfg.RequireKV {
			store, _, err = redisFromLookup(ctx, log, os.LookupEnv)
		} else {
			store, err = KVFromEnv(ctx, log)
		}
		if errors.Is(err, ErrInvalidArgument) {
			return nil, false, err // a malformed KVSTORE_* variable, named in err
		}
		if err != nil && cfg.RequireKV {
			return nil, false, fmt.Errorf("oauthflow: the key-value store is required (Config.RequireKV) and cannot be reached: %w", err)
		}
		owned = true
	}
	return WithKeyPrefix(store, cfg.KeyPrefix), owned, nil
}

// Close stops the background worker and waits for the work it has in flight
// (a device sign-in's poll, whose answer may be the code's only tokens, runs
// to its end, bounded by CompletionTimeout), waits for the refreshes in
// flight (each bounded by its own timeout, 30 s by default) so that tokens a
// provider has just rotated are written, and releases the store when New
// created it.
//
// A rotated refresh token that a store failure kept from the store past its
// refresh's retries lives only in this process: Close then returns an error
// wrapping ErrStoreUnavailable that names those connections (user and
// provider, never a token), whose users must sign in again once the process
// exits.
func (m *Module) Close() error {
	m.work.Close()
	m.Tokens.refresher.flights.Wait() // a refresh in flight writes what the provider rotated first
	err := m.Tokens.refresher.unwrittenErr()
	if m.ownsKV {
		err = errors.Join(err, kv.Close(m.KV))
	}
	return err
}

// Reencrypt seals every token record, pending sign-in and MCP dynamic
// client registration of the module's store under the current key of its
// key ring: plain records and records under older keys alike. See the package function [Reencrypt].
func (m *Module) Reencrypt(ctx context.Context, opts ReencryptOptions) (ReencryptProgress, error) {
	return reencrypt(ctx, m.KV, m.ring, opts)
}

// Tools returns the module's tools, for handing to an agent.
func (m *Module) Tools() []*Tool { return []*Tool{m.BuildOAuthURL, m.ExchangeOAuthToken} }

// StartSignIn launches the "oauth" workflow for userID and provider and returns
// the run with its prompt document: what a host app shows as "Connect".
//
// A provider the registry does not know is refused with ErrUnknownProvider
// before anything is created (no run, no flow_failed event).
//
// A sign-in that asks for authorization details (RFC 9396) is launched with
// [Engine.Launch], OAuthWorkflowName and [OAuthWorkflowArgs] (its
// AuthorizationDetails), and its prompt read with [Module.SignInStatus].
func (m *Module) StartSignIn(ctx context.Context, userID, provider string, scopes ...string) (*Run, *OAuthPromptDocument, error) {
	if _, err := m.Registry.Get(provider); err != nil {
		return nil, nil, err
	}
	return m.flow.launch(ctx, userID, OAuthWorkflowArgs{Provider: provider, Scopes: scopes})
}

// ExchangeSignIn finishes the sign-in s, which the callback endpoints
// consumed and handed to its owner ([SignInOwner]), with the provider's
// answer a: it exchanges the code (with the sign-in's PKCE verifier and
// DPoP key), checks the issuer, stores the tokens for the sign-in's user
// and emits EventConnected or EventFlowFailed. A code is good for one
// exchange: an owner calls it once per answer, and never again after an
// error. The error's *FlowError Message, when it has one, is for the user.
func (m *Module) ExchangeSignIn(ctx context.Context, s *Session, a CallbackAnswer) error {
	if s == nil || a.Code == "" {
		return errs.Invalid("ExchangeSignIn needs a sign-in and its answer's code")
	}
	return m.flow.exchangeSignIn(ctx, s, a)
}

// SignInStatus reports how the sign-in run runID stands: its prompt, whose
// Status is PromptPending until the sign-in ends, then PromptSuccess (with the
// Account connected, when the provider said) or PromptError (with a Message
// for the user). It reads the store, so it answers for a sign-in started on
// any instance. A run that is not a sign-in is ErrRunNotFound.
func (m *Module) SignInStatus(ctx context.Context, runID string) (*OAuthPromptDocument, error) {
	r, err := m.Engine.Get(ctx, runID)
	if err != nil {
		return nil, err
	}
	if r.Workflow != OAuthWorkflowName {
		return nil, fmt.Errorf("%w: %q is not a sign-in", ErrRunNotFound, runID)
	}
	var doc OAuthPromptDocument
	if err := m.Engine.Document(ctx, runID, PromptDocumentName, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

// WaitSignIn waits until the sign-in run runID is no longer pending and
// returns its prompt, as SignInStatus reads it; or returns ctx's error when
// ctx ends first. It polls the store, starting at 50 ms and backing off to a
// second, so the sign-in may complete on any instance. A sign-in nobody
// finishes ends by itself after Config.SignInTTL.
func (m *Module) WaitSignIn(ctx context.Context, runID string) (*OAuthPromptDocument, error) {
	ctx = xcontext.OrBackground(ctx)
	wait := 50 * time.Millisecond
	for {
		doc, err := m.SignInStatus(ctx, runID)
		if err != nil || doc.Status != PromptPending {
			return doc, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// StartDeviceSignIn launches the "oauth" workflow with the device
// authorization grant (RFC 8628) for userID and provider and returns the run
// with its prompt document: what an agent without a browser shows, the
// document's UserCode and VerificationURI (and VerificationURIComplete, when
// the server gives one). The Module's worker polls the provider's token
// endpoint at the interval the server asks for; when the user approves, the
// tokens are stored as a redirect sign-in's are, the run ends
// {authenticated: true} and the prompt turns "success"; a denial or an
// expiry ends it {authenticated: false} with a message that says which.
//
// A provider the registry does not know is refused with ErrUnknownProvider,
// one without the grant with ErrDeviceAuthUnsupported, before anything is
// created.
func (m *Module) StartDeviceSignIn(ctx context.Context, userID, provider string, scopes ...string) (*Run, *OAuthPromptDocument, error) {
	p, err := m.Registry.Get(provider)
	if err != nil {
		return nil, nil, err
	}
	if deviceAuthorizerOf(p) == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrDeviceAuthUnsupported, provider)
	}
	return m.flow.launch(ctx, userID, OAuthWorkflowArgs{Provider: provider, Scopes: scopes, Grant: GrantDevice})
}

// Mount registers the public endpoints on mux:
//   - "GET /api/v1/oauth/callback", the provider's redirect target (CallbackHandler),
//     which also finishes a sign-in sent by the frontend callback page's no-script form;
//   - "POST /api/v1/oauth/complete" (CompleteHandler), with its CORS preflight
//     "OPTIONS /api/v1/oauth/complete", which allows Config.FrontendOrigins only
//     (403 for any other request);
//   - "POST /api/v1/oauth/start", which the widget opens a bound sign-in
//     through (Config.BindSignIns; form fields state and binding). From the
//     API's own origin or one of Config.FrontendOrigins only, and with the
//     sign-in's secret, it sets the sign-in's cookie and sends the browser to
//     the provider (303);
//   - "GET /api/v1/oauth/start?state=...", the link of a sign-in whose
//     provider pushes its authorization requests (RFC 9126): it pushes the
//     request when the link is opened and sends the browser on (303), so the
//     link outlives the minute a pushed request lives. A bound sign-in is
//     refused there (403): it opens through the POST;
//   - the connections endpoint, for the user Config.CurrentUser names:
//     "GET /api/v1/oauth/connections" lists the user's connections and the
//     providers offered, "POST /api/v1/oauth/connections" starts a connect
//     or reconnect and answers its prompt document, "DELETE
//     /api/v1/oauth/connections/{provider}" disconnects; writes come from
//     the API's own origin or one of Config.FrontendOrigins, with the
//     header "X-Requested-With: oauthflow"; the CORS preflights allow
//     Config.FrontendOrigins only;
//   - "GET /api/v1/oauth/reconnect?token=...", a reconnect link
//     ([Module.ReconnectLink]).
func (m *Module) Mount(mux *http.ServeMux) {
	mux.Handle("GET "+CallbackPath, m.CallbackHandler())
	mux.Handle("POST "+CompletePath, m.CompleteHandler())
	mux.Handle("OPTIONS "+CompletePath, http.HandlerFunc(m.endpoints.servePreflight))
	mux.Handle("POST "+StartPath, http.HandlerFunc(m.endpoints.serveStart))
	mux.Handle("GET "+StartPath, http.HandlerFunc(m.endpoints.serveStartLink))
	c := m.connections
	mux.Handle("GET "+connectionsPath, http.HandlerFunc(c.serveList))
	mux.Handle("POST "+connectionsPath, http.HandlerFunc(c.serveConnect))
	mux.Handle("DELETE "+connectionsPath+"/{provider}", http.HandlerFunc(c.serveDisconnect))
	mux.Handle("OPTIONS "+connectionsPath, http.HandlerFunc(c.servePreflight))
	mux.Handle("OPTIONS "+connectionsPath+"/{provider}", http.HandlerFunc(c.servePreflight))
	mux.Handle("GET "+reconnectPath, http.HandlerFunc(c.serveReconnect))
}

// FrontendHandler serves the browser side of the flow, as embedded assets with no
// build step: the frontend callback page (GET /oauth/callback, a redirect URI
// target that hands the code to the widget, or completes through
// POST /api/v1/oauth/complete when opened directly; in a browser that runs no
// script, its form sends the provider's answer to GET /api/v1/oauth/callback,
// which completes the sign-in and shows the outcome), the oauth-prompt widget
// (GET /oauth/oauth-prompt.js and .css) and the oauth-connections widget, a
// user's connected accounts with Connect, Reconnect and Disconnect (GET
// /oauth/oauth-connections.js and .css, beside oauth-prompt.js, which it
// uses). Mount it on the frontend's origin:
//
//	mux.Handle("GET /oauth/", m.FrontendHandler(""))
//
// apiBase is where the API lives when it is on another origin ("" for the same
// origin); a malformed apiBase panics, at setup. The callback page forwards,
// besides the provider's answer, the redirect's parameters that a registered
// provider keeps with the tokens (its CallbackFields, see [Provider]), and no
// others.
func (m *Module) FrontendHandler(apiBase string) http.Handler {
	return web.Handler(web.Options{APIBase: apiBase, CallbackFields: m.endpoints.declaredFieldNames})
}

// CallbackHandler serves GET /api/v1/oauth/callback, the provider's redirect
// target: it completes the sign-in and renders a small page with the outcome.
func (m *Module) CallbackHandler() http.Handler { return http.HandlerFunc(m.endpoints.serveCallback) }

// CompleteHandler serves POST /api/v1/oauth/complete, the JSON variant the
// frontend callback page uses: {code, state[, iss]} or {state, error, error_description}.
// A request from one of Config.FrontendOrigins gets CORS headers on every answer,
// errors included, so the frontend can read them.
func (m *Module) CompleteHandler() http.Handler { return http.HandlerFunc(m.endpoints.serveComplete) }

// The module's ring, for the subpackages that store secrets beside its
// records (seal.OfModule).
func init() {
	seal.OfModule = func(module any) *seal.Ring {
		if m, ok := module.(*Module); ok && m != nil {
			return m.ring
		}
		return nil
	}
}
