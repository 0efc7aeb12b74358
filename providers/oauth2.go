package providers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/clientauth"
)

// OAuth2 is an oauthflow.Provider over golang.org/x/oauth2. Besides the
// Provider methods it has the optional methods oauthflow looks for (listed
// on [oauthflow.Provider]): SupportsPKCE, AuthorizationIssuer, RevokeToken,
// DisplayName, DeadGrantCodes, RefreshLimit, ExchangeCodeVerifier, UsesDPoP,
// ReadAccount, ReadsAccount, CallbackFields, the device authorization grant's SupportsDeviceAuth,
// DeviceAuth and DeviceToken, and the pushed authorization requests'
// PushesAuthorization and PushAuthorization. It is safe for concurrent use; build it with
// NewOAuth2, New, FromEnv or Discover.
type OAuth2 struct {
	cfg     Config
	token   *oauth2.Config // code exchange
	refresh *oauth2.Config // refresh grant (TokenURL, or RefreshURL when set)
	client  *http.Client
	signer  *clientauth.Signer // the client's assertions (Credentials.SigningKey); nil without a key
}

var (
	_ oauthflow.Provider = (*OAuth2)(nil)
	_ oauthflow.Revoker  = (*OAuth2)(nil)
)

// NewOAuth2 builds a provider from a plain config and the app's credentials.
// It checks both once; the error wraps ErrInvalidConfig.
func NewOAuth2(cfg Config, c Credentials, opts ...Option) (*OAuth2, error) {
	o := collect(opts)
	if o.profile != ProfileNone {
		cfg.Profile = o.profile
	}
	applyProfile(&cfg)
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if err := c.validate(cfg); err != nil {
		return nil, err
	}
	if err := checkProfile(&cfg, c); err != nil {
		return nil, err
	}
	signer, err := c.signer(cfg)
	if err != nil {
		return nil, err
	}
	cfg = cloneConfig(cfg)
	if o.scopes != nil {
		cfg.Scopes = o.scopes
	}
	if o.authStyle != "" {
		cfg.AuthStyle = o.authStyle
	}
	if cfg.DisplayName == "" {
		cfg.DisplayName = cfg.ID
	}
	refreshURL := cfg.TokenURL
	if cfg.RefreshURL != "" {
		refreshURL = cfg.RefreshURL
	}
	return &OAuth2{
		cfg:     cfg,
		token:   oauthConfig(cfg, c, cfg.TokenURL),
		refresh: oauthConfig(cfg, c, refreshURL),
		client:  o.client,
		signer:  signer,
	}, nil
}

// oauthConfig maps cfg to x/oauth2. A public client (no secret) always sends
// client_id in the form: an HTTP Basic header with an empty password is
// refused by servers that registered the client for "none".
func oauthConfig(cfg Config, c Credentials, tokenURL string) *oauth2.Config {
	style := cfg.AuthStyle.oauth2()
	if c.ClientSecret == "" {
		style = oauth2.AuthStyleInParams
	}
	return &oauth2.Config{
		ClientID:     c.ClientID,
		ClientSecret: c.ClientSecret,
		RedirectURL:  c.RedirectURL,
		Endpoint: oauth2.Endpoint{
			AuthURL:   cfg.AuthURL,
			TokenURL:  tokenURL,
			AuthStyle: style,
		},
	}
}

func cloneConfig(c Config) Config {
	c.Scopes = slices.Clone(c.Scopes)
	c.TokenTypes = slices.Clone(c.TokenTypes)
	c.AuthParams = maps.Clone(c.AuthParams)
	c.TokenParams = maps.Clone(c.TokenParams)
	c.DeadGrantCodes = slices.Clone(c.DeadGrantCodes)
	c.RefreshParams = maps.Clone(c.RefreshParams)
	c.KeepFields = slices.Clone(c.KeepFields)
	c.CallbackFields = slices.Clone(c.CallbackFields)
	c.UserinfoHeaders = maps.Clone(c.UserinfoHeaders)
	return c
}

// ProviderID returns the provider's ID ("github").
func (p *OAuth2) ProviderID() string { return p.cfg.ID }

