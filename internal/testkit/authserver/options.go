package authserver

import (
	"crypto"
	"fmt"
	"net/url"
	"time"
)

// Defaults used when the matching Options field is left at its zero value.
const (
	DefaultClientID        = "demo-client"       // confidential client of DefaultClients
	DefaultClientSecret    = "demo-secret"       // its secret
	DefaultPublicClientID  = "demo-public"       // public client of DefaultClients (PKCE required)
	DefaultUser            = "demo-user"         // the signed-in user when no login_hint names one
	DefaultAccessTokenTTL  = time.Hour           // access-token lifetime
	DefaultRefreshTokenTTL = 30 * 24 * time.Hour // refresh-token lifetime
	DefaultCodeTTL         = time.Minute         // authorization-code lifetime
	DefaultDeviceCodeTTL   = 10 * time.Minute    // device-code and user-code lifetime (RFC 8628)
	DefaultDeviceInterval  = 5 * time.Second     // least time between two polls of one device code
	DefaultRequestURITTL   = time.Minute         // lifetime of a pushed request's request_uri (RFC 9126)
)

// defaultRedirectPaths are the callback paths DefaultClients accept on a loopback host.
var defaultRedirectPaths = []string{"/api/v1/oauth/callback", "/oauth/callback", "/callback"}

// Client is an OAuth client registered with the server.
type Client struct {
	ID     string
	Secret string // empty for a public client, and for a client with a PublicKey
	// PublicKey makes the client authenticate with private_key_jwt (RFC 7523 §2.2)
	// and nothing else: a JWT signed by the private half of this key (a P-256
	// ECDSA key signing ES256, an RSA key signing PS256 or RS256, or an Ed25519 key
	// signing EdDSA) for the server's issuer. A secret or Basic header is refused for
	// it. Such a client has no Secret and is not Public.
	PublicKey crypto.PublicKey
	// RedirectURIs are matched exactly, except as AllowLoopback says.
	RedirectURIs []string
	// Public marks a client without a secret; it must use PKCE.
	Public bool
	// RequirePKCE makes a confidential client send a code_challenge too.
	RequirePKCE bool
	// AllowLoopback accepts a registered loopback URI (http://127.0.0.1/path,
	// http://[::1]/path, http://localhost/path) on any port, as RFC 8252 §7.3 asks.
	AllowLoopback bool
	// AnyLoopbackRedirect accepts every plain http URI on a loopback host (any
	// port, any path), registered or not: a test's app listens where it likes.
	AnyLoopbackRedirect bool
}

func (c *Client) requiresPKCE() bool { return c.Public || c.RequirePKCE }

// DefaultClients returns the clients a server registers when Options.Clients is empty:
// DefaultClientID with DefaultClientSecret, and the public DefaultPublicClientID. Both
// accept http://127.0.0.1, http://[::1] and http://localhost on any port for the paths
// /api/v1/oauth/callback, /oauth/callback and /callback.
func DefaultClients() []Client {
	var uris []string
	for _, host := range []string{"127.0.0.1", "[::1]", "localhost"} {
		for _, path := range defaultRedirectPaths {
			uris = append(uris, "http://"+host+path)
		}
	}
	return []Client{
		{ID: DefaultClientID, Secret: DefaultClientSecret, RedirectURIs: uris, AllowLoopback: true},
		{ID: DefaultPublicClientID, RedirectURIs: uris, AllowLoopback: true, Public: true},
	}
}

