package outbound

import (
	"net/http"
	"net/url"
	"testing"
)

// Two URLs are the same origin when scheme, host (in any case) and port
// (the scheme's default when absent) are; path, query and user do not count.
func TestSameOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"https://as.example/token", "https://AS.example:443/other?x=1", true},
		{"http://as.example/", "http://as.example:80/", true},
		{"https://as.example/", "http://as.example/", false},
		{"https://as.example/", "https://as.example:8443/", false},
		{"https://as.example/", "https://evil.example/", false},
		{"https://as.example:443/", "https://as.example:80/", false},
	} {
		a, _ := url.Parse(tc.a)
		b, _ := url.Parse(tc.b)
		if got := SameOrigin(a, b); got != tc.same {
			t.Errorf("SameOrigin(%s, %s) = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}

// WithoutCredentials drops the bearer token and the proof from a copy and
// leaves the caller's request as it was.
func TestWithoutCredentials(t *testing.T) {
	t.Parallel()
	req, _ := http.NewRequest(http.MethodGet, "https://api.example/", nil)
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("DPoP", "proof")
	req.Header.Set("Accept", "application/json")
	out := WithoutCredentials(req)
	if out.Header.Get("Authorization") != "" || out.Header.Get("DPoP") != "" || out.Header.Get("Accept") == "" {
		t.Errorf("headers sent on: %v", out.Header)
	}
	if req.Header.Get("Authorization") == "" || req.Header.Get("DPoP") == "" {
		t.Errorf("the caller's request lost its headers: %v", req.Header)
	}
}

// FirstRequest walks a redirect chain back to the request the caller made.
func TestFirstRequest(t *testing.T) {
	t.Parallel()
	first, _ := http.NewRequest(http.MethodGet, "https://api.example/", nil)
	second, _ := http.NewRequest(http.MethodGet, "https://cdn.example/", nil)
	second.Response = &http.Response{Request: first}
	third, _ := http.NewRequest(http.MethodGet, "https://elsewhere.example/", nil)
	third.Response = &http.Response{Request: second}
	if FirstRequest(third) != first || FirstRequest(first) != first {
		t.Error("FirstRequest did not find the caller's request")
	}
}