// DisplayName returns the provider's human name ("GitHub").
func (p *OAuth2) DisplayName() string { return p.cfg.DisplayName }

// DefaultScopes returns a copy of the scopes used when none are requested.
func (p *OAuth2) DefaultScopes() []string { return slices.Clone(p.cfg.Scopes) }

// SupportsPKCE reports whether the caller should send a PKCE S256 challenge.
// It is true unless the provider is known not to accept PKCE.
func (p *OAuth2) SupportsPKCE() bool { return p.cfg.PKCE != PKCEUnsupported }

// UsesDPoP reports whether the provider's grants are bound to a key
// (Config.DPoP; the optional UsesDPoP of [oauthflow.Provider]).
func (p *OAuth2) UsesDPoP() bool { return p.cfg.DPoP }

// RequiresPKCE reports whether the provider refuses a flow without PKCE (X).
func (p *OAuth2) RequiresPKCE() bool { return p.cfg.PKCE == PKCERequired }

// DeadGrantCodes returns the provider's own error codes that mean the grant
// is dead besides invalid_grant (Config.DeadGrantCodes); the token store
// deletes the record when a refresh fails with one.
func (p *OAuth2) DeadGrantCodes() []string { return slices.Clone(p.cfg.DeadGrantCodes) }

// RefreshLimit returns the bound the provider documents on the app's token
// requests (Config.RefreshLimit); ok is false when it documents none. Refresh
// ahead holds the provider's refreshes to it unless the app sets its own in
// oauthflow.Config.RefreshLimits.
func (p *OAuth2) RefreshLimit() (limit oauthflow.RefreshLimit, ok bool) {
	return p.cfg.RefreshLimit, p.cfg.RefreshLimit != oauthflow.RefreshLimit{}
}

// Issuer returns the RFC 9207 issuer the authorization response must carry
// as "iss", or "" when the provider does not send one (Config.IssOptional).
func (p *OAuth2) Issuer() string {
	if p.cfg.IssOptional {
		return ""
	}
	return p.cfg.Issuer
}

// AuthorizationIssuer returns Config.Issuer and whether the server
// advertises RFC 9207 (see [oauthflow.Provider]): a callback's iss must be
// the issuer, and may be absent only when it is not advertised.
func (p *OAuth2) AuthorizationIssuer() (issuer string, advertised bool) {
	return p.cfg.Issuer, p.cfg.Issuer != "" && !p.cfg.IssOptional
}

// ClientID is the client ID the provider signs in and refreshes with.
func (p *OAuth2) ClientID() string { return p.token.ClientID }

// Config returns a copy of the provider's configuration.
func (p *OAuth2) Config() Config { return cloneConfig(p.cfg) }

// BuildAuthURL returns the authorize URL. Empty scopes mean DefaultScopes;
// scopes are joined with the provider's separator into one parameter. The
// provider's extra parameters (AuthParams) come next and opts last, so a
// caller can override them. PKCE is the caller's choice: pass
// oauth2.S256ChallengeOption(verifier) when SupportsPKCE is true. A provider
// made without a redirect URL (for the device grant only) returns "", which
// the library refuses as a sign-in.
func (p *OAuth2) BuildAuthURL(scopes []string, state string, opts ...oauth2.AuthCodeOption) string {
	if p.token.RedirectURL == "" {
		return ""
	}
	all := make([]oauth2.AuthCodeOption, 0, 1+len(p.cfg.AuthParams)+len(opts))
	if len(scopes) == 0 {
		scopes = p.cfg.Scopes
	}
	if len(scopes) > 0 {
		all = append(all, oauth2.SetAuthURLParam(p.scopeParam(), strings.Join(scopes, p.cfg.separator())))
	}
	for _, k := range slices.Sorted(maps.Keys(p.cfg.AuthParams)) {
		all = append(all, oauth2.SetAuthURLParam(k, p.cfg.AuthParams[k]))
	}
	return p.cfg.renameQuery(p.token.AuthCodeURL(state, append(all, opts...)...))
}

func (p *OAuth2) scopeParam() string {
	if p.cfg.UserToken && p.cfg.UserScopeParam != "" {
		return p.cfg.UserScopeParam
	}
	return "scope"
}

