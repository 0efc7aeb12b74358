package dpop

import (
	"errors"
	"net"
	"net/url"
	"strings"
)

var errTarget = errors.New("dpop: target is not an absolute http(s) URL")

// htuOf is target as a proof's htu, normalized the way RFC 9449 §4.3 asks a
// server to compare it (RFC 3986 §6.2.2, §6.2.3): scheme and host in lower
// case, the scheme's default port left out, an empty path as "/", and no
// user info, query or fragment.
func htuOf(target string) (string, error) {
	u, err := url.Parse(target)
	if err != nil {
		return "", errTarget
	}
	scheme, host, port, ok := split(u)
	if !ok {
		return "", errTarget
	}
	if port != "" && port != defaultPort(scheme) {
		host = net.JoinHostPort(host, port)
	} else if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	path := u.EscapedPath()
	if path == "" {
		path = "/"
	}
	return scheme + "://" + host + path, nil
}

// originOf is u's origin as scheme://host:port, the port always written, or
// "" when u is not an absolute http(s) URL.
func originOf(u *url.URL) string {
	scheme, host, port, ok := split(u)
	if !ok {
		return ""
	}
	if port == "" {
		port = defaultPort(scheme)
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}

// split is u's scheme and host in lower case and its port as written.
func split(u *url.URL) (scheme, host, port string, ok bool) {
	scheme, host = strings.ToLower(u.Scheme), strings.ToLower(u.Hostname())
	if (scheme != "http" && scheme != "https") || host == "" {
		return "", "", "", false
	}
	return scheme, host, u.Port(), true
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}
