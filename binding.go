package oauthflow

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"github.com/oauthflow/oauthflow/internal/errs"
	"net/http"
	"net/url"
	"time"
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

// StartPath is the endpoint the widget opens a bound sign-in through.
const StartPath = "/api/v1/oauth/start"

// ErrSignInRefused is why a completion was refused: it did not come from the
// user (or browser) that started the sign-in.
var ErrSignInRefused = errors.New("oauthflow: this sign-in was started by another user or browser")

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

// verifies reports whether a completion must be checked before it consumes anything.
func (m *Module) verifies() bool { return m.verifyUser != nil || m.bindSignIns }

// checkUser refuses a completion of s that r may not make: a bound sign-in
// without its cookie, or one that Config.VerifyUser turns down. A refusal
// emits EventSignInRefused; the sign-in is left as it is.
func (m *Module) checkUser(r *http.Request, s *Session, state string) error {
	err := m.userCheck(r, s, state)
	if err != nil {
		m.events.emit(r.Context(), Event{Kind: EventSignInRefused, UserID: s.UserID, ProviderID: s.Provider,
			RunID: s.WorkflowID, Err: err})
	}
	return err
}

func (m *Module) userCheck(r *http.Request, s *Session, state string) (err error) {
	if s.Binding != "" {
		c, cerr := r.Cookie(bindingCookieName(r, state))
		if cerr != nil || !bindingMatches(s, c.Value) {
			return ErrSignInRefused
		}
	}
	if m.verifyUser == nil {
		return nil
	}
	defer errs.Recover(&err, "Config.VerifyUser")
	if verr := m.verifyUser(r, s.UserID); verr != nil {
		return errors.Join(ErrSignInRefused, verr)
	}
	return nil
}

// StartHandler serves POST /api/v1/oauth/start, which the widget opens a bound
// sign-in through (form fields state and binding). From the API's own origin
// or one of Config.FrontendOrigins only, and with the sign-in's secret, it sets
// the sign-in's cookie and sends the browser to the provider (303).
func (m *Module) StartHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, msg := m.start(w, r)
		if s == nil {
			m.renderPage(w, outcome{kind: outcomeForbidden, message: msg}, "")
			return
		}
		state := r.PostFormValue("state")
		ttl := m.signInTTL - m.now().Sub(time.UnixMilli(s.CreatedAt))
		http.SetCookie(w, bindingCookie(r, state, r.PostFormValue("binding"), ttl))
		authURL, err := m.startURL(s, state)
		if err != nil {
			m.renderPage(w, outcome{kind: outcomeInternal, message: "The sign-in could not be started."}, "")
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		http.Redirect(w, r, authURL, http.StatusSeeOther)
	})
}

// start checks a POST /start: its origin, its state and its secret. It
// returns the pending sign-in, or nil and why not.
func (m *Module) start(w http.ResponseWriter, r *http.Request) (*Session, string) {
	if !m.sameOrAllowedOrigin(r) {
		return nil, "A sign-in can only be started from the app."
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxCompleteBody)
	state, secret := r.PostFormValue("state"), r.PostFormValue("binding")
	if !issuedState(state) {
		return nil, "The sign-in's state is not one this service issued."
	}
	s, err := m.Sessions.Peek(r.Context(), state)
	if err != nil || !bindingMatches(s, secret) {
		return nil, "This sign-in link has expired or was already used."
	}
	return s, ""
}

// sameOrAllowedOrigin reports whether r's Origin is the API's own (the host
// it was sent to) or one of Config.FrontendOrigins. Browsers send Origin with
// every form POST; a request without one is refused.
func (m *Module) sameOrAllowedOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return false
	}
	if m.origins.allows(origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host && (u.Scheme == "https" || u.Scheme == "http")
}

// startURL builds the authorization URL of the pending sign-in s again, as
// build_oauth_url made it: the same provider, scopes, state, PKCE challenge
// and dpop_jkt.
func (m *Module) startURL(s *Session, state string) (string, error) {
	p, err := m.Registry.Get(s.Provider)
	if err != nil {
		return "", err
	}
	return m.flow.authURLOf(p, s, state)
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
