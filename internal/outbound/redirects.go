// Package outbound holds what the library's requests to other servers share:
// the rule that a credential goes only to the origin of the request the
// caller made, and the pooled transport of the default clients.
package outbound

import (
	"net/http"
	"net/url"
	"strings"
)

// Redirects and the token. net/http drops Authorization on a redirect to
// another host only when the caller set it on the first request; a transport
// that adds it on each hop defeats that rule, so the bearer transport makes
// its own: the token (and any proof header the caller set) goes only to the
// origin of the request the caller made. A redirect to another origin, or
// from https to http on the same host, is sent without them, and its answer
// is the caller's to read (a 401 from there forces no refresh).

// credentialHeaders are the headers a hop to another origin is sent without:
// the bearer token and a DPoP proof (RFC 9449), which names its target.
var credentialHeaders = []string{"Authorization", "DPoP"}

// FirstRequest is the request the caller made: net/http sets Response on each
// redirected request, and that response's Request is the hop before.
func FirstRequest(req *http.Request) *http.Request {
	for req.Response != nil && req.Response.Request != nil {
		req = req.Response.Request
	}
	return req
}

// SameOrigin reports whether a and b have the same scheme, host and port
// (RFC 6454), with a missing port taken as the scheme's default.
func SameOrigin(a, b *url.URL) bool {
	return a.Scheme == b.Scheme && strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)
}

func port(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	switch strings.ToLower(u.Scheme) {
	case "https":
		return "443"
	case "http":
		return "80"
	}
	return ""
}

// WithoutCredentials returns a copy of req without the bearer token and the
// proof header, for a hop the token must not reach.
func WithoutCredentials(req *http.Request) *http.Request {
	r := req.Clone(req.Context())
	for _, h := range credentialHeaders {
		r.Header.Del(h)
	}
	return r
}
