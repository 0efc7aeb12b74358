package mcpauth

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
)

// newCountingRegistrations is a registration endpoint that counts its
// registrations and names each client after its count.
func newCountingRegistrations(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "client-" + string(rune('0'+n.Add(1))),
			"token_endpoint_auth_method": "none"})
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func newTestConnector(t *testing.T, client *http.Client) *Connector {
	t.Helper()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	c, err := New(Config{Module: m, RedirectURL: "http://127.0.0.1:1/cb", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// A stored registration serves only the discovery it fits: made at the
// verified issuer, through the registration endpoint discovery names now,
// and not about to expire. Any other is replaced by a new registration.
func TestRegistrationServesOnlyWhatItFits(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		stored func(reg *registration)
		reused bool
	}{
		{"fits", func(*registration) {}, true},
		{"another registration endpoint", func(reg *registration) { reg.Endpoint = "https://elsewhere.example/register" }, false},
		{"another issuer", func(reg *registration) { reg.Issuer = "https://elsewhere.example" }, false},
		{"secret about to expire", func(reg *registration) { reg.Expires = time.Now().Add(expiryMargin / 2) }, false},
		{"secret expiring later", func(reg *registration) { reg.Expires = time.Now().Add(time.Hour) }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, n := newCountingRegistrations(t)
			c := newTestConnector(t, srv.Client())
			d := &Discovered{Resource: "https://mcp.example/mcp", PRM: &ResourceMetadata{}, AS: ServerMetadata{
				Issuer: "https://as.example", RegistrationEndpoint: srv.URL + "/register"}}
			reg := registration{Client: Client{ID: "stored", AuthMethod: "none"}, Issuer: verifiedIssuer(d),
				Endpoint: d.AS.RegistrationEndpoint, Server: d.Resource, At: time.Now()}
			tc.stored(&reg)
			if err := c.storeRegistration(context.Background(), registrationKey(d), reg); err != nil {
				t.Fatal(err)
			}
			cl, err := c.client(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			if reused := cl.ID == "stored"; reused != tc.reused || n.Load() == 0 == !tc.reused {
				t.Fatalf("client %q after %d registrations; want the stored one reused: %v", cl.ID, n.Load(), tc.reused)
			}
		})
	}
}

// The verified issuer of a 2025-03-26 server (no resource metadata) is its
// origin, whatever its metadata claims; with resource metadata, it is the
// authorization server the metadata names.
func TestVerifiedIssuer(t *testing.T) {
	t.Parallel()
	legacy := &Discovered{Resource: "https://a.example/mcp", AS: ServerMetadata{Issuer: "https://b.example"}}
	if got := verifiedIssuer(legacy); got != "https://a.example" {
		t.Errorf("legacy server: %q, want its origin", got)
	}
	prm := &Discovered{Resource: "https://a.example/mcp", PRM: &ResourceMetadata{}, AS: ServerMetadata{Issuer: "https://b.example/"}}
	if got := verifiedIssuer(prm); got != "https://b.example" {
		t.Errorf("server with resource metadata: %q, want its authorization server", got)
	}
}

// Which refusals heal a registration: at the token endpoint, those of the
// client (not of the user's grant); at the authorization page, those and an
// invalid_request about the client or its redirect URI.
func TestRefusalsThatHeal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code, description string
		token, authorize  bool
	}{
		{"invalid_client", "", true, true},
		{"unauthorized_client", "", true, true},
		{"invalid_grant", "", false, false},
		{"access_denied", "", false, false},
		{"invalid_request", "Unknown client_id", false, true},
		{"invalid_request", "redirect_uri is not registered", false, true},
		{"invalid_request", "missing code_challenge", false, false},
	} {
		if got := clientRefused(tc.code); got != tc.token {
			t.Errorf("token endpoint %s: heals %v, want %v", tc.code, got, tc.token)
		}
		if got := refusedAtAuthorize(tc.code, tc.description); got != tc.authorize {
			t.Errorf("authorization page %s %q: heals %v, want %v", tc.code, tc.description, got, tc.authorize)
		}
	}
}
