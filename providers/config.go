package providers

import (
	"crypto"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/outbound"
	"golang.org/x/oauth2"
)

// Credentials are what the host application registered with the provider.
// Params fills the templated parts of a catalog entry (tenant, domain, shop,
// realm, base_url, ...) and selects documented variants (Slack's token_type).
type Credentials struct {
	ClientID     string
	ClientSecret string // empty for a public client (PKCE, no secret), and for a client with a SigningKey
	RedirectURL  string // may be empty for a provider used only for the device grant (Config.DeviceAuthURL)
	Params       map[string]string

	// SigningKey makes the client authenticate with private_key_jwt (RFC
	// 7523 §2.2) instead of a secret: every request in which it
	// authenticates (code exchange, refresh, pushed authorization,
	// revocation, device authorization and device token) carries client_id
	// and a JWT signed with this key, a new one for each request, issued by
	// and about ClientID for the provider's Config.Issuer and good for a
	// minute. A P-256 ECDSA key signs ES256, an RSA key PS256, an Ed25519
	// key EdDSA. Register its public key (or a JWKS URL serving it) with the
	// provider. A provider with a SigningKey needs Config.Issuer and is
	// refused with a ClientSecret or JSONTokenRequest. Never serialized.
	SigningKey crypto.Signer `json:"-"`
	// KeyID is the kid of the assertions' header: the key's ID among those
	// registered with the provider; "" sends none.
	KeyID string `json:"-"`
	// SigningAlg names the algorithm of the assertions when it is not the
	// key's own: "RS256" for an RSA key at a provider that takes no PS256
	// (FAPI 2.0 does not allow RS256). "" follows the key.
	SigningAlg string `json:"-"`
}

// AuthStyle says how the client authenticates at the token and revocation
// endpoints.
type AuthStyle string

const (
	// AuthStyleAuto (the zero value) lets golang.org/x/oauth2 try HTTP Basic
	// first and the form body second; it costs a second request on every
	// failure, so catalog entries always name a style.
	AuthStyleAuto AuthStyle = ""
	// AuthStyleHeader sends HTTP Basic with the client ID and secret each
	// form-urlencoded first (RFC 6749 §2.3.1).
	AuthStyleHeader AuthStyle = "header"
	// AuthStyleParams sends client_id and client_secret in the form body.
	AuthStyleParams AuthStyle = "params"
)

// PKCE says whether the provider accepts (or demands) a PKCE S256 challenge.
type PKCE string

const (
	// PKCEDefault (the zero value) means supported: servers that do not know
	// PKCE ignore its parameters (RFC 7636 §5).
	PKCEDefault     PKCE = ""
	PKCESupported   PKCE = "supported"
	PKCERequired    PKCE = "required"
	PKCEUnsupported PKCE = "unsupported"
)

