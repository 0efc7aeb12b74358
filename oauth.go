package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/oauthflow/oauthflow/internal/clip"
	"github.com/oauthflow/oauthflow/internal/errs"
	"golang.org/x/oauth2"
)

// Provider is the contract an OAuth 2.0 provider implements.
//
// ExchangeCode and RefreshToken should report the provider's answer as a
// *ProviderError or an *oauth2.RetrieveError so the library can tell a dead grant
// (invalid_grant) from a transient failure.
//
// A Provider may also have these methods, found with a type assertion:
//
//   - SupportsPKCE() bool reports whether the provider accepts PKCE (default
//     true).
//   - AuthorizationIssuer() (issuer string, advertised bool) names the issuer
//     of the authorization server the provider's sign-ins are sent to, and
//     whether that server advertises RFC 9207
//     (authorization_response_iss_parameter_supported). Each sign-in records
//     both: a callback whose iss is another issuer is refused either way (the
//     mix-up defence of RFC 9700 §4.4), and one without iss is refused when
//     the server advertises it. A provider without it that has an
//     Issuer() string method (the older form) names its issuer there, as
//     advertised: a non-empty Issuer means the callback must carry that iss.
//   - DisplayName() string gives the provider's human name ("GitHub").
//   - DeadGrantCodes() []string lists the provider's own error codes that mean
//     "this grant is dead" besides RFC 6749 invalid_grant (GitHub's
//     bad_refresh_token, HubSpot's BAD_REFRESH_TOKEN). Codes are matched
//     exactly against the error code of a *ProviderError or
//     *oauth2.RetrieveError.
//   - RefreshLimit() (limit RefreshLimit, ok bool) reports the bound the
//     provider documents on the app's token requests (Amazon Cognito's 120
//     a second, Okta's requests at once): refresh ahead keeps the provider's
//     refreshes to it unless Config.RefreshLimits has the app's own for the
//     provider, or for every provider (""). ok is false when it documents
//     none.
//   - ExchangeCodeVerifier(ctx context.Context, code, verifier string) (*TokenSet, error)
//     takes a sign-in's PKCE verifier as a string: a completion calls
//     ExchangeCodeVerifier(ctx, code, verifier) in place of
//     ExchangeCode(ctx, code, oauth2.VerifierOption(verifier)), or of
//     ExchangeCode(ctx, code) when verifier is "", and the two must answer
//     alike. An oauth2.AuthCodeOption can only be applied by x/oauth2 itself;
//     a plain verifier lets a provider post the code without x/oauth2's
//     per-call work.
//   - SignInRefused(ctx context.Context, err *ProviderError) hears of the
//     sign-ins the provider's authorization server refused at its
//     authorization page: an error redirect to the callback that passed the
//     sign-in's checks (its state, its user, its iss). The browser brings it,
//     so it is a claim, not a fact: an MCP server's provider has its token
//     endpoint confirm it before it replaces a client registration the server
//     no longer knows. The module calls it synchronously, once per refusal.
//   - ReadAccount(ctx context.Context, client *http.Client) (string, error)
//     names the account a new grant is for: it calls the provider's user-info
//     endpoint with client, which authenticates each request with the grant's
//     access token (as [TokenStore.Client] does, a proof included for a
//     DPoP-bound one). "" means the provider did not say.
//   - ReadsAccount() bool reports whether ReadAccount calls an endpoint; a
//     provider that answers false is not asked after a sign-in.
//   - CallbackFields() []string names the query parameters of the provider's
//     redirect that are kept with the tokens, in StoredTokens.Metadata
//     (QuickBooks' realmId names the company the grant is for).
//   - UsesDPoP() bool: when it is true, the provider's grants are bound to a
//     key (RFC 9449; see [DPoPTransport]). It is set by the provider's
//     configuration, or by the authorization server's metadata
//     (dpop_signing_alg_values_supported).
//   - SupportsDeviceAuth() bool reports whether the provider has a device
//     authorization endpoint. With it, DeviceAuth and DeviceToken offer the
//     device authorization grant (RFC 8628); the three come together.
//   - DeviceAuth(ctx context.Context, scopes []string) (*DeviceAuthorization, error)
//     asks the device authorization endpoint for a device code for scopes
//     (RFC 8628 §3.1, §3.2).
//   - DeviceToken(ctx context.Context, deviceCode string) (*TokenSet, error)
//     asks the token endpoint once for the tokens of deviceCode (RFC 8628
//     §3.4). While the user has not acted it fails with a *ProviderError
//     whose Code is "authorization_pending" or "slow_down"; "access_denied"
//     and "expired_token" end the sign-in (§3.5).
//   - PushesAuthorization() bool reports whether the provider's sign-ins are
//     pushed (RFC 9126): its server has a pushed authorization request
//     endpoint. With it, PushAuthorization builds every sign-in's URL in
//     place of BuildAuthURL; the two come together.
//   - PushAuthorization(ctx context.Context, scopes []string, state string, opts ...oauth2.AuthCodeOption) (authURL string, err error)
//     sends the authorization request BuildAuthURL(scopes, state, opts...)
//     would put in its URL to the pushed authorization request endpoint, in
//     a POST that authenticates the client as its token requests do, and
//     returns the URL the browser is sent to, which carries client_id and
//     the answer's request_uri only. Its requests go through
//     [DPoPTransport] with ctx: for a sign-in bound to a key, the push proves
//     the key, which binds the code to it (RFC 9449 §10.1). A sign-in's
//     request is pushed each time its URL is built (build_oauth_url, the
//     "oauth" workflow, POST /api/v1/oauth/start), never reused: a
//     request_uri is good for one use. A failure, reported as a
//     *ProviderError, fails the sign-in with a message for the user;
//     nothing falls back to BuildAuthURL.
//
// A provider that can revoke a token is also a [Revoker].
type Provider interface {
	ProviderID() string
	DefaultScopes() []string
	BuildAuthURL(scopes []string, state string, opts ...oauth2.AuthCodeOption) string
	ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*TokenSet, error)
	RefreshToken(ctx context.Context, refreshToken string) (*TokenSet, error)
}

