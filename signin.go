package oauthflow

import (
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/clip"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/runstore"
	"github.com/oauthflow/oauthflow/internal/xcontext"
	"golang.org/x/oauth2"
)

// errIssuerMismatch means a callback's iss is not the issuer the sign-in was
// started with (RFC 9207 mix-up defence).
var errIssuerMismatch = errors.New("oauthflow: authorization response from an unexpected issuer")

// signIns runs the steps of a sign-in that speak to its provider and its
// stores: it builds the authorization URL and registers the pending
// sign-in, exchanges the code, reads which account the grant is for and
// stores the tokens. The OAuth tools are these steps as they stand; the
// "oauth" workflow and the endpoints sign in through them. New builds one.
type signIns struct {
	registry          *Registry
	tokens            *TokenStore
	sessions          *SessionService
	log               *slog.Logger
	httpClient        *http.Client  // for calls to providers
	bindSignIns       bool          // a sign-in gets a secret its browser must show (Config.BindSignIns)
	withhold          bool          // exchange_oauth_token's result has no tokens (Config.WithholdTokens)
	completionTimeout time.Duration // bounds the token write's retries with the completion
	// returnOrigin reports whether a sign-in may return to origin
	// (Config.FrontendOrigins); the API's own is checked apart.
	returnOrigin func(origin string) bool
	owners       map[string]SignInOwner // the engines of the app's that finish sign-ins (Config.SignInOwners)
}

// The two OAuth tools' names.
const (
	toolBuildOAuthURL      = "build_oauth_url"
	toolExchangeOAuthToken = "exchange_oauth_token"
)

// BuildOAuthURLArgs are build_oauth_url's arguments.
type BuildOAuthURLArgs struct {
	Provider string   `json:"provider"`
	Scopes   []string `json:"scopes"`

	// AuthorizationDetails, when given, are the authorization details the
	// sign-in asks for (RFC 9396 §2): a JSON array of objects, each with a
	// non-empty string "type", of at most 8 KiB; the authorization request
	// carries them as authorization_details. Other details are refused with
	// ErrInvalidArgument.
	AuthorizationDetails json.RawMessage `json:"authorizationDetails,omitempty"`
}

// BuildOAuthURLResult is build_oauth_url's result.
type BuildOAuthURLResult struct {
	AuthURL string `json:"authUrl"`
	State   string `json:"state"`
	// Binding is the sign-in's secret when [Config.BindSignIns] is set: the
	// oauth-prompt widget posts it to /api/v1/oauth/start ([Module.Mount]).
	Binding string `json:"binding,omitempty"`
}

// exchangeOAuthTokenArgs are exchange_oauth_token's arguments. Iss is the
// callback's RFC 9207 issuer, required when the provider announces one.
type exchangeOAuthTokenArgs struct {
	Provider      string `json:"provider"`
	Code          string `json:"code"`
	State         string `json:"state"`
	ExpectedState string `json:"expectedState"`
	Iss           string `json:"iss,omitempty"`
}

// exchangeOAuthTokenResult is exchange_oauth_token's result.
type exchangeOAuthTokenResult struct {
	AccessToken  string `json:"accessToken"`
	RefreshToken string `json:"refreshToken,omitempty"`
	ExpiresIn    int64  `json:"expiresIn,omitempty"`
	Scope        string `json:"scope,omitempty"`
}

// exchangeOAuthTokenReceipt is exchange_oauth_token's result under
// Config.WithholdTokens: the user is connected to Provider with Scope, for
// ExpiresIn seconds (0: not reported), and no token is in it.
type exchangeOAuthTokenReceipt struct {
	Connected bool   `json:"connected"`
	Provider  string `json:"provider"`
	Scope     string `json:"scope,omitempty"`
	ExpiresIn int64  `json:"expiresIn,omitempty"`
}

