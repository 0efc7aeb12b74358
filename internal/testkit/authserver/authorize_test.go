package authserver_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

// TestAuthorizeErrorPage covers requests whose client or redirect URI cannot be
// trusted: the user sees an error page and is not redirected (RFC 6749 §4.1.2.1).
func TestAuthorizeErrorPage(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{Clients: []authserver.Client{
		{ID: "exact", Secret: "s", RedirectURIs: []string{"http://127.0.0.1:5000/cb"}},
		{ID: "two", Secret: "s", RedirectURIs: []string{"https://app.example/a", "https://app.example/b"}},
		{ID: "loop", Secret: "s", RedirectURIs: []string{"http://127.0.0.1/cb"}, AllowLoopback: true},
	}})
	tests := []struct {
		name  string
		query url.Values
	}{
		{"no client", url.Values{"response_type": {"code"}}},
		{"unknown client", url.Values{"client_id": {"who"}, "redirect_uri": {"http://127.0.0.1:5000/cb"}}},
		{"repeated client", url.Values{"client_id": {"exact", "exact"}}},
		{"exact client, other port", url.Values{"client_id": {"exact"}, "redirect_uri": {"http://127.0.0.1:5001/cb"}}},
		{"exact client, other path", url.Values{"client_id": {"exact"}, "redirect_uri": {"http://127.0.0.1:5000/cb/x"}}},
		{"two URIs, none sent", url.Values{"client_id": {"two"}}},
		{"loopback, other path", url.Values{"client_id": {"loop"}, "redirect_uri": {"http://127.0.0.1:1234/other"}}},
		{"loopback, other host", url.Values{"client_id": {"loop"}, "redirect_uri": {"http://localhost:1234/cb"}}},
		{"loopback, https", url.Values{"client_id": {"loop"}, "redirect_uri": {"https://127.0.0.1:1234/cb"}}},
		{"loopback, not loopback", url.Values{"client_id": {"loop"}, "redirect_uri": {"http://evil.example:1234/cb"}}},
		{"loopback, user info", url.Values{"client_id": {"loop"}, "redirect_uri": {"http://x@127.0.0.1:1234/cb"}}},
		{"loopback, none sent", url.Values{"client_id": {"loop"}}},
		{"markup in client", url.Values{"client_id": {"<script>alert(1)</script>"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.query.Set("response_type", "code")
			resp := authorize(t, srv, tt.query)
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
				t.Fatalf("status %d, Location %q; want 400 and no redirect", resp.StatusCode, resp.Header.Get("Location"))
			}
			if strings.Contains(string(body), "<script>") {
				t.Fatalf("page echoes markup: %s", body)
			}
		})
	}
}

// TestAuthorizeErrorRedirect covers bad requests from a trusted client and redirect
// URI: the error goes back to the client, with state and iss.
func TestAuthorizeErrorRedirect(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{IssParameter: true})
	verifier := oauth2.GenerateVerifier()
	tests := []struct {
		name  string
		query func(url.Values)
		code  string
	}{
		{"implicit grant", func(q url.Values) { q.Set("response_type", "token") }, "unsupported_response_type"},
		{"no response type", func(q url.Values) { q.Del("response_type") }, "unsupported_response_type"},
		{"public client without PKCE", func(q url.Values) {
			q.Set("client_id", authserver.DefaultPublicClientID)
			q.Del("code_challenge")
			q.Del("code_challenge_method")
		}, "invalid_request"},
		{"unknown method", func(q url.Values) { q.Set("code_challenge_method", "S512") }, "invalid_request"},
		{"method without challenge", func(q url.Values) { q.Del("code_challenge") }, "invalid_request"},
		{"short challenge", func(q url.Values) { q.Set("code_challenge", "abc") }, "invalid_request"},
		{"challenge with bad characters", func(q url.Values) { q.Set("code_challenge", strings.Repeat("a+", 30)) }, "invalid_request"},
		{"repeated scope", func(q url.Values) { q["scope"] = []string{"a", "b"} }, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q := authParams(verifier)
			tt.query(q)
			got := redirected(t, srv, q)
			if got.Get("error") != tt.code || got.Get("code") != "" {
				t.Fatalf("redirect query %v, want error %s and no code", got, tt.code)
			}
			if got.Get("state") != "state-123" || got.Get("iss") != srv.URL() {
				t.Fatalf("redirect query %v lacks state or iss", got)
			}
		})
	}
}