// Revoker revokes a token (RFC 7009); DeleteTokens calls it.
type Revoker interface {
	RevokeToken(ctx context.Context, token, hint string) error
}

// The optional methods of a Provider (documented on [Provider]), each as
// the interface its type assertion names.
type (
	pkceSupporter  interface{ SupportsPKCE() bool }
	issuerReporter interface {
		AuthorizationIssuer() (issuer string, advertised bool)
	}
	displayNamer      interface{ DisplayName() string }
	deadGrantCoder    interface{ DeadGrantCodes() []string }
	verifierExchanger interface {
		ExchangeCodeVerifier(ctx context.Context, code, verifier string) (*TokenSet, error)
	}
	authorizationPusher interface {
		PushesAuthorization() bool
		PushAuthorization(ctx context.Context, scopes []string, state string, opts ...oauth2.AuthCodeOption) (authURL string, err error)
	}
)

// TokenSet is what a provider returns after an exchange or a refresh.
// ExpiresIn is in seconds; 0 means the provider reported none and the token never expires.
// TokenType is the answer's token_type when it is "DPoP" (the token is bound
// to the key whose proof the request carried, RFC 9449); "" means Bearer.
//
// Metadata are fields of the answer the provider's API needs later (a
// Salesforce instance_url), kept with the tokens; Account names the account
// the grant is for when the answer says so (an ID token's claim).
type TokenSet struct {
	AccessToken  string            `json:"accessToken"`
	RefreshToken string            `json:"refreshToken,omitempty"`
	ExpiresIn    int64             `json:"expiresIn,omitempty"`
	Scope        string            `json:"scope"`
	TokenType    string            `json:"tokenType,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Account      string            `json:"account,omitempty"`

	// AuthorizationDetails are the authorization details the provider
	// granted, as the answer's authorization_details named them (RFC 9396
	// §7): a JSON array of objects, each with its "type"; nil when the
	// answer named none. A refresh answer without them leaves the stored
	// ones as they are.
	AuthorizationDetails json.RawMessage `json:"authorizationDetails,omitempty"`
}

// StoredTokens is the persisted token record. ExpiresAt is Unix milliseconds; 0 means never.
//
// A DPoP-bound grant (TokenType "DPoP") also keeps the connection's private
// key, encoded, in DPoPKey: every instance signs its proofs with it, and it is
// sealed with the rest of the record when encryption is on. Both fields are
// absent from a Bearer grant's record, which reads as in earlier versions.
//
// Account names the account the grant is for ("octocat"), read once after
// the sign-in (a Provider's ReadAccount); Metadata keeps what the
// provider's API needs later (TokenSet.Metadata). Both are absent when there
// is nothing to keep, and a refresh keeps them.
type StoredTokens struct {
	AccessToken  string            `json:"accessToken"`
	RefreshToken string            `json:"refreshToken,omitempty"`
	ExpiresAt    int64             `json:"expiresAt"`
	Scope        string            `json:"scope"`
	TokenType    string            `json:"tokenType,omitempty"`
	DPoPKey      string            `json:"dpopKey,omitempty"`
	Account      string            `json:"account,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`

	// AuthorizationDetails are the authorization details the provider
	// granted (TokenSet.AuthorizationDetails, RFC 9396 §7), compact; absent
	// when it granted none, so a record without them is as small as before.
	// A refresh answer that names them replaces them; one that does not
	// keeps them.
	AuthorizationDetails json.RawMessage `json:"authorizationDetails,omitempty"`
}

