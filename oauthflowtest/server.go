package oauthflowtest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
)

// DefaultUser is the provider's user who signs in when [Options.User] is empty.
const DefaultUser = "demo-user"

// defaultDeviceInterval is the device grant's polling interval when
// [Options.DeviceInterval] is zero: the least RFC 8628 lets a server name, so
// that a device sign-in in a test completes within a poll or two.
const defaultDeviceInterval = time.Second

// Options configure a [Server]. The zero value of every field means its
// default: tokens for an hour, refresh tokens without rotation, consent at
// once, the device grant on, DPoP off.
type Options struct {
	// User names the provider's user who signs in (default DefaultUser).
	User string

	// AccessTokenTTL is the access tokens' lifetime (default one hour);
	// negative means they never expire. The library counts a token as expired
	// 60 seconds early, so a lifetime under a minute makes every read refresh.
	AccessTokenTTL time.Duration
	// RefreshTokenTTL is the refresh tokens' lifetime (default 30 days);
	// negative means they never expire.
	RefreshTokenTTL time.Duration
	// RotateRefreshTokens issues a new refresh token on every refresh and
	// retires the old one; presenting a retired one is invalid_grant and
	// revokes the whole grant. Without rotation the old one stays valid.
	RotateRefreshTokens bool
	// NoRefreshToken issues no refresh tokens at all.
	NoRefreshToken bool

	// ConsentPage shows a page with Allow and Deny buttons instead of
	// consenting at once; a [Browser] answers it.
	ConsentPage bool

	// NoDeviceGrant turns the device grant (RFC 8628) off: the server has no
	// device endpoints and its provider offers no sign-in with a code.
	NoDeviceGrant bool
	// DeviceInterval is the least time between two polls of one device code
	// (default one second); the server answers slow_down to a poll that
	// comes sooner.
	DeviceInterval time.Duration

	// DPoP binds tokens to the client's key (RFC 9449) and makes the
	// server's provider prove one; a request without a proof still gets a
	// bearer token. RequireDPoP refuses it; DPoPNonces makes every proof
	// carry the server's nonce. Either implies DPoP.
	DPoP, RequireDPoP, DPoPNonces bool

	// Now is the server's clock (default time.Now). Give it the clock the
	// Module under test reads ([oauthflow.Config].Now) to expire codes and
	// tokens without waiting.
	Now func() time.Time
}

// Server is a local OAuth 2.0 authorization server. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the server's issuer, with no trailing slash: for a server from
	// NewServer, http://127.0.0.1:port.
	URL string

	as     *authserver.Server
	opts   Options
	secret string // the client secret of the app registered with it
}

// clientID is the app the server has registered; its secret is made per server.
const clientID = "oauthflow-app"

// NewServer starts a server on a loopback port. Call [Server.Close] when
// done, for example with defer or t.Cleanup.
func NewServer(opts Options) *Server {
	s := newServer(opts)
	s.as = authserver.Start(s.serverOptions(""))
	s.URL = s.as.URL()
	return s
}

// Mount serves a new server on mux, at the path of issuer: the URL the
// browser and the app reach it at, such as "http://127.0.0.1:8080/demo". It
// is for a program that runs the server beside its own handlers on one port,
// as the offline examples do. The server's metadata is served at the place
// RFC 8414 gives an issuer with a path (/.well-known/oauth-authorization-server/demo)
// too. Mount panics when issuer is not an absolute http(s) URL without query.
func Mount(mux *http.ServeMux, issuer string, opts Options) *Server {
	u, err := url.Parse(issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		panic(fmt.Sprintf("oauthflowtest: Mount: issuer %q is not an absolute http(s) URL without query", issuer))
	}
	prefix := strings.TrimSuffix(u.Path, "/")
	s := newServer(opts)
	s.as = authserver.New(s.serverOptions(u.Scheme + "://" + u.Host + prefix))
	s.URL = s.as.URL()
	mux.Handle(prefix+"/", http.StripPrefix(prefix, s.as))
	if prefix != "" {
		mux.HandleFunc("GET "+authserver.PathMetadata+prefix, func(w http.ResponseWriter, r *http.Request) {
			r2 := r.Clone(r.Context())
			r2.URL.Path = authserver.PathMetadata
			s.as.ServeHTTP(w, r2)
		})
	}
	return s
}