var (
	buildOAuthURLSchema = Schema{Type: "object", Required: []string{"provider", "scopes"},
		Properties: map[string]Property{
			"provider": {Type: "string", Description: "provider ID, e.g. github"},
			"scopes":   {Type: "array", Items: &Property{Type: "string"}, Description: "scopes to ask for; empty means the provider's defaults"},
			"authorizationDetails": {Type: "array", Items: &Property{Type: "object"},
				Description: `authorization details to ask for (RFC 9396), when the provider takes them: objects, each with a string "type"`},
		}}
	exchangeOAuthTokenSchema = Schema{Type: "object", Required: []string{"provider", "code", "state", "expectedState"},
		Properties: map[string]Property{
			"provider":      {Type: "string", Description: "provider ID"},
			"code":          {Type: "string", Description: "authorization code from the callback"},
			"state":         {Type: "string", Description: "state from the callback"},
			"expectedState": {Type: "string", Description: "state expected, for CSRF validation"},
			"iss":           {Type: "string", Description: "issuer from the callback (RFC 9207), when present"},
		}}
)

func (si *signIns) tools() (build, exchange *Tool) {
	build = NewTool(toolBuildOAuthURL,
		"Builds the authorization URL the user visits to connect a provider, with a single-use CSRF state.",
		buildOAuthURLSchema, func(ctx context.Context, tc ToolContext, a BuildOAuthURLArgs) (any, error) {
			return si.buildAuthURL(ctx, tc, a, "")
		})
	exchange = NewTool(toolExchangeOAuthToken, si.exchangeDescription(),
		exchangeOAuthTokenSchema, func(ctx context.Context, tc ToolContext, a exchangeOAuthTokenArgs) (any, error) {
			res, err := si.exchangeCode(ctx, tc, a)
			if err != nil || !si.withhold {
				return res, err
			}
			return withheld(tc, a, res), nil
		})
	return build, exchange
}

// Should exchange_oauth_token's result reach a model? No: a model needs to
// know the user is connected, never the token, and whatever is in its
// context a prompt injection can have it repeat or send on. The library
// itself never reads the result (the sign-in stores the tokens for the
// user). The result with the tokens is the default, and code is written
// against it, so it stays; Config.WithholdTokens gives the safe result, and
// the description tells the model which one it gets.

func (si *signIns) exchangeDescription() string {
	const does = "Validates the state, exchanges an authorization code for tokens and stores them for the current user."
	if si.withhold {
		return does + " The result says the user is connected; it never carries the tokens."
	}
	return does + " The result carries the access and refresh tokens: never repeat them or send them anywhere."
}

// withheld is res without its tokens.
func withheld(tc ToolContext, a exchangeOAuthTokenArgs, res *exchangeOAuthTokenResult) *exchangeOAuthTokenReceipt {
	provider := a.Provider
	if tc.Session != nil {
		provider = tc.Session.Provider
	}
	return &exchangeOAuthTokenReceipt{Connected: true, Provider: provider, Scope: res.Scope, ExpiresIn: res.ExpiresIn}
}

