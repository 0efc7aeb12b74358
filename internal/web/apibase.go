package web

import (
	"errors"
	"net/url"
	"strings"
)

// apiBase is Options.APIBase checked: URL without a trailing slash, to which
// the script appends /api/v1/oauth/complete, and Origin, set when the API lives
// on another origin than the page.
type apiBase struct {
	URL    string
	Origin string
}

// parseAPIBase accepts "", an absolute path on the page's origin, or an
// absolute http(s) URL without credentials, query or fragment.
func parseAPIBase(s string) (apiBase, error) {
	trimmed := strings.TrimRight(s, "/")
	if trimmed == "" {
		return apiBase{}, nil
	}
	if strings.ContainsAny(trimmed, "\\ \t\r\n") {
		return apiBase{}, errors.New("APIBase must not contain backslashes or white space")
	}
	u, err := url.Parse(trimmed)
	if err != nil {
		return apiBase{}, errors.New("APIBase is not a URL")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return apiBase{}, errors.New("APIBase must not carry credentials, a query or a fragment")
	}
	switch {
	case u.Scheme == "" && u.Host == "" && strings.HasPrefix(trimmed, "/"):
		return apiBase{URL: trimmed}, nil
	case (u.Scheme == "http" || u.Scheme == "https") && validHost(u.Host):
		return apiBase{URL: trimmed, Origin: u.Scheme + "://" + u.Host}, nil
	}
	return apiBase{}, errors.New(`APIBase must be "", an absolute path or an absolute http(s) URL`)
}

// validHost reports whether host (with an optional port) holds only the
// characters of a DNS name, an IP literal and a port, so it is safe to put
// into a Content-Security-Policy source list.
func validHost(host string) bool {
	if host == "" {
		return false
	}
	for _, c := range host {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case c == '.', c == '-', c == ':', c == '[', c == ']':
		default:
			return false
		}
	}
	return true
}
