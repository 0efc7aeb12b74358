package providers

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"strings"
	"testing"
)

// fapiConfig is a provider configuration that keeps every rule of the FAPI
// 2.0 profile, and fapiCredentials credentials that do.
func fapiConfig() Config {
	return Config{
		ID: "bank", AuthURL: "https://as.example/authorize", TokenURL: "https://as.example/token",
		PushedAuthURL: "https://as.example/par", Issuer: "https://as.example", DPoP: true,
		Profile: ProfileFAPI2,
	}
}

func fapiCredentials() Credentials {
	return Credentials{ClientID: "app", RedirectURL: "https://app.example/api/v1/oauth/callback", SigningKey: fapiKey, KeyID: "k1"}
}

// fapiKey signs the FAPI clients' assertions (ES256).
var fapiKey = func() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}()

func TestProfileFAPI2Builds(t *testing.T) {
	t.Parallel()
	p, err := NewOAuth2(fapiConfig(), fapiCredentials())
	if err != nil {
		t.Fatal(err)
	}
	cfg := p.Config()
	if !p.RequiresPKCE() || !p.PushesAuthorization() || cfg.PKCE != PKCERequired {
		t.Fatalf("FAPI 2.0 provider: PKCE required %v, pushes %v; want both", p.RequiresPKCE(), p.PushesAuthorization())
	}
	if iss, advertised := p.AuthorizationIssuer(); iss != "https://as.example" || !advertised {
		t.Fatalf("issuer %q advertised %v: want the issuer, required on every callback", iss, advertised)
	}
	ps256 := fapiCredentials()
	ps256.SigningKey = rsaKey(2048)
	if _, err := NewOAuth2(fapiConfig(), ps256); err != nil {
		t.Fatalf("an RSA key of 2048 bits, PS256: %v", err)
	}
	loopback := fapiCredentials()
	loopback.RedirectURL = "http://127.0.0.1:8080/api/v1/oauth/callback"
	if _, err := NewOAuth2(fapiConfig(), loopback); err != nil {
		t.Fatalf("a loopback http redirect URI (RFC 8252 §7.3): %v", err)
	}
}

// TestProfileFAPI2Refusals: each rule the configuration breaks refuses the
// provider when it is built, with ErrProfile and the rule's name.
func TestProfileFAPI2Refusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		break_ func(*Config, *Credentials)
		rule   string
	}{
		{"no PAR endpoint", func(c *Config, _ *Credentials) { c.PushedAuthURL = "" }, "shall use pushed authorization requests"},
		{"PKCE unsupported", func(c *Config, _ *Credentials) { c.PKCE = PKCEUnsupported }, "shall use PKCE with S256"},
		{"iss optional", func(c *Config, _ *Credentials) { c.IssOptional = true }, "shall check the iss parameter"},
		{"bearer tokens", func(c *Config, _ *Credentials) { c.DPoP = false }, "sender-constrained access tokens"},
		{"hybrid response type", func(c *Config, _ *Credentials) { c.AuthParams = map[string]string{"response_type": "code id_token"} }, "response_type shall be code"},
		{"response mode", func(c *Config, _ *Credentials) { c.AuthParams = map[string]string{"response_mode": "fragment"} }, "response_type shall be code"},
		{"a secret instead of a key", func(_ *Config, cr *Credentials) { cr.SigningKey, cr.KeyID, cr.ClientSecret = nil, "", "s" }, "shall authenticate with private_key_jwt"},
		{"a public client", func(_ *Config, cr *Credentials) { cr.SigningKey, cr.KeyID = nil, "" }, "shall authenticate with private_key_jwt"},
		{"RS256", func(_ *Config, cr *Credentials) { cr.SigningKey, cr.SigningAlg = rsaKey(2048), "RS256" }, "shall sign with PS256, ES256 or EdDSA"},
		{"a short RSA key", func(_ *Config, cr *Credentials) { cr.SigningKey = rsaKey(1024) }, "2048 bits at least"},
		{"http redirect", func(_ *Config, cr *Credentials) { cr.RedirectURL = "http://app.example/api/v1/oauth/callback" }, "exact https redirect URI"},
		{"no redirect", func(_ *Config, cr *Credentials) { cr.RedirectURL = "" }, "exact https redirect URI"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, cr := fapiConfig(), fapiCredentials()
			tt.break_(&cfg, &cr)
			if cr.RedirectURL == "" {
				cfg.DeviceAuthURL = "https://as.example/device" // else the credentials' own check refuses it first
			}
			_, err := NewOAuth2(cfg, cr)
			if !errors.Is(err, ErrProfile) || !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("err = %v, want ErrProfile", err)
			}
			if !strings.Contains(err.Error(), tt.rule) {
				t.Fatalf("err = %v, want the rule %q named", err, tt.rule)
			}
		})
	}
}

// rsaKey is a new RSA key of bits bits.
func rsaKey(bits int) *rsa.PrivateKey {
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		panic(err)
	}
	return k
}