// ExchangeCode trades an authorization code for tokens. opts carry extra
// token request parameters, typically oauth2.VerifierOption(verifier).
// Every failure is a *oauthflow.ProviderError; when the provider answered,
// its Err is the *oauth2.RetrieveError where x/oauth2 produced one.
func (p *OAuth2) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	if code == "" {
		return nil, fmt.Errorf("%w: empty authorization code", oauthflow.ErrInvalidArgument)
	}
	ctx, w := p.wire(ctx)
	_, err := p.token.Exchange(ctx, code, opts...)
	return p.result(w, err)
}

// ExchangeCodeVerifier is ExchangeCode with oauth2.VerifierOption(verifier),
// or with no option when verifier is "": a sign-in's completion calls it. With
// the auth style known and a form request, it posts the form x/oauth2 would
// post, without x/oauth2's per-call work (the options applied, the request
// cloned, the answer decoded twice more); an answer that is not a token is
// replayed through ExchangeCode's own path, so every error is the one
// ExchangeCode returns.
func (p *OAuth2) ExchangeCodeVerifier(ctx context.Context, code, verifier string) (*oauthflow.TokenSet, error) {
	var opts []oauth2.AuthCodeOption
	if verifier != "" {
		opts = []oauth2.AuthCodeOption{oauth2.VerifierOption(verifier)}
	}
	style := p.token.Endpoint.AuthStyle
	if code == "" || p.cfg.JSONTokenRequest || style == oauth2.AuthStyleAutoDetect {
		return p.ExchangeCode(ctx, code, opts...)
	}
	req, err := p.codeRequest(ctx, code, verifier, style)
	if err != nil {
		return p.ExchangeCode(ctx, code, opts...) // sends nothing either: the token URL is malformed
	}
	resp, err := p.proving(ctx).Do(req)
	if err != nil {
		return nil, &oauthflow.ProviderError{ProviderID: p.cfg.ID, Err: err}
	}
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	resp.Body.Close()
	if readErr == nil {
		a := &answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body}
		if tr, err := decodeTokenResponse(a); err == nil && !failed(a.status, tr) && tr.AccessToken != "" {
			a.decoded = tr
			return p.parse(a, nil) // what ExchangeCode makes of a token answer
		}
	}
	ctx, w := p.wireTo(ctx, &replay{resp: resp, body: body, err: readErr})
	_, err = p.token.Exchange(ctx, code, opts...)
	return p.result(w, err)
}

// codeRequest is the request x/oauth2's Exchange builds for an authorization
// code, for a known auth style.
func (p *OAuth2) codeRequest(ctx context.Context, code, verifier string, style oauth2.AuthStyle) (*http.Request, error) {
	c := p.token
	v := url.Values{"grant_type": {"authorization_code"}, "code": {code}}
	if c.RedirectURL != "" {
		v.Set("redirect_uri", c.RedirectURL)
	}
	if verifier != "" {
		v.Set("code_verifier", verifier)
	}
	for k, val := range p.cfg.TokenParams {
		v.Set(k, val)
	}
	return p.clientRequest(ctx, c.Endpoint.TokenURL, v, style)
}

