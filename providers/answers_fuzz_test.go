package providers

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// cannedServer answers every request with the answer last set.
type cannedServer struct {
	mu          sync.Mutex
	status      int
	contentType string
	body        string
}

func (s *cannedServer) set(status int, contentType, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.contentType, s.body = status, contentType, body
}

func (s *cannedServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	status, contentType, body := s.status, s.contentType, s.body
	s.mu.Unlock()
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// Whatever a token endpoint answers, an exchange and a refresh never panic,
// succeed only with an access token, and fail only with a *ProviderError (or
// the caller's bad argument).
func FuzzTokenAnswer(f *testing.F) {
	for _, seed := range []struct {
		status      int
		contentType string
		body        string
	}{
		{200, "application/json", `{"access_token":"a","token_type":"bearer","expires_in":3600,"refresh_token":"r"}`},
		{200, "application/x-www-form-urlencoded", `access_token=a&token_type=bearer&scope=repo`},
		{200, "application/json", `{"ok":false,"error":"invalid_auth"}`},
		{400, "application/json", `{"error":"invalid_grant","error_description":"expired"}`},
		{200, "application/json", `{"access_token":"a","expires_in":"3600","scope":["x","y"],"token_type":"Bearer"}`},
		{503, "text/html", `<html>busy</html>`},
		{200, "application/json", `{"authed_user":{"access_token":"u"}}`},
		{200, "application/json", `{`},
		{401, "", ``},
		{200, "application/json", `{"token_type":"bearer","expires_in":60}`},
	} {
		f.Add(seed.status, seed.contentType, seed.body)
	}
	srv := &cannedServer{}
	ts := httptest.NewServer(srv)
	f.Cleanup(ts.Close)
	p, err := NewOAuth2(Config{ID: "p", AuthURL: ts.URL + "/a", TokenURL: ts.URL + "/t", AuthStyle: AuthStyleParams,
		UserTokenField: "authed_user", ErrorCodeField: "status"},
		Credentials{ClientID: "id", ClientSecret: "s", RedirectURL: "https://app.example/cb"})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, status int, contentType, body string) {
		if status < 200 || status > 599 || strings.ContainsAny(contentType, "\r\n") {
			return
		}
		srv.set(status, contentType, body)
		for name, call := range map[string]func() (*oauthflow.TokenSet, error){
			"exchange":          func() (*oauthflow.TokenSet, error) { return p.ExchangeCode(context.Background(), "code") },
			"exchange+verifier": func() (*oauthflow.TokenSet, error) { return p.ExchangeCodeVerifier(context.Background(), "code", "v") },
			"refresh":           func() (*oauthflow.TokenSet, error) { return p.RefreshToken(context.Background(), "rt") },
		} {
			ts, err := call()
			var pe *oauthflow.ProviderError
			switch {
			case err == nil && (ts == nil || ts.AccessToken == ""):
				t.Fatalf("%s: HTTP %d %q %q: success without an access token", name, status, contentType, body)
			case err != nil && !errors.As(err, &pe):
				t.Fatalf("%s: HTTP %d %q %q: %T %v, not a *ProviderError", name, status, contentType, body, err, err)
			}
		}
	})
}

// Whatever the metadata document holds, discovery never panics, and a
// provider it builds has both endpoints and names the issuer asked for.
func FuzzDiscoveryMetadata(f *testing.F) {
	for _, seed := range []string{
		`{"issuer":"ISSUER","authorization_endpoint":"ISSUER/a","token_endpoint":"ISSUER/t","code_challenge_methods_supported":["S256"]}`,
		`{"issuer":"ISSUER","authorization_endpoint":"","token_endpoint":"ISSUER/t"}`,
		`{"issuer":"https://other.example","authorization_endpoint":"x","token_endpoint":"y"}`,
		`{"issuer":"ISSUER","authorization_endpoint":"ISSUER/a","token_endpoint":"ISSUER/t","token_endpoint_auth_methods_supported":["client_secret_post"],"scopes_supported":["openid"],"authorization_response_iss_parameter_supported":true}`,
		`{"issuer":"https://other.example","authorization_endpoint":"ISSUER/a","token_endpoint":"ISSUER/t","authorization_response_iss_parameter_supported":true}`,
		`[]`, `null`, `{"issuer":1}`,
	} {
		f.Add(seed)
	}
	srv := &cannedServer{}
	ts := httptest.NewServer(srv)
	f.Cleanup(ts.Close)
	f.Fuzz(func(t *testing.T, doc string) {
		srv.set(http.StatusOK, "application/json", strings.ReplaceAll(doc, "ISSUER", ts.URL))
		p, err := Discover(context.Background(), "p", ts.URL, Credentials{ClientID: "id", RedirectURL: "https://app.example/cb"})
		if err != nil {
			return
		}
		cfg := p.Config()
		if cfg.AuthURL == "" || cfg.TokenURL == "" {
			t.Fatalf("%q: a provider without its endpoints: %+v", doc, cfg)
		}
		if cfg.Issuer != "" && cfg.Issuer != ts.URL {
			t.Fatalf("%q: the provider names issuer %q, not %q", doc, cfg.Issuer, ts.URL)
		}
	})
}