// buildAuthURL makes the state, a PKCE verifier when the provider takes one, and
// the URL, and registers the pending sign-in. The verifier stays in the session.
func (si *signIns) buildAuthURL(ctx context.Context, tc ToolContext, a BuildOAuthURLArgs, returnTo string) (*BuildOAuthURLResult, error) {
	if tc.UserID == "" {
		return nil, errs.Invalid("build_oauth_url needs the current user")
	}
	details, err := askedDetails(a.AuthorizationDetails)
	if err != nil {
		return nil, err
	}
	p, err := si.registry.Get(a.Provider)
	if err != nil {
		return nil, err
	}
	scopes := a.Scopes
	if len(scopes) == 0 {
		scopes = p.DefaultScopes()
	}
	state := newState()
	if returnTo != "" && !si.mayReturnTo(p, returnTo) {
		return nil, &FlowError{Message: "The sign-in's return address is not one of this app's.",
			Err: errs.Invalid("return address %q: want an absolute http(s) URL on the API's own origin or one of Config.FrontendOrigins", clip.To(returnTo, 256))}
	}
	if _, ok := si.owners[tc.Owner]; tc.Owner != "" && !ok {
		return nil, errs.Invalid("sign-in owner %q is not one of Config.SignInOwners", clip.To(tc.Owner, 64))
	}
	s := Session{WorkflowID: tc.RunID, UserID: tc.UserID, Provider: p.ProviderID(), Scopes: scopes, ReturnTo: returnTo, Owner: tc.Owner,
		AuthorizationDetails: details}
	s.Issuer, s.IssOptional = issuerOf(p)
	if supportsPKCE(p) {
		s.CodeVerifier = oauth2.GenerateVerifier()
	}
	if usesDPoP(p) {
		_, enc, err := newGrantKey()
		if err != nil {
			return nil, err
		}
		s.DPoPKey = enc
	}
	authURL, err := si.linkOf(ctx, p, &s, state)
	if err != nil {
		return nil, err
	}
	var binding string
	if si.bindSignIns {
		binding, s.Binding = newBinding()
	}
	if err := si.sessions.Register(ctx, state, s); err != nil {
		return nil, err
	}
	return &BuildOAuthURLResult{AuthURL: authURL, State: state, Binding: binding}, nil
}

// authURLOf builds the authorization URL of the sign-in s under state: its
// scopes, its PKCE challenge, its authorization details (RFC 9396 §3) and,
// when it has a DPoP key, the key's thumbprint as dpop_jkt, which binds the
// code to the key (RFC 9449 §10).
// build_oauth_url (the tool, the "oauth" workflow) and POST /start all build
// through it, so a sign-in opened any way asks for the same thing. A
// provider that pushes its authorization requests (RFC 9126) is sent them
// here, with a proof of the sign-in's key when it has one.
func (si *signIns) authURLOf(ctx context.Context, p Provider, s *Session, state string) (string, error) {
	var opts []oauth2.AuthCodeOption
	if s.CodeVerifier != "" {
		opts = append(opts, oauth2.S256ChallengeOption(s.CodeVerifier))
	}
	if len(s.AuthorizationDetails) > 0 {
		opts = append(opts, oauth2.SetAuthURLParam(paramAuthorizationDetails, string(s.AuthorizationDetails)))
	}
	var key *dpop.Key
	if s.DPoPKey != "" {
		var err error
		if key, err = si.tokens.keys.get(s.DPoPKey); err != nil { // kept parsed: the exchange signs with it
			return "", err
		}
		opts = append(opts, oauth2.SetAuthURLParam("dpop_jkt", key.Thumbprint()))
	}
	if ap := pusherOf(p); ap != nil {
		ctx = withProofs(context.WithValue(ctx, oauth2.HTTPClient, si.httpClient), key, &si.tokens.nonces)
		return si.pushAuthURL(ctx, ap, p.ProviderID(), s.Scopes, state, opts)
	}
	return callBuildAuthURL(p, s.Scopes, state, opts)
}

// linkOf is the link a new sign-in s is opened with. For a provider that
// pushes its authorization requests it is the module's own start link
// (startLink), when the provider redirects to the module's callback: a
// pushed request lives a minute or so, and a link handed to a user may be
// opened much later, so the request is pushed when the link is opened, each
// time it is. Otherwise it is the authorization URL itself (authURLOf).
func (si *signIns) linkOf(ctx context.Context, p Provider, s *Session, state string) (string, error) {
	if pusherOf(p) != nil {
		if link, ok := startLink(p, state); ok {
			return link, nil
		}
	}
	return si.authURLOf(ctx, p, s, state)
}

// startLink is the GET link of the module's start endpoint for the sign-in
// under state, on the origin of p's redirect URI when that is the module's
// callback (CallbackPath); a provider that redirects elsewhere (the
// frontend's callback page) has no start link on a known origin.
func startLink(p Provider, state string) (string, bool) {
	origin, ok := callbackOrigin(p)
	if !ok {
		return "", false
	}
	return origin + StartPath + "?" + url.Values{"state": {state}}.Encode(), true
}

