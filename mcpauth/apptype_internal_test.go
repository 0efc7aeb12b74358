package mcpauth

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

// A dynamic registration names its application_type, as the MCP 2026-07-28
// revision requires of every client (SEP-837): native for a loopback redirect
// (RFC 8252 §7.3), web for any other.
func TestRegistrationNamesItsApplicationType(t *testing.T) {
	for _, tc := range []struct{ redirect, want string }{
		{"http://127.0.0.1:1/api/v1/oauth/callback", "native"},
		{"https://app.example/api/v1/oauth/callback", "web"},
	} {
		got := make(chan map[string]any, 1)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var meta map[string]any
			_ = json.NewDecoder(r.Body).Decode(&meta)
			got <- meta
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(map[string]any{"client_id": "c", "token_endpoint_auth_method": "none"})
		}))
		t.Cleanup(srv.Close)
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		c, err := New(Config{Module: m, RedirectURL: tc.redirect, HTTPClient: srv.Client()})
		if err != nil {
			t.Fatal(err)
		}
		d := &Discovered{AS: ServerMetadata{RegistrationEndpoint: srv.URL + "/register"}}
		if _, err := c.register(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		if meta := waitfor.Recv(t, got, "the registration"); meta["application_type"] != tc.want {
			t.Errorf("redirect %s registered application_type %v, want %s", tc.redirect, meta["application_type"], tc.want)
		}
	}
}