// tokenTypeDPoP is the token_type of a DPoP-bound token (RFC 9449 §5).
const tokenTypeDPoP = "DPoP"

// Session is a pending sign-in, registered under its state when the URL is built.
// CodeVerifier is the PKCE verifier; it never leaves the server. Issuer is the
// authorization server the sign-in was sent to (a [Provider]'s
// AuthorizationIssuer): a callback's iss must be it, and may be absent only
// when IssOptional.
type Session struct {
	WorkflowID   string   `json:"workflowId"`
	UserID       string   `json:"userId"`
	Provider     string   `json:"provider"`
	CodeVerifier string   `json:"codeVerifier,omitempty"`
	Scopes       []string `json:"scopes,omitempty"`
	RedirectURL  string   `json:"redirectUrl,omitempty"`
	Issuer       string   `json:"issuer,omitempty"`
	IssOptional  bool     `json:"issOptional,omitempty"` // Issuer does not advertise RFC 9207: iss may be absent, never another
	CreatedAt    int64    `json:"createdAt,omitempty"`   // Unix milliseconds
	Binding      string   `json:"binding,omitempty"`     // SHA-256 (hex) of the secret a bound sign-in's browser holds (Config.BindSignIns)
	DPoPKey      string   `json:"dpopKey,omitempty"`     // the key the grant will be bound to (a Provider's UsesDPoP), encoded; it never leaves the server
	ReturnTo     string   `json:"returnTo,omitempty"`    // where a full-page sign-in returns once it ends (OAuthWorkflowArgs.ReturnTo), checked
	// Owner names the engine that finishes the sign-in, one of
	// [Config.SignInOwners]; "" is the module's own: the run WorkflowID, or
	// none for a sign-in built outside a workflow.
	Owner string `json:"owner,omitempty"`
	// AuthorizationDetails are the authorization details the sign-in asks
	// for (RFC 9396), checked and compact: every authorization request built
	// for it carries them as authorization_details.
	AuthorizationDetails json.RawMessage `json:"authorizationDetails,omitempty"`
}

// Sentinel errors callers branch on with errors.Is.
var (
	ErrUnknownProvider  = errors.New("oauthflow: unknown provider")
	ErrNoToken          = errors.New("oauthflow: no usable token")
	ErrSessionNotFound  = errors.New("oauthflow: sign-in session unknown, expired or already used")
	ErrForbidden        = errors.New("oauthflow: forbidden")
	ErrStoreUnavailable = errs.StoreUnavailable
	ErrInvalidArgument  = errs.InvalidArgument
)