// Config describes one provider: endpoints, defaults and quirks. The zero
// value of every optional field means the RFC 6749 behaviour.
type Config struct {
	ID            string `json:"id"`
	DisplayName   string `json:"display_name"`
	AuthURL       string `json:"auth_url"`
	TokenURL      string `json:"token_url"`
	RefreshURL    string `json:"refresh_url,omitempty"`    // refresh grant endpoint when it differs from TokenURL (Figma)
	RevocationURL string `json:"revocation_url,omitempty"` // RFC 7009; empty: RevokeToken returns ErrRevocationUnsupported
	// DeviceAuthURL is the RFC 8628 device authorization endpoint; empty:
	// the provider offers no device sign-in (SupportsDeviceAuth is false).
	DeviceAuthURL string `json:"device_auth_url,omitempty"`
	// PushedAuthURL is the pushed authorization request endpoint (RFC 9126).
	// With it every sign-in pushes its authorization request there first
	// (PushAuthorization), and the browser is sent with client_id and the
	// answer's request_uri alone; a push that fails fails the sign-in, never
	// falling back to a request in the URL. Discover sets it from
	// pushed_authorization_request_endpoint.
	PushedAuthURL string `json:"pushed_auth_url,omitempty"`
	// RequirePAR says the server refuses authorization requests that were
	// not pushed (require_pushed_authorization_requests, RFC 9126 §5). A
	// provider with it and no PushedAuthURL is refused when built.
	RequirePAR bool `json:"require_par,omitempty"`
	// Profile is the security profile the provider keeps to (ProfileFAPI2):
	// its rules are checked when the provider is built, and one broken is
	// refused with ErrProfile, naming the rule. Discover sets it when the
	// server's metadata describes the profile, or as WithProfile says.
	Profile Profile `json:"profile,omitempty"`
	// Issuer is the value the server sends as the RFC 9207 "iss" parameter.
	// Set it only for servers that send it: a non-empty Issuer makes the
	// callback require and compare iss, unless IssOptional.
	Issuer string `json:"issuer,omitempty"`
	// IssOptional says the server at Issuer does not advertise RFC 9207: a
	// callback without iss is accepted, one naming another issuer is still
	// refused (the mix-up defence for servers that do not send iss, when
	// another one does). Issuer() is then "" and AuthorizationIssuer tells both.
	IssOptional    bool              `json:"iss_optional,omitempty"`
	Scopes         []string          `json:"scopes,omitempty"`          // default scopes
	ScopeSeparator string            `json:"scope_separator,omitempty"` // "" means " "
	AuthStyle      AuthStyle         `json:"auth_style,omitempty"`
	PKCE           PKCE              `json:"pkce,omitempty"`
	AuthParams     map[string]string `json:"auth_params,omitempty"` // extra authorize parameters
	// TokenParams are extra parameters of every token request, code exchange
	// and refresh alike (RFC 8707's resource, say).
	TokenParams map[string]string `json:"token_params,omitempty"`
	// JSONTokenRequest sends token requests as a JSON object instead of a
	// form (Notion documents JSON).
	JSONTokenRequest bool `json:"json_token_request,omitempty"`
	// TokenTypes lists token_type values accepted besides "bearer" (any case)
	// and an absent token_type; Slack answers "bot" and "user".
	TokenTypes []string `json:"token_types,omitempty"`
	// DPoP binds each grant to a key of its own (RFC 9449): the code
	// exchange and refreshes carry a proof, and a "DPoP" token_type is
	// accepted. Discover sets it when the server's metadata lists ES256 in
	// dpop_signing_alg_values_supported.
	DPoP bool `json:"dpop,omitempty"`
	// UserTokenField names an object in the token response that carries a
	// user token beside the top-level one (Slack: "authed_user").
	UserTokenField string `json:"user_token_field,omitempty"`
	// UserScopeParam is the authorize parameter that carries user scopes
	// when UserToken is set (Slack: "user_scope").
	UserScopeParam string `json:"user_scope_param,omitempty"`
	// UserToken selects the nested user token: requested scopes go into
	// UserScopeParam and the token under UserTokenField becomes AccessToken.
	UserToken bool `json:"-"`
	// DeadGrantCodes lists the provider's own error codes that mean the
	// refresh token will never work again, besides RFC 6749 invalid_grant
	// (GitHub: bad_refresh_token). The token store deletes the record when a
	// refresh fails with one, so a code that can also mean a misconfigured
	// client (invalid_client, ...) is refused. Catalog entries list theirs,
	// each with its documentation, under "dead_grants".
	DeadGrantCodes []string `json:"-"`
	// RefreshLimit is the bound the provider documents on the app's token
	// requests: how many at once, how many a second. Refresh ahead holds the
	// provider's refreshes to it unless the app sets its own in
	// oauthflow.Config.RefreshLimits; zero documents none. Catalog entries
	// carry theirs, each with the page that documents it, under
	// "refresh_limit". A negative figure is refused.
	RefreshLimit oauthflow.RefreshLimit `json:"-"`
	// ErrorCodeField names the JSON field that carries the error code of a
	// failed answer without an RFC 6749 "error" (HubSpot: "status");
	// ErrorDescriptionField the one that carries its text (HubSpot: "message").
	ErrorCodeField        string `json:"error_code_field,omitempty"`
	ErrorDescriptionField string `json:"error_description_field,omitempty"`

	// ClientIDParam and ClientSecretParam rename client_id and
	// client_secret in the authorize URL and in every request whose form
	// carries them (TikTok: "client_key").
	ClientIDParam     string `json:"client_id_param,omitempty"`
	ClientSecretParam string `json:"client_secret_param,omitempty"`
	// RefreshParams are extra parameters of refresh requests only, after
	// TokenParams.
	RefreshParams map[string]string `json:"refresh_params,omitempty"`
	// TokenPath is the dotted path of the object that holds the token
	// fields, when the answer nests them ("data"); errors are read at the
	// top level, then inside it.
	TokenPath string `json:"token_path,omitempty"`
	// ExpiresField names the field that says when the access token
	// expires, when it is not expires_in; ExpiresUnit says how: "s" (the
	// default) a lifetime in seconds, "unix" an absolute Unix time in
	// seconds (Squarespace), "rfc3339" an absolute time as text (Square).
	ExpiresField string `json:"expires_field,omitempty"`
	ExpiresUnit  string `json:"expires_unit,omitempty"`
	// KeepFields are fields of the token answer the provider's API needs
	// later (Salesforce "instance_url", Pipedrive "api_domain"): they are
	// kept with the tokens (TokenSet.Metadata) and shown in Connection.Metadata.
	// CallbackFields are the callback's query parameters kept likewise
	// (QuickBooks "realmId").
	KeepFields     []string `json:"keep_fields,omitempty"`
	CallbackFields []string `json:"callback_fields,omitempty"`
	// UserinfoURL is the provider's endpoint that says who signed in, read
	// once after each sign-in with the new token (with UserinfoMethod, GET
	// by default, and UserinfoHeaders); AccountField is the dotted path of
	// the answer's field that names the account ("login", "email").
	// IDTokenField is instead the ID token's claim that names it, for a
	// provider that answers with an OpenID Connect ID token. Either fills
	// Connection.Account.
	UserinfoURL     string            `json:"userinfo_url,omitempty"`
	UserinfoMethod  string            `json:"userinfo_method,omitempty"`
	UserinfoHeaders map[string]string `json:"userinfo_headers,omitempty"`
	AccountField    string            `json:"account_field,omitempty"`
	IDTokenField    string            `json:"id_token_field,omitempty"`
}