// callbackOrigin is the API's origin as p's redirect URI names it, when
// that is the module's callback (CallbackPath): where the module's own
// links to the API (a start link, a reconnect link) go.
func callbackOrigin(p Provider) (string, bool) {
	r, ok := redirectURI(p)
	if !ok || r.Host == "" || r.Path != CallbackPath {
		return "", false
	}
	return r.Scheme + "://" + r.Host, true
}

func callBuildAuthURL(p Provider, scopes []string, state string, opts []oauth2.AuthCodeOption) (u string, err error) {
	defer errs.Recover(&err, "provider BuildAuthURL")
	u = p.BuildAuthURL(scopes, state, opts...)
	if u == "" {
		return "", fmt.Errorf("oauthflow: provider %s built an empty authorization URL", p.ProviderID())
	}
	return u, nil
}

// Pushed authorization requests (RFC 9126). A provider whose
// PushesAuthorization is true has every sign-in's authorization request
// pushed to its server, and the browser carries only what stands for it.
// The push is the sign-in's one way in: when it fails, the sign-in fails,
// and nothing falls back to a request in the URL, which the server may
// refuse anyway and which would carry what the push keeps out of the
// browser.

// pusherOf is p as an authorizationPusher whose sign-ins are pushed, else nil.
func pusherOf(p Provider) authorizationPusher {
	if ap, ok := p.(authorizationPusher); ok && ap.PushesAuthorization() {
		return ap
	}
	return nil
}

// errPush marks the failure of a sign-in's pushed authorization request;
// pushFailedMessage is what the user is told of it.
var errPush = errors.New("oauthflow: the pushed authorization request failed")

const pushFailedMessage = "The provider could not start the sign-in. Try again later."

// pushAuthURL pushes the authorization request of a sign-in of provider
// through ap and returns the URL the browser is sent to. A failure is
// logged, safely, and fails the sign-in with a message for the user.
func (si *signIns) pushAuthURL(ctx context.Context, ap authorizationPusher, provider string, scopes []string, state string,
	opts []oauth2.AuthCodeOption) (string, error) {
	u, err := callPushAuthorization(ctx, ap, scopes, state, opts)
	if err == nil && u == "" {
		err = &ProviderError{ProviderID: provider, Err: errors.New("the pushed authorization request named no URL")}
	}
	if err != nil {
		si.log.WarnContext(ctx, "oauthflow: a sign-in's pushed authorization request failed; the sign-in is not started",
			"provider", provider, "error", logSafeError(err))
		return "", &FlowError{Message: pushFailedMessage, Err: fmt.Errorf("%w: %w", errPush, err)}
	}
	return u, nil
}

func callPushAuthorization(ctx context.Context, ap authorizationPusher, scopes []string, state string,
	opts []oauth2.AuthCodeOption) (u string, err error) {
	defer errs.Recover(&err, "provider PushAuthorization")
	return ap.PushAuthorization(ctx, scopes, state, opts...)
}

// exchangeCode checks the state in constant time, takes the pending sign-in
// (once), checks the issuer, exchanges the code and stores the tokens for the
// sign-in's user. On a state mismatch nothing is exchanged or stored.
func (si *signIns) exchangeCode(ctx context.Context, tc ToolContext, a exchangeOAuthTokenArgs) (*exchangeOAuthTokenResult, error) {
	if a.State == "" || subtle.ConstantTimeCompare([]byte(a.State), []byte(a.ExpectedState)) != 1 {
		return nil, &FlowError{Message: "The sign-in response did not match this sign-in.", Err: errStateMismatch}
	}
	s := tc.Session
	if s == nil {
		var err error
		if s, err = si.sessions.Consume(ctx, a.State); err != nil {
			return nil, err
		}
	}
	if err := checkSession(s, tc, a); err != nil {
		return nil, err
	}
	ts, err := si.callExchange(ctx, s, a.Code)
	if err != nil {
		return nil, err
	}
	if ts.Scope == "" {
		ts.Scope = strings.Join(s.Scopes, " ")
	}
	if p, err := si.registry.Get(s.Provider); err == nil {
		keepCallbackFields(ts, callbackFieldsOf(ctx))
		si.readAccount(ctx, p, ts, s.DPoPKey)
	}
	if err := si.storeSignIn(ctx, s.UserID, s.Provider, ts, s.DPoPKey); err != nil {
		return nil, err
	}
	keepAccount(ctx, ts.Account)
	return &exchangeOAuthTokenResult{AccessToken: ts.AccessToken, RefreshToken: ts.RefreshToken,
		ExpiresIn: ts.ExpiresIn, Scope: ts.Scope}, nil
}