// Errors that only the module's own pages and events report: a page shows
// the FlowError's message, an event names the case, and the error's text
// says it. A host has nothing to branch on.
var (
	errStateMismatch = errors.New("oauthflow: state mismatch")
	errCorruptRecord = errs.CorruptRecord // a stored record that does not decode
)

// ProviderError is a provider's refusal or failure, with the RFC 6749 §5.2 fields.
type ProviderError struct {
	ProviderID  string
	StatusCode  int    // HTTP status of the provider's answer; 0 when no answer came
	Code        string // RFC 6749 "error", e.g. "invalid_grant"
	Description string // "error_description"
	URI         string // "error_uri"
	Err         error  // the underlying error, if any
}

func (e *ProviderError) Error() string {
	msg := "oauthflow: provider " + e.ProviderID
	switch {
	case e.Code != "":
		msg += ": " + serverText(e.Code, maxErrorCodeLen)
		if d := serverText(e.Description, maxErrorDescriptionLen); d != "" {
			msg += ": " + d
		}
	case e.StatusCode != 0:
		msg += fmt.Sprintf(": HTTP %d", e.StatusCode)
	default:
		msg += ": request failed"
	}
	if e.Err != nil {
		msg += ": " + boundedError(e.Err) // x/oauth2's error holds the whole answer
	}
	return msg
}

func (e *ProviderError) Unwrap() error { return e.Err }

// refreshFailingError is a refresh that did not call the provider because the
// connection's refreshes have been failing and its next attempt is not due:
// the record is kept, try again after NextAttempt. It is transient, never
// ErrNoToken.
type refreshFailingError struct {
	ProviderID  string
	Attempts    int       // failed refreshes in a row
	LastError   string    // the last failure, as logged
	NextAttempt time.Time // when a refresh may call the provider again
}

func (e *refreshFailingError) Error() string {
	return fmt.Sprintf("oauthflow: refresh %s token: failed %d times in a row, next attempt at %s: %s",
		e.ProviderID, e.Attempts, e.NextAttempt.UTC().Format(time.RFC3339), e.LastError)
}

// IsGrantDead reports whether err says the grant is gone for good (RFC 6749
// invalid_grant): the refresh token or code will never work again and the user
// must sign in anew.
func IsGrantDead(err error) bool {
	return providerCode(err) == "invalid_grant"
}

// IsTransient reports whether err is worth retrying later: a network failure, a
// timeout, HTTP 408, 429 or 5xx from the provider, its temporarily_unavailable
// (RFC 6749 §4.1.2.1, §5.2 in practice), an unavailable store, or a refresh
// that did not call the provider because the connection's refreshes have
// been failing and its next attempt is not due ([TokenStore.Connections]
// shows it HealthRefreshFailing, with the NextAttempt).
func IsTransient(err error) bool {
	if err == nil || IsGrantDead(err) {
		return false
	}
	var failing *refreshFailingError
	if errors.Is(err, ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.As(err, &failing) {
		return true
	}
	if status := providerStatus(err); status == http.StatusRequestTimeout || status == http.StatusTooManyRequests || status >= 500 {
		return true
	}
	if providerCode(err) == "temporarily_unavailable" {
		return true
	}
	var pe *ProviderError
	if errors.As(err, &pe) && pe.Code == "" && pe.StatusCode == 0 && pe.Err != nil && !errors.Is(pe.Err, errNoAccessToken) {
		return true // no answer at all: the network
	}
	var ne net.Error
	return errors.As(err, &ne)
}

// grantDead reports whether err, returned by p, says the grant is dead:
// invalid_grant, or one of the codes p declares through DeadGrantCodes.
// Nothing else is: a rotated client secret answering invalid_client must not
// delete every user's tokens.
func grantDead(p Provider, err error) bool {
	if IsGrantDead(err) {
		return true
	}
	dc, ok := p.(deadGrantCoder)
	code := providerCode(err)
	return ok && code != "" && slices.Contains(dc.DeadGrantCodes(), code)
}

func providerCode(err error) string {
	var pe *ProviderError
	if errors.As(err, &pe) && pe.Code != "" {
		return pe.Code
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		return re.ErrorCode
	}
	return ""
}

func providerStatus(err error) int {
	var pe *ProviderError
	if errors.As(err, &pe) && pe.StatusCode != 0 {
		return pe.StatusCode
	}
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		return re.Response.StatusCode
	}
	return 0
}

