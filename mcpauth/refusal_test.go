package mcpauth_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// refusingMCP is an MCP server whose authorization server is the fake's: it
// asks for a sign-in (401) without a token and, with one, refuses the request
// with 403 and the WWW-Authenticate it is given (none when "").
type refusingMCP struct {
	srv       *httptest.Server
	mu        sync.Mutex
	challenge string
}

func newRefusingMCP(t *testing.T, as *fakeMCPAuth) *refusingMCP {
	m := &refusingMCP{}
	mux := http.NewServeMux()
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": m.srv.URL + "/mcp", "authorization_servers": []string{as.srv.URL},
			"scopes_supported": []string{"notes:read"}})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer at-") {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+m.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		m.mu.Lock()
		challenge := m.challenge
		m.mu.Unlock()
		if challenge != "" {
			w.Header().Set("WWW-Authenticate", challenge)
		}
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "refused by the server's own policy")
	})
	return m
}

func (m *refusingMCP) refuseWith(challenge string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.challenge = challenge
}

// Only a 403 insufficient_scope asks for a sign-in (a ScopeError). Any other
// 403 is the server's own refusal, which no sign-in can help: the transport
// hands it back as the server's answer, body and all, never as ErrNoToken.
func TestTransportHandsBackTheServersOwnRefusal(t *testing.T) {
	t.Parallel()
	as := newFakeMCPAuth(t)
	mcp := newRefusingMCP(t, as)
	in := newInstance(t, oauthflow.NewMemoryKV(), as.srv.Client())
	server := mcp.srv.URL + "/mcp"
	client := in.conn.Client(context.Background(), "alice", server)
	post := func() (*http.Response, error) {
		return client.Post(server, "application/json", strings.NewReader(`{}`))
	}

	_, err := post()
	var ue *mcpauth.UnauthorizedError
	if !errors.As(err, &ue) || !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("first request: %v, want an UnauthorizedError wrapping ErrNoToken", err)
	}
	signIn(t, in, "alice", ue.ProviderID)

	for _, challenge := range []string{"", `Bearer realm="notes"`, `Bearer error="invalid_request", error_description="not in the beta"`} {
		mcp.refuseWith(challenge)
		resp, err := post()
		if err != nil {
			t.Fatalf("a 403 with WWW-Authenticate %q: %v; want the server's answer", challenge, err)
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || string(body) != "refused by the server's own policy" {
			t.Fatalf("a 403 with WWW-Authenticate %q came back as HTTP %d %q", challenge, resp.StatusCode, body)
		}
	}

	mcp.refuseWith(`Bearer error="insufficient_scope", scope="notes:write"`)
	_, err = post()
	var se *oauthflow.ScopeError
	if !errors.As(err, &se) || strings.Join(se.Missing, " ") != "notes:write" {
		t.Fatalf("403 insufficient_scope: %v, want a ScopeError missing notes:write", err)
	}
}