// SignInOwner is an engine that finishes sign-ins: the callback endpoints
// consume a sign-in's state exactly as for any other (once, its user and
// browser checked, its iss compared), then hand the provider's answer to the
// engine that owns the sign-in ([Session.Owner]) and wait for it. The
// module's own engine is one SignInOwner; an engine of the app's (a Temporal
// workflow) is another, named in [Config.SignInOwners].
type SignInOwner interface {
	// CompleteSignIn finishes the sign-in s with the provider's answer a,
	// on whichever instance its engine runs it, and returns once it has
	// ended: nil when the user is connected, else the error the callback
	// page reports (a *FlowError's Message is shown to the user; an
	// ErrSessionNotFound is "expired or already used"). The owner
	// exchanges the code once, with [Module.ExchangeSignIn]. ctx is the
	// server's, not the browser's: it lasts Config.CompletionTimeout.
	CompleteSignIn(ctx context.Context, s *Session, a CallbackAnswer) error
	// SignInRefused hears that the provider's authorization page refused
	// the sign-in s (the user denied it, say), from an error redirect that
	// passed the same checks. The browser brought it: it is a claim, not a
	// fact, so the sign-in stays open until it lapses, and the user may try
	// the same link again. The owner records it where the user sees it.
	SignInRefused(ctx context.Context, s *Session, refusal *ProviderError)
}

// CallbackAnswer is a provider's answer to a sign-in as its callback brought
// it: the code, the state it answers, the issuer it names (RFC 9207) and the
// parameters the provider keeps with the tokens. The code is a secret until
// it is exchanged.
type CallbackAnswer struct {
	Code   string
	State  string
	Iss    string
	Fields map[string]string
}

// checkSession ties the consumed sign-in to the call: same provider, same user,
// and the issuer the provider announced (RFC 9207), compared exactly.
func checkSession(s *Session, tc ToolContext, a exchangeOAuthTokenArgs) error {
	if s.Provider != a.Provider {
		return &FlowError{Message: "The sign-in response did not match this sign-in.", Err: errStateMismatch}
	}
	if tc.UserID != "" && tc.UserID != s.UserID {
		return ErrForbidden
	}
	return checkIss(s, a.Iss)
}

// checkIss refuses a callback's iss that is not the issuer the sign-in was
// sent to, and a missing one when that issuer advertises RFC 9207 (the
// mix-up defence, RFC 9207 §2.4 and MCP's SEP-2468). Both completion paths
// call it: the exchange and a provider's error redirect.
func checkIss(s *Session, iss string) error {
	if s.Issuer == "" || iss == s.Issuer || iss == "" && s.IssOptional {
		return nil
	}
	return &FlowError{Message: "The sign-in response came from an unexpected issuer.", Err: errIssuerMismatch}
}

func (si *signIns) callExchange(ctx context.Context, s *Session, code string) (ts *TokenSet, err error) {
	p, err := si.registry.Get(s.Provider)
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, si.httpClient)
	if s.DPoPKey != "" {
		key, err := si.tokens.keys.get(s.DPoPKey) // parsed once: the first API call signs with it too
		if err != nil {
			return nil, err
		}
		ctx = withProofs(ctx, key, &si.tokens.nonces)
	}
	defer errs.Recover(&err, "provider "+s.Provider+" ExchangeCode")
	ts, err = exchangeWith(ctx, p, code, s.CodeVerifier)
	if err == nil && (ts == nil || ts.AccessToken == "") {
		err = &ProviderError{ProviderID: s.Provider, Err: errNoAccessToken}
	}
	return ts, err
}