// errNoAccessToken is a provider answer that carries no access token.
var errNoAccessToken = errors.New("the answer has no access token")

// signInRefusalHearer is a Provider with the optional SignInRefused method
// (documented on [Provider]).
type signInRefusalHearer interface {
	SignInRefused(ctx context.Context, err *ProviderError)
}

// tellRefused tells p, when it hears them, of a sign-in its authorization
// page refused with code and description.
func tellRefused(ctx context.Context, p Provider, code, description string) {
	if h, ok := p.(signInRefusalHearer); ok && code != "" {
		h.SignInRefused(ctx, redirectError(p.ProviderID(), code, description, ""))
	}
}

// publicMessage is the text of err that may be shown to a user: the message of
// a *FlowError in its chain, or a generic sentence. Internal error text never
// reaches a user.
func publicMessage(err error) string {
	var fe *FlowError
	if errors.As(err, &fe) && fe.Message != "" {
		return fe.Message
	}
	return "Something went wrong. Please try again."
}

// FlowError is a failure with a message fit for the user who signs in.
type FlowError struct {
	Message string
	Err     error
}

// Error is the cause's text: Message is for the user's page, and stays out
// of logs and wrapped errors. Without a cause it is Message.
func (e *FlowError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	return e.Err.Error()
}

func (e *FlowError) Unwrap() error { return e.Err }

// Bounds of the error text a provider or an authorization server chooses
// (RFC 6749 §5.2 error, error_description, error_uri) wherever the library
// keeps, logs or shows it, as the callback's own parameters are bounded
// (maxParamLen): real codes are a few words, real descriptions a sentence.
const (
	maxErrorCodeLen        = clip.ErrorCode
	maxErrorDescriptionLen = clip.ErrorDescription
	maxErrorURILen         = clip.ErrorURI
	maxLoggedErrorLen      = 1024 // an error described for a log line or a health record
)

// serverText is s, text a provider or a server chose, as the library keeps,
// logs or shows it: without the characters that would not show as
// themselves (unshowable: a terminal acts on a control, a bidi override
// reorders what a person reads), at most max bytes.
func serverText(s string, max int) string {
	if len(s) > 4*max { // what is cut anyway is not scanned
		s = s[:4*max]
	}
	return showable(s, max)
}

// unshowable reports whether r would not be shown as itself in a terminal
// or a page: a control character (C0 or C1, which a terminal may act on) or
// a format character (a bidi override that reorders what follows, a
// zero-width one), which could make a link read as another site's.
func unshowable(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// showable is s cut to max bytes (at a rune's start) without the characters
// that would not show as themselves (unshowable), trimmed.
func showable(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unshowable(r) {
			return -1
		}
		return r
	}, s)
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "")
	}
	return strings.TrimSpace(s)
}

// boundedError is err's text on one line, bounded and filtered (serverText):
// an error may carry a provider's answer.
func boundedError(err error) string {
	return serverText(strings.ReplaceAll(err.Error(), "\n", "; "), maxLoggedErrorLen)
}

// redirectError is the error a provider's redirect reported (RFC 6749
// §4.1.2.1), its text bounded and filtered.
func redirectError(provider, code, description, uri string) *ProviderError {
	return &ProviderError{ProviderID: provider, Code: serverText(code, maxErrorCodeLen),
		Description: serverText(description, maxErrorDescriptionLen), URI: serverText(uri, maxErrorURILen)}
}

// The device authorization grant (RFC 8628): a sign-in for an agent where no
// browser is. The agent shows a short user code and a verification URI; the
// user approves on any device; the token endpoint is polled with the device
// code until the user acts or the code expires.