// Options configures a Server. The zero value of every field means its default.
type Options struct {
	// Issuer is the server's base URL (no trailing slash); endpoints are Issuer+"/token" and
	// so on. Empty means "scheme://Host of each request", which is right unless the server
	// is mounted under a path prefix. Start sets it to the test server's URL.
	Issuer string
	// Clients are the registered clients; empty means DefaultClients().
	Clients []Client
	// User is the name of the user who signs in (default DefaultUser). A login_hint
	// other than "deny" on the authorization request names the user instead.
	User string
	// Now is the clock (default time.Now); tests move it to expire codes and tokens.
	Now func() time.Time

	// AccessTokenTTL is the access-token lifetime (default DefaultAccessTokenTTL);
	// negative means tokens never expire and expires_in is omitted.
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is the refresh-token lifetime (default DefaultRefreshTokenTTL);
	// negative means refresh tokens never expire.
	RefreshTokenTTL time.Duration
	// CodeTTL is the authorization-code lifetime (default DefaultCodeTTL).
	CodeTTL time.Duration

	// DeviceCodeTTL is the lifetime of a device code and its user code (default
	// DefaultDeviceCodeTTL).
	DeviceCodeTTL time.Duration
	// DeviceInterval is the least time between two polls of one device code (default
	// DefaultDeviceInterval); a poll that comes sooner is answered slow_down, and the
	// code's interval grows by 5 seconds (RFC 8628 §3.5). The device authorization
	// answer names it in whole seconds, rounded up.
	DeviceInterval time.Duration
	// NoDeviceInterval leaves interval out of the device authorization answer, so that
	// clients poll every 5 seconds (RFC 8628 §3.2); the server still holds them to
	// DeviceInterval.
	NoDeviceInterval bool
	// NoDeviceGrant turns the device authorization grant off: no device endpoints,
	// nothing about it in the metadata, and the device_code grant type is
	// unsupported_grant_type.
	NoDeviceGrant bool

	// RotateRefreshTokens issues a new refresh token on every refresh and retires the old
	// one; presenting a retired one is invalid_grant and revokes the whole grant. Without
	// rotation a refresh answers no refresh_token and the old one stays valid.
	RotateRefreshTokens bool
	// NoRefreshToken issues no refresh tokens at all.
	NoRefreshToken bool
	// IssParameter adds iss to authorization responses (RFC 9207) and announces it.
	IssParameter bool
	// DenyAll makes every authorization request end in access_denied.
	DenyAll bool
	// ConsentPage shows an HTML page with Allow and Deny buttons instead of consenting
	// automatically.
	ConsentPage bool
	// OnToken, when set, is asked for a Failure for every token request that no FailNext
	// entry matched; nil means answer normally. It must be safe for concurrent use.
	OnToken func(grant string) *Failure

	// PAR serves the pushed authorization request endpoint, POST /par (RFC 9126),
	// and announces it in the metadata (pushed_authorization_request_endpoint). The
	// client authenticates there as at the token endpoint and pushes the parameters
	// of an authorization request; the answer's request_uri, sent to /authorize with
	// client_id and nothing else, stands for them once, until it expires. A DPoP
	// proof on the push (when the server does DPoP) binds the code to its key, as
	// dpop_jkt does (RFC 9449 §10.1).
	PAR bool
	// RequirePAR refuses every authorization request that was not pushed, and says
	// so in the metadata (require_pushed_authorization_requests, RFC 9126 §5). It
	// implies PAR.
	RequirePAR bool
	// RequestURITTL is the lifetime of a request_uri (default DefaultRequestURITTL).
	RequestURITTL time.Duration

	// DPoP binds tokens to the client's key (RFC 9449) and announces ES256 in the
	// metadata. A token request with a DPoP proof gets a token bound to the proof's key
	// (token_type DPoP), which the protected endpoints then take only with a proof of
	// that key; a grant whose code exchange was proved stays bound to that key, so its
	// refreshes must prove it too (for every client, public or not), as must the
	// exchange of a code whose authorization request named a dpop_jkt. A token request
	// without a proof gets a bearer token. Each proof is accepted once.
	DPoP bool
	// RequireDPoP refuses a token request without a proof (invalid_dpop_proof). It
	// implies DPoP.
	RequireDPoP bool
	// DPoPNonces makes the token endpoint and the protected endpoints demand the
	// server's current nonce in every proof (RFC 9449 §8, §9): a proof without it is
	// answered use_dpop_nonce, and every answer carries the nonce in DPoP-Nonce. The
	// nonce stays the same until RotateDPoPNonce. It implies DPoP.
	DPoPNonces bool

	// AuthorizationDetails, when set, decides the authorization_details
	// (RFC 9396 §7) each token answer names. It is called with the grant
	// type and the JSON the grant holds (at a code exchange, what the
	// authorization request asked for) and returns what the answer names,
	// which the grant holds from then on; nil leaves the field out, and a
	// refresh's nil leaves the grant's as they were. Unset, every answer
	// names what was asked. It must be safe for concurrent use.
	AuthorizationDetails func(grant string, held []byte) []byte
}

// withDefaults returns o with every zero field replaced by its default.
func (o Options) withDefaults() Options {
	if len(o.Clients) == 0 {
		o.Clients = DefaultClients()
	}
	if o.User == "" {
		o.User = DefaultUser
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	o.AccessTokenTTL = orDefault(o.AccessTokenTTL, DefaultAccessTokenTTL)
	o.RefreshTokenTTL = orDefault(o.RefreshTokenTTL, DefaultRefreshTokenTTL)
	if o.CodeTTL <= 0 {
		o.CodeTTL = DefaultCodeTTL
	}
	if o.DeviceCodeTTL <= 0 {
		o.DeviceCodeTTL = DefaultDeviceCodeTTL
	}
	if o.DeviceInterval <= 0 {
		o.DeviceInterval = DefaultDeviceInterval
	}
	if o.RequestURITTL <= 0 {
		o.RequestURITTL = DefaultRequestURITTL
	}
	o.DPoP = o.DPoP || o.RequireDPoP || o.DPoPNonces
	o.PAR = o.PAR || o.RequirePAR
	return o
}

func orDefault(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// clientIndex checks the registered clients and indexes them by ID.
// A bad registration is a programmer error at setup time, reported as an error.
func clientIndex(clients []Client) (map[string]*Client, error) {
	index := make(map[string]*Client, len(clients))
	for i := range clients {
		c := clients[i]
		if err := checkClient(&c); err != nil {
			return nil, err
		}
		if _, dup := index[c.ID]; dup {
			return nil, fmt.Errorf("authserver: client %q registered twice", c.ID)
		}
		index[c.ID] = &c
	}
	return index, nil
}

func checkClient(c *Client) error {
	switch {
	case c.ID == "":
		return fmt.Errorf("authserver: client without ID")
	case c.Public && c.Secret != "":
		return fmt.Errorf("authserver: public client %q has a secret", c.ID)
	case c.PublicKey != nil && (c.Public || c.Secret != ""):
		return fmt.Errorf("authserver: client %q authenticates with its public key alone: no secret, not public", c.ID)
	case !c.Public && c.Secret == "" && c.PublicKey == nil:
		return fmt.Errorf("authserver: confidential client %q has no secret and no public key", c.ID)
	}
	if c.PublicKey != nil {
		if err := checkPublicKey(c.PublicKey); err != nil {
			return fmt.Errorf("authserver: client %q: %w", c.ID, err)
		}
	}
	for _, uri := range c.RedirectURIs {
		u, err := url.Parse(uri)
		if err != nil || !u.IsAbs() || u.Fragment != "" {
			return fmt.Errorf("authserver: client %q: bad redirect URI %q", c.ID, uri)
		}
	}
	return nil
}
