package oauthflow

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"net/http"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// Sign-ins bound to the user who started them. Whoever holds a sign-in link
// can complete it, and the account they sign in with is attached to the user
// who started it: a link forwarded to someone else attaches that person's
// account to the sender. Two guards, either or both:
//
//   - Config.VerifyUser: the host app checks, on both public endpoints, that
//     the browser completing a sign-in belongs to the user who started it (its
//     own login cookie on the API origin), before anything is consumed.
//   - Config.BindSignIns: for apps without a login session on the API origin.
//     Each sign-in gets a secret, which the prompt document and build_oauth_url's
//     result carry and no link does. The widget opens the provider through
//     POST /api/v1/oauth/start (from an allowed origin only), which sets a
//     short-lived HttpOnly SameSite=Lax cookie with the secret for this state,
//     and the endpoints refuse a completion without it.
//
// A refusal is 403, leaves the sign-in usable by the right browser until it
// expires, and emits EventSignInRefused.

// errSignInRefused is why a completion was refused: it did not come from the
// user (or browser) that started the sign-in.
var errSignInRefused = errors.New("oauthflow: this sign-in was started by another user or browser")

// bindingCookiePrefix + state names a bound sign-in's cookie.
const bindingCookiePrefix = "oauthflow_signin_"

// newBinding returns a sign-in's secret and the hash its session keeps.
func newBinding() (secret, hash string) {
	secret = newState()
	return secret, bindingHash(secret)
}

func bindingHash(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}

// bindingMatches reports in constant time whether secret is the one s was bound with.
func bindingMatches(s *Session, secret string) bool {
	return secret != "" && subtle.ConstantTimeCompare([]byte(bindingHash(secret)), []byte(s.Binding)) == 1
}

// userGuard refuses a completion that does not come from the user, or the
// browser, that started the sign-in, before anything is consumed.
type userGuard struct {
	verifyUser func(r *http.Request, userID string) error // Config.VerifyUser
	bind       bool                                       // Config.BindSignIns
	events     notifier
}

// verifies reports whether a completion must be checked before it consumes anything.
func (g *userGuard) verifies() bool { return g.verifyUser != nil || g.bind }

// checkUser refuses a completion of s that r may not make: a bound sign-in
// without its cookie, or one that Config.VerifyUser turns down. A refusal
// emits EventSignInRefused; the sign-in is left as it is.
func (g *userGuard) checkUser(r *http.Request, s *Session, state string) error {
	err := g.userCheck(r, s, state)
	if err != nil {
		g.events.emit(r.Context(), Event{Kind: EventSignInRefused, UserID: s.UserID, ProviderID: s.Provider,
			RunID: s.WorkflowID, Err: err})
	}
	return err
}

func (g *userGuard) userCheck(r *http.Request, s *Session, state string) (err error) {
	if s.Binding != "" {
		c, cerr := r.Cookie(bindingCookieName(r, state))
		if cerr != nil || !bindingMatches(s, c.Value) {
			return errSignInRefused
		}
	}
	if g.verifyUser == nil {
		return nil
	}
	defer errs.Recover(&err, "Config.VerifyUser")
	if verr := g.verifyUser(r, s.UserID); verr != nil {
		return errors.Join(errSignInRefused, verr)
	}
	return nil
}

// The cookie of a bound sign-in. Served over https it is a __Host- cookie
// (Secure, Path=/, no Domain): a browser accepts it only from this exact
// origin over TLS, so no sibling subdomain and no plain-http response (a
// network attacker's) can plant one holding the secret of a sign-in of
// their own, to have the user complete it. Over plain http, which only
// loopback development uses, the prefix cannot be set (it needs Secure); the
// cookie then keeps the unprefixed name and the endpoints' path.
//
// A completion reads the one name its own scheme implies, never both: an
// unprefixed cookie on an https request is exactly what the prefix keeps
// out. The cost, once, at the deploy that brings the prefix: a sign-in
// opened through an older instance (at most Config.SignInTTL before) and
// completed on a newer one is refused, and the user starts it again.

// hostCookiePrefix is the RFC 6265bis cookie name prefix that pins a cookie
// to its origin.
const hostCookiePrefix = "__Host-"

// servedOverTLS reports whether r reached the app over https, directly or
// through a TLS-terminating proxy that says so.
func servedOverTLS(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// bindingCookieName is the name of state's cookie on requests like r.
func bindingCookieName(r *http.Request, state string) string {
	if servedOverTLS(r) {
		return hostCookiePrefix + bindingCookiePrefix + state
	}
	return bindingCookiePrefix + state
}

// bindingCookie is the cookie POST /start sets for state, holding secret, for ttl.
func bindingCookie(r *http.Request, state, secret string, ttl time.Duration) *http.Cookie {
	c := &http.Cookie{Name: bindingCookieName(r, state), Value: secret, Path: "/api/v1/oauth/",
		MaxAge: max(int(ttl/time.Second), 1), HttpOnly: true, SameSite: http.SameSiteLaxMode}
	if servedOverTLS(r) {
		c.Secure, c.Path = true, "/"
	}
	return c
}