// deviceAuthorizer is a Provider that offers the device authorization grant:
// the optional methods SupportsDeviceAuth, DeviceAuth and DeviceToken
// (documented on [Provider]).
type deviceAuthorizer interface {
	SupportsDeviceAuth() bool
	DeviceAuth(ctx context.Context, scopes []string) (*DeviceAuthorization, error)
	DeviceToken(ctx context.Context, deviceCode string) (*TokenSet, error)
}

// DeviceAuthorization is a device authorization endpoint's answer (RFC 8628
// §3.2), what a Provider's DeviceAuth returns. ExpiresIn and Interval are in seconds; an Interval of 0 means the
// server named none (poll every 5 seconds).
type DeviceAuthorization struct {
	DeviceCode              string `json:"deviceCode"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete,omitempty"`
	ExpiresIn               int64  `json:"expiresIn"`
	Interval                int64  `json:"interval,omitempty"`
}

// GrantDevice is the OAuthWorkflowArgs.Grant that runs the device
// authorization grant; "" runs the authorization-code sign-in.
const GrantDevice = "device"

// ErrDeviceAuthUnsupported is StartDeviceSignIn's error for a provider that
// offers no device authorization grant (it has no SupportsDeviceAuth,
// DeviceAuth and DeviceToken methods, or its SupportsDeviceAuth is false).
var ErrDeviceAuthUnsupported = fmt.Errorf("oauthflow: the provider offers no device authorization grant: %w", errors.ErrUnsupported)

// Device sign-in timings.
const (
	jobDevice             = "device"        // the worker's job that polls a device sign-in's token endpoint
	defaultDeviceInterval = 5 * time.Second // RFC 8628 §3.2: the interval when the server names none
	slowDownStep          = 5 * time.Second // RFC 8628 §3.5: what each slow_down adds to the interval
	maxDeviceInterval     = 5 * time.Minute // the most a server's interval is honoured to
	maxDeviceLifetime     = time.Hour       // the longest a device code is polled, whatever the server says
	maxUserCodeLen        = 64              // a user code longer than this is not one a person types
	maxVerificationURILen = 2048            // nor a URI longer than this one to show
	maxDeviceCodeLen      = 4096            // bounds what the run keeps of the server's device code
)

// deviceAuthorizerOf is p as a deviceAuthorizer whose grant is on, else nil.
func deviceAuthorizerOf(p Provider) deviceAuthorizer {
	if d, ok := p.(deviceAuthorizer); ok && d.SupportsDeviceAuth() {
		return d
	}
	return nil
}

func callDeviceAuth(ctx context.Context, d deviceAuthorizer, scopes []string) (a *DeviceAuthorization, err error) {
	defer errs.Recover(&err, "provider DeviceAuth")
	return d.DeviceAuth(ctx, scopes)
}

// checkDeviceAuth refuses an answer the user could not act on, or whose
// links are not web pages: the prompt shows them as they are.
func checkDeviceAuth(provider string, a *DeviceAuthorization) error {
	bad := func(what string) error {
		return &ProviderError{ProviderID: provider, Err: fmt.Errorf("the device authorization answer's %s is not valid", what)}
	}
	switch {
	case a == nil || a.DeviceCode == "" || len(a.DeviceCode) > maxDeviceCodeLen:
		return bad("device code")
	case a.UserCode == "" || len(a.UserCode) > maxUserCodeLen || strings.ContainsFunc(a.UserCode, unshowable):
		return bad("user code")
	case !webURL(a.VerificationURI):
		return bad("verification URI")
	case a.VerificationURIComplete != "" && !webURL(a.VerificationURIComplete):
		return bad("complete verification URI")
	}
	return nil
}

// webURL reports whether s is an absolute http(s) URL short enough to show,
// and shown as it reads.
func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && len(s) <= maxVerificationURILen && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" &&
		!strings.ContainsFunc(s, unshowable)
}

// errDeviceExpired ends a device sign-in whose code expired.
var errDeviceExpired = &FlowError{Message: "The sign-in code expired. Start the sign-in again.", Err: ErrSessionNotFound}