func TestProfileUnknown(t *testing.T) {
	t.Parallel()
	cfg := fapiConfig()
	cfg.Profile = "fapi3"
	if _, err := NewOAuth2(cfg, fapiCredentials()); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), `unknown profile "fapi3"`) {
		t.Fatalf("err = %v, want an unknown profile refused", err)
	}
}

// TestWithProfile: the option puts a provider under the profile whatever
// its configuration says, so a plain configuration that breaks it is
// refused.
func TestWithProfile(t *testing.T) {
	t.Parallel()
	cfg := fapiConfig()
	cfg.Profile = ProfileNone
	cfg.DPoP = false
	if _, err := NewOAuth2(cfg, fapiCredentials()); err != nil {
		t.Fatalf("without the profile: %v", err)
	}
	if _, err := NewOAuth2(cfg, fapiCredentials(), WithProfile(ProfileFAPI2)); !errors.Is(err, ErrProfile) {
		t.Fatalf("WithProfile(ProfileFAPI2) on a bearer provider: err = %v, want ErrProfile", err)
	}
}

// fapiMetadata is the metadata of a server that runs the FAPI 2.0 profile
// for every client.
func fapiMetadata(base string) map[string]any {
	md := fullMetadata("")(base)
	md["pushed_authorization_request_endpoint"] = base + "/par"
	md["require_pushed_authorization_requests"] = true
	md["token_endpoint_auth_methods_supported"] = []string{"private_key_jwt", "tls_client_auth"}
	return md
}

func TestDiscoverFAPI2(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("metadata that describes the profile", func(t *testing.T) {
		t.Parallel()
		srv := metadataServer(t, false, "/.well-known/oauth-authorization-server", fapiMetadata)
		p, err := Discover(ctx, "bank", srv.URL, Credentials{ClientID: "app", RedirectURL: "http://127.0.0.1/cb", SigningKey: fapiKey})
		if err != nil {
			t.Fatal(err)
		}
		if p.Config().Profile != ProfileFAPI2 || !p.RequiresPKCE() || !p.PushesAuthorization() {
			t.Fatalf("profile %q, PKCE required %v, pushes %v: want the FAPI 2.0 profile read from the metadata", p.Config().Profile, p.RequiresPKCE(), p.PushesAuthorization())
		}
	})
	t.Run("a server that also takes secrets", func(t *testing.T) {
		t.Parallel()
		srv := metadataServer(t, false, "/.well-known/oauth-authorization-server", func(base string) map[string]any {
			md := fapiMetadata(base)
			md["token_endpoint_auth_methods_supported"] = []string{"private_key_jwt", "client_secret_basic"}
			return md
		})
		p, err := Discover(ctx, "bank", srv.URL, Credentials{ClientID: "app", ClientSecret: "s", RedirectURL: "http://127.0.0.1/cb"})
		if err != nil {
			t.Fatal(err)
		}
		if p.Config().Profile != ProfileNone {
			t.Fatalf("profile %q: a server that takes client secrets does not run FAPI 2.0 for every client", p.Config().Profile)
		}
	})
	t.Run("a server that does not require PAR", func(t *testing.T) {
		t.Parallel()
		srv := metadataServer(t, false, "/.well-known/oauth-authorization-server", func(base string) map[string]any {
			md := fapiMetadata(base)
			md["require_pushed_authorization_requests"] = false
			return md
		})
		p, err := Discover(ctx, "bank", srv.URL, Credentials{ClientID: "app", RedirectURL: "http://127.0.0.1/cb", SigningKey: fapiKey})
		if err != nil {
			t.Fatal(err)
		}
		if p.Config().Profile != ProfileNone || p.PushesAuthorization() {
			t.Fatalf("profile %q, pushes %v: a server that takes requests in the URL does not run FAPI 2.0", p.Config().Profile, p.PushesAuthorization())
		}
	})
	t.Run("WithProfile pushes to an optional PAR endpoint", func(t *testing.T) {
		t.Parallel()
		srv := metadataServer(t, false, "/.well-known/oauth-authorization-server", func(base string) map[string]any {
			md := fapiMetadata(base)
			md["require_pushed_authorization_requests"] = false
			return md
		})
		p, err := Discover(ctx, "bank", srv.URL, Credentials{ClientID: "app", RedirectURL: "http://127.0.0.1/cb", SigningKey: fapiKey}, WithProfile(ProfileFAPI2))
		if err != nil {
			t.Fatal(err)
		}
		if got := p.Config().PushedAuthURL; got != srv.URL+"/par" {
			t.Fatalf("PushedAuthURL = %q, want the metadata's endpoint", got)
		}
	})
	t.Run("WithProfile refuses a server without iss", func(t *testing.T) {
		t.Parallel()
		srv := metadataServer(t, false, "/.well-known/oauth-authorization-server", func(base string) map[string]any {
			md := fapiMetadata(base)
			delete(md, "authorization_response_iss_parameter_supported")
			return md
		})
		_, err := Discover(ctx, "bank", srv.URL, Credentials{ClientID: "app", RedirectURL: "http://127.0.0.1/cb", SigningKey: fapiKey}, WithProfile(ProfileFAPI2))
		if !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), "iss") {
			t.Fatalf("err = %v, want the iss rule", err)
		}
	})
}
