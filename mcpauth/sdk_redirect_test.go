package mcpauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// headerLog is a server that keeps the Authorization and DPoP headers of
// each request it gets, and answers 200.
type headerLog struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string
}

func newHeaderLog(t *testing.T) *headerLog {
	l := &headerLog{}
	l.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		l.seen = append(l.seen, r.Header.Get("Authorization")+r.Header.Get("DPoP"))
		l.mu.Unlock()
	}))
	t.Cleanup(l.srv.Close)
	return l
}

func (l *headerLog) headers() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.seen...)
}

// The SDK adapter's client sends the user's token to the MCP server's
// origin only. The SDK sets "Authorization: Bearer" on its request, and
// net/http copies it onto a redirect to the same host (any port, any
// scheme) or a subdomain: a redirect from the server to another origin is
// followed without it, as Tokens.Client does, and so is a request the SDK
// sends to another origin itself.
func TestOAuthHandlerClientKeepsTheTokenOnTheServersOrigin(t *testing.T) {
	t.Parallel()
	elsewhere := newHeaderLog(t) // same host, another port: another origin
	var mu sync.Mutex
	var atServer []string
	mcp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		atServer = append(atServer, r.Header.Get("Authorization"))
		mu.Unlock()
		http.Redirect(w, r, elsewhere.srv.URL+"/elsewhere", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(mcp.Close)
	server := mcp.URL + "/mcp"
	in := newInstance(t, oauthflow.NewMemoryKV(), nil)
	id, err := mcpauth.ProviderID(server)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := in.mod.Tokens.StoreFromTokenSet(ctx, "alice", id, &oauthflow.TokenSet{AccessToken: "alice-token", ExpiresIn: 3600}); err != nil {
		t.Fatal(err)
	}
	h := &mcpauth.OAuthHandler{Connector: in.conn, UserID: "alice", ServerURL: server}
	client := h.HTTPClient(nil)
	for _, target := range []string{server, elsewhere.srv.URL + "/sse"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer alice-token") // as the SDK sets it
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("POST %s: %v", target, err)
		}
		_ = resp.Body.Close()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(atServer) != 1 || atServer[0] != "Bearer alice-token" {
		t.Fatalf("the MCP server got Authorization %q, want the token once", atServer)
	}
	if got := elsewhere.headers(); len(got) != 2 || got[0] != "" || got[1] != "" {
		t.Fatalf("another origin got Authorization and DPoP %q, want two requests without them", got)
	}
}
