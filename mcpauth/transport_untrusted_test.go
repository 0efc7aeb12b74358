package mcpauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// countingTransport counts the requests to /mcp that carry a token, and
// passes every request to base.
type countingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	n    int
}

func (c *countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Path == "/mcp" && req.Header.Get("Authorization") != "" {
		c.mu.Lock()
		c.n++
		c.mu.Unlock()
	}
	return c.base.RoundTrip(req)
}

func (c *countingTransport) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// connectedClient connects alice to the fake's MCP server through the
// transport, signs her in, and returns the client and the server's URL.
func connectedClient(t *testing.T, f *fakeMCPAuth, in *instance) (*http.Client, string) {
	t.Helper()
	server := f.srv.URL + "/mcp"
	client := in.conn.Client(context.Background(), "alice", server)
	resp, err := client.Post(server, "application/json", strings.NewReader(`{}`))
	var ue *mcpauth.UnauthorizedError
	if !errors.As(err, &ue) {
		if err == nil {
			_ = resp.Body.Close()
		}
		t.Fatalf("first request: %v, want an UnauthorizedError", err)
	}
	signIn(t, in, "alice", ue.ProviderID)
	return client, server
}

func post(t *testing.T, c *http.Client, u string) int {
	t.Helper()
	resp, err := c.Post(u, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}

// The connection's token goes to its server's origin only: a URL elsewhere
// (the SSE transport posts to whatever URL the server's endpoint event
// names, and a server may redirect) gets no token, and a 401 from there
// connects nothing.
func TestTransportAuthorisesOnlyTheServersOrigin(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	in := newInstance(t, oauthflow.NewMemoryKV(), f.srv.Client())
	client, server := connectedClient(t, f, in)
	if status := post(t, client, server); status != http.StatusOK {
		t.Fatalf("the server itself: HTTP %d", status)
	}
	var mu sync.Mutex
	var got []string
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("Authorization"))
		mu.Unlock()
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+f.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(elsewhere.Close)
	resp, err := client.Post(elsewhere.URL+"/messages?session=1", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Errorf("another origin: %v, want its own 401 handed back", err)
	} else if _ = resp.Body.Close(); resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("another origin: HTTP %d, want its own 401 handed back", resp.StatusCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 || got[0] != "" {
		t.Fatalf("another origin got Authorization %q, want one request without a token", got)
	}
}

// Connected MCP calls go through Config.HTTPClient's transport (custom CAs,
// a proxy, an egress filter), not http.DefaultTransport.
func TestConnectedCallsUseTheAppsTransport(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	counting := &countingTransport{base: f.srv.Client().Transport}
	in := newInstance(t, oauthflow.NewMemoryKV(), &http.Client{Transport: counting})
	client, server := connectedClient(t, f, in)
	for range 3 {
		if status := post(t, client, server); status != http.StatusOK {
			t.Fatalf("HTTP %d", status)
		}
	}
	if n := counting.count(); n != 3 {
		t.Fatalf("the app's transport carried %d of the 3 connected calls", n)
	}
}