// Option adjusts a provider at construction.
type Option func(*options)

type options struct {
	client    *http.Client
	scopes    []string
	authStyle AuthStyle
	profile   Profile
}

// WithHTTPClient sets the client used for every token, revocation and
// discovery request. Without it each provider gets its own client with a
// 15 second timeout.
func WithHTTPClient(c *http.Client) Option {
	return func(o *options) { o.client = c }
}

// WithScopes replaces the provider's default scopes.
func WithScopes(scopes ...string) Option {
	return func(o *options) { o.scopes = slices.Clone(scopes) }
}

// WithAuthStyle sets how the client authenticates at the token and revocation
// endpoints, overriding the catalog's or the discovered choice: a server that
// enforces the method a client registered (client_secret_post, say) needs it.
func WithAuthStyle(s AuthStyle) Option {
	return func(o *options) { o.authStyle = s }
}

// WithProfile makes the provider keep to a security profile (ProfileFAPI2),
// whatever its configuration or the server's metadata says: Discover then
// pushes every sign-in even to a server that does not require it, and a
// configuration that breaks a rule is refused.
func WithProfile(p Profile) Option {
	return func(o *options) { o.profile = p }
}

// DefaultTimeout bounds each request of a provider built without WithHTTPClient.
const DefaultTimeout = 15 * time.Second

// MaxIdleConnsPerHost is how many idle connections the transport of a
// provider built without WithHTTPClient keeps to one provider host.
// http.DefaultTransport keeps 2: under a burst of callbacks every exchange
// past the second opens a new TCP and TLS connection to the token endpoint
// and closes it again.
const MaxIdleConnsPerHost = outbound.MaxIdleConnsPerHost

func collect(opts []Option) options {
	var o options
	for _, opt := range opts {
		if opt != nil {
			opt(&o)
		}
	}
	if o.client == nil {
		o.client = outbound.Client(DefaultTimeout)
	}
	return o
}

func (c *Config) validate() error {
	if c.ID == "" {
		return invalid("empty provider ID")
	}
	required := [][2]string{{"AuthURL", c.AuthURL}, {"TokenURL", c.TokenURL}}
	optional := [][2]string{{"RefreshURL", c.RefreshURL}, {"RevocationURL", c.RevocationURL}, {"DeviceAuthURL", c.DeviceAuthURL},
		{"UserinfoURL", c.UserinfoURL}, {"PushedAuthURL", c.PushedAuthURL}}
	for _, f := range required {
		if err := checkURL(f[0], f[1]); err != nil {
			return err
		}
	}
	for _, f := range optional {
		if f[1] == "" {
			continue
		}
		if err := checkURL(f[0], f[1]); err != nil {
			return err
		}
	}
	if c.RequirePAR && c.PushedAuthURL == "" {
		return invalid("%s: the server requires pushed authorization requests (RFC 9126 §5) and the provider has no PushedAuthURL", c.ID)
	}
	if err := c.validateEnums(); err != nil {
		return err
	}
	if c.RefreshLimit.Concurrency < 0 || c.RefreshLimit.PerSecond < 0 {
		return invalid("%s: a negative refresh limit", c.ID)
	}
	return c.validateDeadGrantCodes()
}