// exchangeWith trades code at p, with the sign-in's PKCE verifier when it has one.
func exchangeWith(ctx context.Context, p Provider, code, verifier string) (*TokenSet, error) {
	if ve, ok := p.(verifierExchanger); ok {
		return ve.ExchangeCodeVerifier(ctx, code, verifier)
	}
	if verifier == "" {
		return p.ExchangeCode(ctx, code)
	}
	return p.ExchangeCode(ctx, code, oauth2.VerifierOption(verifier))
}

// storeSignIn writes the tokens a provider answered a sign-in with (a code
// exchange, a device approval) for userID. The provider has spent the code
// (RFC 6749 §4.1.2, RFC 8628 §3.5): these tokens are the only ones the
// sign-in will get. So a store failure is tried again, with a growing
// backoff, as a refresh retries the write of a rotated token, for half the
// time the completion has left (half of CompletionTimeout at most): the
// other half ends the run and its prompt honestly if the store stays down.
// Anything else (a token set refused) fails at once.
func (si *signIns) storeSignIn(ctx context.Context, userID, provider string, ts *TokenSet, key string) error {
	if h := si.releaseCarrying(ctx); h != nil {
		return si.storeSignInAtRelease(h, userID, provider, ts, key)
	}
	return si.writeSignIn(ctx, userID, provider, ts, key)
}

// writeSignIn is storeSignIn's write, sent at once and, while the store is
// unavailable, tried again for half the time the completion has left. Each
// write has a deadline of its own (storeTokenSet); the retries' bound is
// set only once the first write failed.
func (si *signIns) writeSignIn(ctx context.Context, userID, provider string, ts *TokenSet, key string) error {
	err := si.tokens.storeTokenSet(ctx, userID, provider, ts, key)
	if err == nil || !errors.Is(err, ErrStoreUnavailable) {
		return err
	}
	left := si.completionTimeout
	if d, ok := ctx.Deadline(); ok {
		left = min(left, time.Until(d))
	}
	ctx, cancel := context.WithTimeout(ctx, left/2)
	defer cancel()
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		si.log.WarnContext(ctx, "oauthflow: a sign-in's tokens could not be written; the write is tried again",
			"provider", provider, "error", logSafeError(err))
		if xcontext.Sleep(ctx, backoff) != nil {
			return err
		}
		err = si.tokens.storeTokenSet(ctx, userID, provider, ts, key)
		if err == nil || !errors.Is(err, ErrStoreUnavailable) {
			return err
		}
	}
}

// A sign-in's run ends in the call that writes its tokens: the tokens, the
// prompt and the run's end are then sent in one batch with the release of
// the run's lock (runstore.Hold.WriteAtRelease), the tokens first, where
// the store sends a batch in one round trip, in order: a connection that
// fails part-way fails what follows, so the run's end is not saved without
// the tokens before it. The tokens are sent whether or not the run's save is
// made (a completion that lost its lock to another instance still keeps the
// grant its code bought), and a write that failed is tried again as
// storeSignIn tries it. Where the store sends a batch one command at a
// time, nothing is saved by waiting, and the tokens are written at once.

type tokensAtReleaseKey struct{}

// withTokensAtRelease asks the token write of a sign-in completed on ctx to
// go with the release of run id's lock, which ctx's call path holds.
func withTokensAtRelease(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, tokensAtReleaseKey{}, id)
}

// releaseCarrying is the hold whose release carries the sign-in's token
// write (withTokensAtRelease), or nil when the write goes at once.
func (si *signIns) releaseCarrying(ctx context.Context) *runstore.Hold {
	id, _ := ctx.Value(tokensAtReleaseKey{}).(string)
	if id == "" || !kv.InOneTrip(si.tokens.kv) {
		return nil
	}
	return runstore.Of(ctx, id)
}

