package mcpauth_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// newClaimingServer is a 2025-03-26 style MCP server (no resource
// metadata) whose authorization server metadata claims issuer, another
// server's, and whose registration endpoint hands out "poison-client".
func newClaimingServer(t *testing.T, issuer string) *httptest.Server {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": issuer, "authorization_endpoint": srv.URL + "/authorize",
			"token_endpoint": srv.URL + "/token", "registration_endpoint": srv.URL + "/register",
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"}})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"client_id": "poison-client", "token_endpoint_auth_method": "none"})
	})
	return srv
}

// Registration poisoning: server A's metadata claims server B's issuer. A's
// registration (made at A's endpoint) must not be stored where B's
// sign-ins find it: B's sign-in uses a client B registered.
func TestClaimedIssuerDoesNotPoisonRegistrations(t *testing.T) {
	t.Parallel()
	b := newFakeMCPAuth(t)
	a := newClaimingServer(t, b.srv.URL)
	in := newInstance(t, oauthflow.NewMemoryKV(), b.srv.Client())
	ctx := context.Background()
	if _, err := in.conn.Connect(ctx, a.URL+"/mcp", mcpauth.Challenge{}); err != nil {
		t.Logf("server A refused: %v", err) // refusing A's claim outright is as good
	}
	id, err := in.conn.Connect(ctx, b.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, in, "alice", id)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.lastClient == "poison-client" {
		t.Fatal("B's sign-in used the client server A registered under B's issuer")
	}
	if n := b.registrations.Load(); n != 1 {
		t.Fatalf("B saw %d registrations, want 1", n)
	}
}