func newServer(opts Options) *Server {
	if opts.User == "" {
		opts.User = DefaultUser
	}
	if opts.DeviceInterval <= 0 {
		opts.DeviceInterval = defaultDeviceInterval
	}
	opts.DPoP = opts.DPoP || opts.RequireDPoP || opts.DPoPNonces
	return &Server{opts: opts, secret: rand.Text()}
}

// serverOptions are the options of the server underneath, for issuer ("" for
// the test server's own URL).
func (s *Server) serverOptions(issuer string) authserver.Options {
	o := s.opts
	return authserver.Options{
		Issuer:              issuer,
		Clients:             []authserver.Client{{ID: clientID, Secret: s.secret, AnyLoopbackRedirect: true}},
		User:                o.User,
		Now:                 o.Now,
		AccessTokenTTL:      o.AccessTokenTTL,
		RefreshTokenTTL:     o.RefreshTokenTTL,
		DeviceInterval:      o.DeviceInterval,
		NoDeviceGrant:       o.NoDeviceGrant,
		RotateRefreshTokens: o.RotateRefreshTokens,
		NoRefreshToken:      o.NoRefreshToken,
		IssParameter:        true,
		ConsentPage:         o.ConsentPage,
		DPoP:                o.DPoP,
		RequireDPoP:         o.RequireDPoP,
		DPoPNonces:          o.DPoPNonces,
	}
}

// Close shuts the server down, ending requests a [Failure] delays. For a
// server from [Mount] it ends those requests only: the program's own server
// owns the listener. Close may be called more than once.
func (s *Server) Close() { s.as.Close() }

// APIURL is the server's protected API, GET with a token (as
// [oauthflow.TokenStore.Client] sends it): it answers JSON naming the token's
// user, its scope and three made-up repositories, as
//
//	{"user":"demo-user","scope":"read","repos":[{"name":"hello-world","full_name":"demo-user/hello-world","private":false,"description":"..."}, ...]}
func (s *Server) APIURL() string { return s.as.APIURL() }

// UserinfoURL is the server's user-info endpoint, GET with a token: it
// answers {"sub":"demo-user","preferred_username":"demo-user"}. Its provider
// reads the account there after each sign-in ([oauthflow.Connection].Account).
func (s *Server) UserinfoURL() string { return s.as.UserinfoURL() }

// IntrospectURL is the server's introspection endpoint (RFC 7662), which a
// resource server under test asks about the tokens it is sent, with the
// client of [Server.Credentials].
func (s *Server) IntrospectURL() string { return s.as.IntrospectURL() }

// Active reports whether the server would honour token, an access or a
// refresh token, now: issued by it and not expired, revoked or retired by
// rotation. After a disconnect ([oauthflow.TokenStore].DeleteTokens) the
// grant's tokens are no longer active.
func (s *Server) Active(token string) bool { return s.as.Active(token) }

// DenyNext makes the next authorization request end in access_denied, as if
// the user refused: the [Browser] lands on the app's callback with the error.
// Calls add up: DenyNext twice denies the next two.
func (s *Server) DenyNext() { s.as.DenyNext() }

// ApproveDevice allows the device sign-in whose user code is userCode (as the
// prompt shows it), as the user would on the verification page, for
// [Options.User]. The Module's next poll gets the tokens. It returns an error
// for a code that is unknown, expired or already answered.
func (s *Server) ApproveDevice(userCode string) error {
	return userCodeError("approve", userCode, s.as.ApproveDevice(userCode, ""))
}

// DenyDevice denies the device sign-in whose user code is userCode
// ([oauthflow.Module.StartDeviceSignIn]): the Module's next poll hears
// access_denied. It returns an error for a code that
// is unknown, expired or already answered.
func (s *Server) DenyDevice(userCode string) error {
	return userCodeError("deny", userCode, s.as.DenyDevice(userCode))
}

// userCodeError says why the server could not answer userCode, or is nil.
func userCodeError(verb, userCode string, err error) error {
	why := "is unknown"
	switch {
	case err == nil:
		return nil
	case errors.Is(err, authserver.ErrUserCodeExpired):
		why = "expired"
	case errors.Is(err, authserver.ErrUserCodeAnswered):
		why = "was already answered"
	}
	return fmt.Errorf("oauthflowtest: %s: the user code %q %s", verb, userCode, why)
}