// storeSignInAtRelease sends the sign-in's token write first in h's
// release, and then reads it: a store failure is written again
// (writeSignIn), and the completion fails when that fails too.
func (si *signIns) storeSignInAtRelease(h *runstore.Hold, userID, provider string, ts *TokenSet, key string) error {
	w, err := si.tokens.signInWrite(userID, provider, ts, key)
	if err != nil {
		return err
	}
	h.WriteAtRelease(func(ctx context.Context) error {
		wctx, cancel := si.tokens.grantWriteContext(ctx)
		err := w.landed(wctx)
		cancel()
		if !errors.Is(err, ErrStoreUnavailable) {
			return err
		}
		si.log.WarnContext(ctx, "oauthflow: a sign-in's tokens could not be written; the write is tried again",
			"provider", provider, "error", logSafeError(err))
		return si.writeSignIn(ctx, userID, provider, ts, key)
	}, w.ops...)
	return nil
}

func supportsPKCE(p Provider) bool {
	if s, ok := p.(pkceSupporter); ok {
		return s.SupportsPKCE()
	}
	return true
}

// issuerOf is the issuer p's sign-ins are sent to, and whether a callback
// may omit iss (the server does not advertise RFC 9207).
func issuerOf(p Provider) (issuer string, optional bool) {
	if r, ok := p.(issuerReporter); ok {
		issuer, advertised := r.AuthorizationIssuer()
		return issuer, issuer != "" && !advertised
	}
	if i, ok := p.(issuerNamer); ok {
		return i.Issuer(), false
	}
	return "", false
}

// issuerNamer is the older form of AuthorizationIssuer: the issuer alone, taken
// as advertised.
type issuerNamer interface{ Issuer() string }

func displayName(p Provider) string {
	if d, ok := p.(displayNamer); ok && d.DisplayName() != "" {
		return d.DisplayName()
	}
	return p.ProviderID()
}

// Who each connection is: after a sign-in the library asks the provider once
// which account the new grant is for, so that an app shows "Connected as
// octocat" and an agent picks the right account. The answer is kept in the
// token record (StoredTokens.Account) and listed by Connections; it is never
// read on a token read, and a failure to learn it never fails the sign-in.

// The optional methods of a Provider for what a sign-in keeps (documented on
// [Provider]), each as the interface its type assertion names.
type (
	accountReader interface {
		ReadAccount(ctx context.Context, client *http.Client) (string, error)
	}
	accountAnswerer interface{ ReadsAccount() bool }
	callbackFielder interface{ CallbackFields() []string }
)

// Bounds of what a sign-in keeps.
const (
	accountTimeout  = 5 * time.Second // the user-info call after a sign-in
	maxCallbackKept = 8               // extra callback parameters carried to the exchange
)

// readAccount fills ts.Account from the provider's user-info endpoint with
// the new access token (bound to key when the answer says DPoP), unless the
// answer named it already. It waits at most accountTimeout, and a failure
// is logged and otherwise ignored.
func (si *signIns) readAccount(ctx context.Context, p Provider, ts *TokenSet, key string) {
	r, ok := p.(accountReader)
	if !ok || ts.Account != "" {
		return
	}
	if a, ok := p.(accountAnswerer); ok && !a.ReadsAccount() {
		return // no endpoint to call: nothing of the call is built
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), accountTimeout)
	defer cancel()
	tok := validRead{access: ts.AccessToken}
	if isDPoP(ts.TokenType) {
		tok.key = key
	}
	base := http.DefaultTransport
	if si.httpClient != nil && si.httpClient.Transport != nil {
		base = si.httpClient.Transport
	}
	client := &http.Client{Timeout: accountTimeout, Transport: &grantTransport{
		t: &bearerTransport{src: &storeTokenSource{s: si.tokens}, base: base}, tok: tok},
		// A redirect is not followed: the token is for the endpoint's own
		// origin, and a page elsewhere does not speak for the provider.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	account, err := callReadAccount(ctx, r, client)
	if err != nil {
		si.log.WarnContext(ctx, "oauthflow: the account of a new connection could not be read; it is shown without one",
			"provider", p.ProviderID(), "error", logSafeError(err))
		return
	}
	ts.Account = account
}