func (c *Config) validateEnums() error {
	switch c.AuthStyle {
	case AuthStyleAuto, AuthStyleHeader, AuthStyleParams:
	default:
		return invalid("%s: unknown auth style %q", c.ID, c.AuthStyle)
	}
	switch c.PKCE {
	case PKCEDefault, PKCESupported, PKCERequired, PKCEUnsupported:
	default:
		return invalid("%s: unknown PKCE mode %q", c.ID, c.PKCE)
	}
	if c.UserToken && c.UserTokenField == "" {
		return invalid("%s: user token selected but the provider has no nested user token", c.ID)
	}
	switch c.ExpiresUnit {
	case "", "s", "unix", "rfc3339":
	default:
		return invalid("%s: unknown expires unit %q", c.ID, c.ExpiresUnit)
	}
	switch c.UserinfoMethod {
	case "", http.MethodGet, http.MethodPost:
	default:
		return invalid("%s: userinfo method %q is neither GET nor POST", c.ID, c.UserinfoMethod)
	}
	if (c.UserinfoURL == "") != (c.AccountField == "") {
		return invalid("%s: userinfo_url and account_field go together", c.ID)
	}
	return nil
}

// notDeadGrant are RFC 6749 error codes that never prove a grant dead: most
// of them also answer a misconfigured client, and deleting every user's
// tokens over a rotated secret would be a disaster. invalid_grant is always
// dead and need not be listed.
var notDeadGrant = []string{"invalid_request", "invalid_client", "unauthorized_client", "invalid_scope",
	"unsupported_grant_type", "unsupported_response_type", "access_denied", "server_error", "temporarily_unavailable"}

func (c *Config) validateDeadGrantCodes() error {
	for _, code := range c.DeadGrantCodes {
		if strings.TrimSpace(code) == "" {
			return invalid("%s: empty dead-grant code", c.ID)
		}
		if slices.ContainsFunc(notDeadGrant, func(s string) bool { return strings.EqualFold(s, code) }) {
			return invalid("%s: %q does not prove a grant dead", c.ID, code)
		}
	}
	return nil
}

// validate checks the credentials for cfg. Only a provider with a device
// authorization endpoint may go without a redirect URL: it can sign users
// in with the device grant alone, and its BuildAuthURL then builds nothing.
func (c Credentials) validate(cfg Config) error {
	if c.ClientID == "" {
		return invalid("%s: empty client ID", cfg.ID)
	}
	if err := c.validateKey(cfg); err != nil {
		return err
	}
	if c.RedirectURL == "" && cfg.DeviceAuthURL != "" {
		return nil
	}
	return checkURL("RedirectURL", c.RedirectURL)
}

// checkURL accepts absolute http and https URLs without a fragment.
func checkURL(name, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return invalid("%s %q: %w", name, raw, err)
	}
	if (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.Fragment != "" {
		return invalid("%s %q: want an absolute http(s) URL without fragment", name, raw)
	}
	return nil
}

func (c *Config) separator() string {
	if c.ScopeSeparator == "" {
		return " "
	}
	return c.ScopeSeparator
}

func (s AuthStyle) oauth2() oauth2.AuthStyle {
	switch s {
	case AuthStyleHeader:
		return oauth2.AuthStyleInHeader
	case AuthStyleParams:
		return oauth2.AuthStyleInParams
	default:
		return oauth2.AuthStyleAutoDetect
	}
}

// acceptsTokenType reports whether t names a bearer token for this provider.
// An absent token_type is accepted (Shopify sends none); "bearer" is compared
// case-insensitively (RFC 6749 §5.1 says the value is case-insensitive).
func (c *Config) acceptsTokenType(t string) bool {
	if t == "" || strings.EqualFold(t, "bearer") || c.DPoP && strings.EqualFold(t, "DPoP") {
		return true
	}
	return slices.ContainsFunc(c.TokenTypes, func(s string) bool { return strings.EqualFold(s, t) })
}