func TestLoopbackRedirectOnAnyPort(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	for _, uri := range []string{
		"http://127.0.0.1:1/api/v1/oauth/callback",
		"http://127.0.0.1:65535/oauth/callback",
		"http://localhost:8080/callback",
		"http://[::1]:8080/callback",
		"http://127.0.0.1/callback",
	} {
		t.Run(uri, func(t *testing.T) {
			t.Parallel()
			q := authParams(oauth2.GenerateVerifier())
			q.Set("redirect_uri", uri)
			resp := authorize(t, srv, q)
			loc := resp.Header.Get("Location")
			if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, uri+"?") {
				t.Fatalf("status %d, Location %q", resp.StatusCode, loc)
			}
		})
	}
}

// A client with AnyLoopbackRedirect takes any plain http loopback URI, and
// still no other.
func TestAnyLoopbackRedirect(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{Clients: []authserver.Client{{ID: "any", Secret: "s", AnyLoopbackRedirect: true}}})
	tests := []struct {
		uri string
		ok  bool
	}{
		{"http://127.0.0.1:5000/any/path", true},
		{"http://localhost:1/cb?app=1", true},
		{"http://[::1]:8080/", true},
		{"https://127.0.0.1:5000/cb", false},
		{"http://app.example/cb", false},
		{"http://x@127.0.0.1:5000/cb", false},
		{"", false},
	}
	for _, tt := range tests {
		t.Run(tt.uri, func(t *testing.T) {
			t.Parallel()
			q := url.Values{"response_type": {"code"}, "client_id": {"any"}, "state": {"s1"}}
			if tt.uri != "" {
				q.Set("redirect_uri", tt.uri)
			}
			resp := authorize(t, srv, q)
			loc, _ := url.Parse(resp.Header.Get("Location"))
			redirected := resp.StatusCode == http.StatusFound && loc.Query().Get("code") != "" &&
				strings.HasPrefix(loc.String(), strings.SplitN(tt.uri, "?", 2)[0])
			if redirected != tt.ok {
				t.Fatalf("status %d, Location %q; want redirected %v", resp.StatusCode, loc, tt.ok)
			}
		})
	}
}

func TestRedirectKeepsRegisteredQuery(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{Clients: []authserver.Client{
		{ID: "one", Secret: "s", RedirectURIs: []string{"https://app.example/cb?tenant=7"}},
	}})
	got := redirected(t, srv, url.Values{"client_id": {"one"}, "response_type": {"code"}, "state": {"x"}})
	if got.Get("tenant") != "7" || got.Get("code") == "" || got.Get("iss") != "" {
		t.Fatalf("redirect query %v", got)
	}
	// The request named no redirect_uri, so the token request may omit it too.
	a := post(t, srv.TokenURL(), clientAuth{id: "one", secret: "s", basic: true},
		url.Values{"grant_type": {"authorization_code"}, "code": {got.Get("code")}})
	wantStatus(t, a, http.StatusOK)
}

func TestDenial(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		opts  authserver.Options
		setup func(*authserver.Server, url.Values)
	}{
		{"DenyAll", authserver.Options{DenyAll: true}, func(*authserver.Server, url.Values) {}},
		{"login_hint=deny", authserver.Options{}, func(_ *authserver.Server, q url.Values) { q.Set("login_hint", "deny") }},
		{"DenyNext", authserver.Options{}, func(s *authserver.Server, _ url.Values) { s.DenyNext() }},
		{"DenyAll beats the consent page", authserver.Options{DenyAll: true, ConsentPage: true}, func(*authserver.Server, url.Values) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.opts.IssParameter = true
			srv := start(t, tt.opts)
			q := authParams(oauth2.GenerateVerifier())
			tt.setup(srv, q)
			got := redirected(t, srv, q)
			if got.Get("error") != "access_denied" || got.Get("error_description") == "" ||
				got.Get("state") != "state-123" || got.Get("iss") != srv.URL() || got.Get("code") != "" {
				t.Fatalf("redirect query %v", got)
			}
			if st := srv.Stats(); st.Denials != 1 || st.Authorizations != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestDenyNextDeniesOnce(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	srv.DenyNext()
	srv.DenyNext()
	var errs []string
	for range 3 {
		errs = append(errs, redirected(t, srv, authParams(oauth2.GenerateVerifier())).Get("error"))
	}
	if errs[0] != "access_denied" || errs[1] != "access_denied" || errs[2] != "" {
		t.Fatalf("errors %q, want two denials then a code", errs)
	}
}

func TestLoginHintNamesUser(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	verifier := oauth2.GenerateVerifier()
	q := authParams(verifier)
	q.Set("login_hint", "alice")
	a := exchange(t, srv, confidential, getCode(t, srv, q), verifier)
	_, me := callAPI(t, srv, a.AccessToken)
	if me.User != "alice" || me.Repos[0].FullName != "alice/hello-world" || me.Scope != "read write" {
		t.Fatalf("API answer %+v", me)
	}
}