// clientRequest is a form POST of v to u in which the client authenticates as
// style says: HTTP Basic with the ID and secret each form-urlencoded first
// (RFC 6749 §2.3.1), or client_id and client_secret (when there is one) in
// the form. It is the request x/oauth2 builds for a known style.
func (p *OAuth2) clientRequest(ctx context.Context, u string, v url.Values, style oauth2.AuthStyle) (*http.Request, error) {
	c := p.token
	if style == oauth2.AuthStyleInParams {
		if c.ClientID != "" {
			v.Set("client_id", c.ClientID)
		}
		if c.ClientSecret != "" {
			v.Set("client_secret", c.ClientSecret)
		}
		p.cfg.renameForm(v)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, strings.NewReader(v.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if style == oauth2.AuthStyleInHeader {
		req.SetBasicAuth(url.QueryEscape(c.ClientID), url.QueryEscape(c.ClientSecret))
	}
	return req, nil
}

// knownStyle is how the client authenticates in requests this package builds
// itself: the provider's style, with the auto-detected one taken as HTTP Basic
// (which RFC 6749 §2.3.1 makes every server support), since trying both would
// send a device poll or a revocation twice. A public client's style is the
// form already (oauthConfig).
func (p *OAuth2) knownStyle() oauth2.AuthStyle {
	if s := p.token.Endpoint.AuthStyle; s != oauth2.AuthStyleAutoDetect {
		return s
	}
	return oauth2.AuthStyleInHeader
}

// replay answers one request with an answer already received: the status and
// headers as they came, the body as read (and the error that cut it short).
type replay struct {
	resp *http.Response
	body []byte
	err  error
}

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	resp := *r.resp
	resp.Request = req
	resp.Body = io.NopCloser(io.MultiReader(bytes.NewReader(r.body), errReader{r.err}))
	return &resp, nil
}

// errReader returns err, or io.EOF when err is nil.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err == nil {
		return 0, io.EOF
	}
	return 0, e.err
}

// RefreshToken uses a refresh token. When the provider answers without a new
// refresh token the returned RefreshToken is "" and the caller keeps the old one.
func (p *OAuth2) RefreshToken(ctx context.Context, refreshToken string) (*oauthflow.TokenSet, error) {
	if refreshToken == "" {
		return nil, fmt.Errorf("%w: empty refresh token", oauthflow.ErrInvalidArgument)
	}
	c, w := p.recordingWith(ctx, p.clientTransport(), p.cfg.refreshParams())
	ctx = context.WithValue(ctx, oauth2.HTTPClient, c)
	_, err := p.refresh.TokenSource(ctx, &oauth2.Token{RefreshToken: refreshToken}).Token()
	return p.result(w, err)
}

// wire installs a per-call client that records the token endpoint's answer,
// so this package, not x/oauth2, decides what the answer means.
func (p *OAuth2) wire(ctx context.Context) (context.Context, *recorder) {
	return p.wireTo(ctx, p.clientTransport())
}

// proving is the provider's client for a request in which the client
// authenticates, with a DPoP proof on each request when ctx is that of a
// grant bound to a key (oauthflow.DPoPTransport). A client assertion goes
// on under the proof, so a nonce challenge's retry carries a new one.
func (p *OAuth2) proving(ctx context.Context) *http.Client {
	return &http.Client{Transport: oauthflow.DPoPTransport(ctx, p.clientTransport()),
		Timeout: p.client.Timeout, Jar: p.client.Jar, CheckRedirect: p.client.CheckRedirect}
}

// wireTo is wire with base in place of the client's transport; a grant bound
// to a key proves it on each request, under the recorder, which so keeps the
// answer to a nonce challenge's retry.
func (p *OAuth2) wireTo(ctx context.Context, base http.RoundTripper) (context.Context, *recorder) {
	c, w := p.recording(ctx, base)
	return context.WithValue(ctx, oauth2.HTTPClient, c), w
}

// recording is the client of one token call over base, and its recorder.
func (p *OAuth2) recording(ctx context.Context, base http.RoundTripper) (*http.Client, *recorder) {
	return p.recordingWith(ctx, base, p.cfg.TokenParams)
}

// recordingWith is recording with params added to the request's form.
func (p *OAuth2) recordingWith(ctx context.Context, base http.RoundTripper, params map[string]string) (*http.Client, *recorder) {
	w := &recorder{base: oauthflow.DPoPTransport(ctx, base), jsonBody: p.cfg.JSONTokenRequest, params: params, cfg: &p.cfg}
	return &http.Client{Transport: w, Timeout: p.client.Timeout, Jar: p.client.Jar, CheckRedirect: p.client.CheckRedirect}, w
}

func (p *OAuth2) result(w *recorder, libErr error) (*oauthflow.TokenSet, error) {
	if w.last == nil {
		if libErr == nil {
			libErr = ErrMalformedResponse
		}
		return nil, &oauthflow.ProviderError{ProviderID: p.cfg.ID, Err: libErr}
	}
	return p.parse(w.last, libErr)
}
