package authserver

import (
	"net/url"
	"slices"
)

// resolveRedirect returns where to send the user for the redirect_uri parameter uri,
// and whether uri is acceptable for c. An empty uri is accepted only when c has exactly
// one registered URI and no loopback allowance (RFC 6749 §3.1.2.3).
func (c *Client) resolveRedirect(uri string) (string, bool) {
	if uri == "" {
		if len(c.RedirectURIs) == 1 && !c.AllowLoopback {
			return c.RedirectURIs[0], true
		}
		return "", false
	}
	if slices.Contains(c.RedirectURIs, uri) {
		return uri, true
	}
	if c.AnyLoopbackRedirect {
		return uri, IsLoopbackURI(uri)
	}
	return uri, c.AllowLoopback && c.matchesLoopback(uri)
}

// matchesLoopback reports whether uri is a registered loopback URI on another port.
func (c *Client) matchesLoopback(uri string) bool {
	u, err := url.Parse(uri)
	if err != nil || !isLoopback(u) {
		return false
	}
	for _, reg := range c.RedirectURIs {
		r, err := url.Parse(reg)
		if err == nil && isLoopback(r) && sameExceptPort(r, u) {
			return true
		}
	}
	return false
}

// IsLoopbackURI reports whether uri is a plain http URI on a loopback host
// (127.0.0.1, [::1], localhost), without user info or fragment: a redirect URI
// a client with AnyLoopbackRedirect may use.
func IsLoopbackURI(uri string) bool {
	u, err := url.Parse(uri)
	return err == nil && isLoopback(u)
}

func isLoopback(u *url.URL) bool {
	if u.Scheme != "http" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	switch u.Hostname() {
	case "127.0.0.1", "::1", "localhost":
		return true
	}
	return false
}

func sameExceptPort(a, b *url.URL) bool {
	return a.Hostname() == b.Hostname() && a.EscapedPath() == b.EscapedPath() && a.RawQuery == b.RawQuery
}
