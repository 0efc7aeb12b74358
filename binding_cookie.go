package oauthflow

import (
	"net/http"
	"time"
)

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
