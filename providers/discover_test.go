package providers

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// metadataServer serves md at path; fill rewrites md with the server's URL.
func metadataServer(t *testing.T, tls bool, path string, fill func(base string) map[string]any) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != path {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(fill(srv.URL))
	})
	if tls {
		srv = httptest.NewTLSServer(h)
	} else {
		srv = httptest.NewServer(h)
	}
	t.Cleanup(srv.Close)
	return srv
}

func fullMetadata(issuerPath string) func(string) map[string]any {
	return func(base string) map[string]any {
		iss := base + issuerPath
		return map[string]any{
			"issuer":                           iss,
			"authorization_endpoint":           iss + "/auth",
			"token_endpoint":                   iss + "/token",
			"revocation_endpoint":              iss + "/token/revocation",
			"code_challenge_methods_supported": []string{"S256"},
			"authorization_response_iss_parameter_supported": true,
			"token_endpoint_auth_methods_supported":          []string{"client_secret_basic", "client_secret_post", "none"},
			"scopes_supported":                               []string{"openid", "offline_access"},
			"dpop_signing_alg_values_supported":              []string{"RS256", "ES256"},
		}
	}
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, issuerPath string
	}{
		{"rfc 8414", "/.well-known/oauth-authorization-server", ""},
		{"rfc 8414 with issuer path", "/.well-known/oauth-authorization-server/tenant/a", "/tenant/a"},
		{"openid fallback", "/.well-known/openid-configuration", ""},
		{"openid with issuer path", "/tenant/a/.well-known/openid-configuration", "/tenant/a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := metadataServer(t, false, tt.path, fullMetadata(tt.issuerPath))
			iss := srv.URL + tt.issuerPath
			p, err := Discover(context.Background(), "local", iss, testCreds, WithHTTPClient(srv.Client()))
			if err != nil {
				t.Fatal(err)
			}
			cfg := p.Config()
			if cfg.AuthURL != iss+"/auth" || cfg.TokenURL != iss+"/token" || cfg.RevocationURL != iss+"/token/revocation" {
				t.Errorf("endpoints %+v", cfg)
			}
			if !p.SupportsPKCE() || p.Issuer() != iss || !p.CanRevoke() || cfg.AuthStyle != AuthStyleHeader || strings.Join(p.DefaultScopes(), " ") != "openid" {
				t.Errorf("pkce %v issuer %q revoke %v style %q scopes %v", p.SupportsPKCE(), p.Issuer(), p.CanRevoke(), cfg.AuthStyle, p.DefaultScopes())
			}
			if !p.UsesDPoP() {
				t.Error("ES256 among dpop_signing_alg_values_supported: the grants are to be bound (DPoP)")
			}
		})
	}
}

func TestDiscoverWithAuthStyle(t *testing.T) {
	t.Parallel()
	srv := metadataServer(t, false, "/.well-known/oauth-authorization-server", fullMetadata(""))
	p, err := Discover(context.Background(), "local", srv.URL, testCreds, WithHTTPClient(srv.Client()), WithAuthStyle(AuthStyleParams))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config().AuthStyle; got != AuthStyleParams {
		t.Errorf("auth style %q, want %q: WithAuthStyle overrides the discovered choice", got, AuthStyleParams)
	}
}

func TestDiscoverCapabilities(t *testing.T) {
	t.Parallel()
	srv := metadataServer(t, false, "/.well-known/openid-configuration", func(base string) map[string]any {
		return map[string]any{
			"issuer": base, "authorization_endpoint": base + "/a", "token_endpoint": base + "/t",
			"code_challenge_methods_supported":      []string{"plain"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_post"},
			"dpop_signing_alg_values_supported":     []string{"RS256"},
		}
	})
	p, err := Discover(context.Background(), "local", srv.URL, testCreds, WithHTTPClient(srv.Client()), WithScopes("profile"))
	if err != nil {
		t.Fatal(err)
	}
	if p.SupportsPKCE() || p.Issuer() != "" || p.CanRevoke() || p.Config().AuthStyle != AuthStyleParams || p.DefaultScopes()[0] != "profile" {
		t.Errorf("pkce %v issuer %q revoke %v style %q scopes %v", p.SupportsPKCE(), p.Issuer(), p.CanRevoke(), p.Config().AuthStyle, p.DefaultScopes())
	}
	// The issuer is recorded though the server does not send iss (SEP-2468):
	// a callback naming another one is refused, one without iss accepted.
	if iss, advertised := p.AuthorizationIssuer(); iss != srv.URL || advertised {
		t.Errorf("AuthorizationIssuer %q, %v; want %q, false", iss, advertised, srv.URL)
	}
	if p.UsesDPoP() {
		t.Error("no ES256 among dpop_signing_alg_values_supported: we sign ES256 only, so no DPoP")
	}
}

func TestDiscoverRejects(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tls  bool
		fill func(string) map[string]any
		want error
	}{
		{"issuer mismatch", false, func(base string) map[string]any {
			md := fullMetadata("")(base)
			md["issuer"] = "https://evil.example"
			return md
		}, ErrIssuerMismatch},
		{"issuer trailing slash", false, func(base string) map[string]any {
			md := fullMetadata("")(base)
			md["issuer"] = base + "/"
			return md
		}, ErrIssuerMismatch},
		{"no token endpoint", false, func(base string) map[string]any {
			md := fullMetadata("")(base)
			delete(md, "token_endpoint")
			return md
		}, ErrDiscovery},
		{"http endpoint for https issuer", true, func(base string) map[string]any {
			md := fullMetadata("")(base)
			md["token_endpoint"] = "http://plain.example/token"
			return md
		}, ErrDiscovery},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := metadataServer(t, tt.tls, "/.well-known/oauth-authorization-server", tt.fill)
			_, err := Discover(context.Background(), "local", srv.URL, testCreds, WithHTTPClient(srv.Client()))
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDiscoverNoMetadata(t *testing.T) {
	t.Parallel()
	srv := metadataServer(t, false, "/nowhere", nil)
	_, err := Discover(context.Background(), "local", srv.URL, testCreds, WithHTTPClient(srv.Client()))
	if !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("err = %v", err)
	}
	if _, err := Discover(context.Background(), "local", "not a url", testCreds); !errors.Is(err, ErrDiscovery) {
		t.Fatalf("bad issuer: %v", err)
	}
}

func TestDiscoverHTTPS(t *testing.T) {
	t.Parallel()
	srv := metadataServer(t, true, "/.well-known/openid-configuration", fullMetadata(""))
	p, err := Discover(context.Background(), "tls", srv.URL, testCreds, WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if p.client != srv.Client() {
		t.Error("the discovered provider does not use the given client")
	}
}