func callReadAccount(ctx context.Context, r accountReader, c *http.Client) (account string, err error) {
	defer errs.Recover(&err, "provider ReadAccount")
	return r.ReadAccount(ctx, c)
}

// grantTransport sends each request with one grant's access token (its
// client follows no redirect).
type grantTransport struct {
	t   *bearerTransport
	tok validRead
}

func (g *grantTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return g.t.send(req, req.Body, g.tok)
}

// keepCallbackFields adds to ts.Metadata the callback parameters given: the
// ones its provider declares, which the callback picked (declaredFields).
func keepCallbackFields(ts *TokenSet, given map[string]string) {
	for name, v := range given {
		if ts.Metadata == nil {
			ts.Metadata = map[string]string{}
		}
		ts.Metadata[name] = v
	}
}

// signInKept is what a completion learned besides the tokens, for the
// prompt: the account, as stored.
type signInKept struct{ account string }

type signInKeptKey struct{}

func withSignInKept(ctx context.Context, k *signInKept) context.Context {
	return context.WithValue(ctx, signInKeptKey{}, k)
}

// keepAccount tells ctx's completion the account stored with the tokens.
func keepAccount(ctx context.Context, account string) {
	if k, ok := ctx.Value(signInKeptKey{}).(*signInKept); ok {
		k.account = showable(account, maxAccountLen)
	}
}

type callbackFieldsKey struct{}

// withCallbackFields hands the callback's extra parameters to the exchange.
func withCallbackFields(ctx context.Context, fields map[string]string) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	return context.WithValue(ctx, callbackFieldsKey{}, fields)
}

func callbackFieldsOf(ctx context.Context) map[string]string {
	f, _ := ctx.Value(callbackFieldsKey{}).(map[string]string)
	return f
}

// maxReturnToLen bounds a sign-in's return address.
const maxReturnToLen = 2048

// mayReturnTo reports whether a sign-in with p may send the browser back to
// returnTo: an absolute http or https URL with no user info, on the origin
// of p's redirect URI (the API's own) or one of Config.FrontendOrigins.
func (si *signIns) mayReturnTo(p Provider, returnTo string) bool {
	u, err := url.Parse(returnTo)
	if err != nil || len(returnTo) > maxReturnToLen || u.User != nil || u.Host == "" || u.Scheme != "https" && u.Scheme != "http" {
		return false
	}
	origin := u.Scheme + "://" + u.Host
	if si.returnOrigin != nil && si.returnOrigin(origin) {
		return true
	}
	api, ok := redirectOrigin(p)
	return ok && origin == api
}

// redirectURI is the redirect URI p puts in its authorization URL; ok is
// false for a provider without one (the device grant only) or one whose URL
// does not parse.
func redirectURI(p Provider) (u *url.URL, ok bool) {
	defer func() {
		if recover() != nil {
			u, ok = nil, false
		}
	}()
	auth, err := url.Parse(p.BuildAuthURL(nil, "probe"))
	if err != nil {
		return nil, false
	}
	r, err := url.Parse(auth.Query().Get("redirect_uri"))
	if err != nil || r.Path == "" {
		return nil, false
	}
	return r, true
}

// redirectPath is the path of p's redirect URI.
func redirectPath(p Provider) (string, bool) {
	r, ok := redirectURI(p)
	if !ok {
		return "", false
	}
	return r.Path, true
}

// redirectOrigin is the origin of p's redirect URI: the API's own.
func redirectOrigin(p Provider) (string, bool) {
	r, ok := redirectURI(p)
	if !ok || r.Host == "" {
		return "", false
	}
	return r.Scheme + "://" + r.Host, true
}
