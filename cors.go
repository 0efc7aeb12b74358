package oauthflow

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// frontendOrigins is Config.FrontendOrigins checked and normalised: the origins
// of frontends served apart from the API, which may receive the callback page's
// result by postMessage and call POST /api/v1/oauth/complete with CORS.
type frontendOrigins struct {
	list []string            // in the order configured, without duplicates
	set  map[string]struct{} // the same, for lookups by a request's Origin
	// credentials allows credentialed requests (cookies) from these origins:
	// set when completions are checked against the user (Config.VerifyUser
	// or Config.BindSignIns).
	credentials bool
}

// parseFrontendOrigins checks every origin (see normaliseOrigin) and drops duplicates.
func parseFrontendOrigins(in []string) (frontendOrigins, error) {
	o := frontendOrigins{set: make(map[string]struct{}, len(in))}
	for i, s := range in {
		origin, err := normaliseOrigin(s)
		if err != nil {
			return frontendOrigins{}, errs.Invalid("Config.FrontendOrigins[%d] %q: %s", i, s, err.Error())
		}
		if _, dup := o.set[origin]; !dup {
			o.set[origin] = struct{}{}
			o.list = append(o.list, origin)
		}
	}
	return o, nil
}

// allows reports whether origin, a request's Origin header, is configured. The
// header is compared as sent: browsers send it already serialised as an origin.
func (o frontendOrigins) allows(origin string) bool {
	_, ok := o.set[origin]
	return ok
}

// originError is why a configured origin was refused; its text is the message.
type originError string

func (e originError) Error() string { return string(e) }

// normaliseOrigin turns "scheme://host[:port]" (an optional trailing slash is
// dropped) into the form a browser sends in Origin: the scheme and host in lower
// case, an IPv6 literal bracketed in its canonical form, the scheme's default
// port left out. Only http and https are allowed; no wildcard, path, query,
// fragment, credentials or host outside the ASCII characters of a DNS name.
func normaliseOrigin(s string) (string, error) {
	if strings.Contains(s, "*") {
		return "", originError("a wildcard is not allowed; list each origin")
	}
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	if err != nil {
		return "", originError("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", originError("must be an http:// or https:// origin")
	}
	if u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", originError("must be scheme://host[:port], without a path, query, fragment or credentials")
	}
	host, err := originHost(u.Hostname())
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" && strings.HasSuffix(u.Host, ":") || port != "" && !validPort(port) {
		return "", originError("the port must be a number from 1 to 65535")
	}
	if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + port, nil
}

// originHost returns host as a browser serialises it in an origin.
func originHost(host string) (string, error) {
	if host == "" {
		return "", originError("the host is missing")
	}
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", originError("the host is not a valid IPv6 address")
		}
		return "[" + ip.String() + "]", nil
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return "", originError("the host must be a DNS name (in its ASCII, punycode form) or an IP address")
		}
	}
	return strings.ToLower(host), nil
}

func validPort(p string) bool {
	if len(p) > 5 || p[0] == '0' {
		return false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

// corsMaxAge is how long a browser may reuse an answered preflight, in seconds.
const corsMaxAge = "600"

// allowOrigin adds the CORS response headers for a request from a configured
// frontend origin, and nothing for any other request (a browser then withholds
// the answer from the calling page). A completion is authorised by its
// single-use state, so cookies are allowed only when the module checks the
// completing browser's user (Config.VerifyUser, Config.BindSignIns). The answers are never
// cached (Cache-Control: no-store), so one without Vary: Origin cannot be
// replayed to an allowed origin.
func (o frontendOrigins) allowOrigin(h http.Header, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if !o.allows(origin) {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if o.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Add("Vary", "Origin")
	return true
}

// completePreflightHandler answers the CORS preflight (OPTIONS) of POST
// /api/v1/oauth/complete: 204 allowing POST with a Content-Type header for a
// configured frontend origin; 403 without any CORS header for every other
// request, so the browser refuses to send the POST.
func (m *Module) completePreflightHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		if !m.origins.allowOrigin(h, r) {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		h.Set("Access-Control-Allow-Methods", http.MethodPost)
		h.Set("Access-Control-Allow-Headers", "Content-Type")
		h.Set("Access-Control-Max-Age", corsMaxAge)
		w.WriteHeader(http.StatusNoContent)
	})
}
