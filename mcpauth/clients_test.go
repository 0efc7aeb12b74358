package mcpauth_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// secretsSeen records the client secret of each token request it carries.
type secretsSeen struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
}

func (s *secretsSeen) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/token") && req.Body != nil {
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<16))
		_ = req.Body.Close()
		if err != nil {
			return nil, err
		}
		form, _ := url.ParseQuery(string(body))
		_, basic, _ := req.BasicAuth()
		s.mu.Lock()
		s.seen = append(s.seen, form.Get("client_secret")+basic)
		s.mu.Unlock()
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	return s.base.RoundTrip(req)
}

func (s *secretsSeen) last() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.seen) == 0 {
		return ""
	}
	return s.seen[len(s.seen)-1]
}

// The app's pre-registered client is read at each use and never stored:
// the server record holds neither its ID nor its secret, and after the app
// rotates the secret (SetClients) the next token request, on every
// instance, sends the new one.
func TestRotatedClientSecretIsUsedAtOnce(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	kv := oauthflow.NewMemoryKV()
	wire := &secretsSeen{base: f.srv.Client().Transport}
	client := &http.Client{Transport: wire}
	clients := func(secret string) map[string]mcpauth.Client {
		return map[string]mcpauth.Client{f.srv.URL: {ID: "app-client", Secret: secret, AuthMethod: "client_secret_post"}}
	}
	a, b := newInstanceWith(t, kv, client, clients("secret-one")), newInstanceWith(t, kv, client, clients("secret-one"))
	ctx := context.Background()
	id, err := a.conn.Connect(ctx, f.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, a, "alice", id)
	if got := wire.last(); got != "secret-one" {
		t.Fatalf("the first token request sent %q, want secret-one", got)
	}
	record, err := kv.Get(ctx, "oauth:mcp:server:"+id)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(record, []byte("secret-one")) || bytes.Contains(record, []byte("app-client")) {
		t.Fatalf("the server record holds the app's client: %s", record)
	}
	if n := f.registrations.Load(); n != 0 {
		t.Fatalf("%d registrations for a pre-registered client", n)
	}

	a.conn.SetClients(clients("secret-two"))
	b.conn.SetClients(clients("secret-two"))
	signIn(t, a, "bob", id)
	if got := wire.last(); got != "secret-two" {
		t.Fatalf("after the rotation instance a sent %q, want secret-two", got)
	}
	signIn(t, b, "carol", id)
	if got := wire.last(); got != "secret-two" {
		t.Fatalf("after the rotation instance b sent %q, want secret-two", got)
	}
}

// A server reached with the app's own client credentials takes a rotated
// secret on its next grant too: its provider reads the client at each grant.
// (The fake knows only the first secret, so it refuses the second: what
// matters is which one was sent.)
func TestRotatedSecretReachesClientCredentials(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	wire := &secretsSeen{base: f.srv.Client().Transport}
	clients := func(secret string) map[string]mcpauth.Client {
		return map[string]mcpauth.Client{f.srv.URL: {ID: "agent-client", Secret: secret}}
	}
	in := newInstanceWith(t, oauthflow.NewMemoryKV(), &http.Client{Transport: wire}, clients("agent-secret"))
	ctx := context.Background()
	id, err := in.conn.ConnectAsClient(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	if got := wire.last(); got != "agent-secret" {
		t.Fatalf("the first grant sent %q, want agent-secret", got)
	}
	in.conn.SetClients(clients("rotated-secret"))
	// The fake's tokens live inside the store's skew: every read grants anew.
	_, _ = in.mod.Tokens.GetValidAccessToken(ctx, "agent", id)
	if got := wire.last(); got != "rotated-secret" {
		t.Fatalf("after the rotation the grant sent %q, want rotated-secret", got)
	}
}

// A client under "*" serves every authorization server any MCP server
// names, an attacker's among them: it may carry no secret. New refuses one
// that does (or that authenticates with a secret), with an error naming
// it; a public client and a private_key_jwt one (each assertion names its
// server as audience) are taken. A wildcard secret given later through
// SetClients is never sent: not by the client credentials grant, and not
// beside a workload's JWT.
func TestWildcardClientCarriesNoSecret(t *testing.T) {
	t.Parallel()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	for name, tc := range map[string]struct {
		client mcpauth.Client
		ok     bool
	}{
		"a secret":                      {mcpauth.Client{ID: "app", Secret: "s"}, false},
		"a secret, posted":              {mcpauth.Client{ID: "app", Secret: "s", AuthMethod: "client_secret_post"}, false},
		"client_secret_basic":           {mcpauth.Client{ID: "app", AuthMethod: "client_secret_basic"}, false},
		"a secret beside a private key": {mcpauth.Client{ID: "app", Secret: "s", AuthMethod: "private_key_jwt", PrivateKeyPEM: ecKey(t)}, false},
		"a public client":               {mcpauth.Client{ID: "app"}, true},
		"a public client, declared":     {mcpauth.Client{ID: "app", AuthMethod: "none"}, true},
		"private_key_jwt":               {mcpauth.Client{ID: "app", AuthMethod: "private_key_jwt", PrivateKeyPEM: ecKey(t)}, true},
	} {
		_, err := mcpauth.New(mcpauth.Config{Module: m, RedirectURL: "https://app.example/cb",
			Clients: map[string]mcpauth.Client{"*": tc.client, "https://as.example": {ID: "as-client", Secret: "as-secret"}}})
		switch {
		case tc.ok && err != nil:
			t.Errorf("%s under \"*\": %v, want it taken", name, err)
		case !tc.ok && (!errors.Is(err, oauthflow.ErrInvalidArgument) || !strings.Contains(err.Error(), `Clients["*"]`)):
			t.Errorf("%s under \"*\": %v, want ErrInvalidArgument naming Clients[\"*\"]", name, err)
		}
	}

	wildcard := map[string]mcpauth.Client{"*": {ID: "agent-client", Secret: "agent-secret"}}
	f := newFakeMCPAuth(t)
	wire := &secretsSeen{base: f.srv.Client().Transport}
	in := newInstanceWith(t, oauthflow.NewMemoryKV(), &http.Client{Transport: wire}, nil)
	in.conn.SetClients(wildcard)
	if _, err := in.conn.ConnectAsClient(context.Background(), f.srv.URL+"/mcp", "agent", mcpauth.Challenge{}); err == nil {
		t.Error("a client credentials grant connected with the wildcard's secret")
	}
	if got := wire.last(); got != "" {
		t.Errorf("a token request sent the wildcard's secret %q", got)
	}

	w, p := newWorkloadAS(t), &platform{}
	wl := newWorkloadInstance(t, oauthflow.NewMemoryKV(), w, p, nil)
	wl.conn.SetClients(wildcard)
	if _, err := wl.conn.ConnectAsWorkload(context.Background(), w.srv.URL+"/mcp", "agent", mcpauth.Challenge{}); err != nil {
		t.Fatal(err)
	}
	reqs, _ := w.seen()
	if len(reqs) != 1 || reqs[0].basicUser != "" || reqs[0].form.Has("client_secret") || reqs[0].form.Has("client_id") {
		t.Errorf("the workload's grants were %+v, want one with the JWT alone", reqs)
	}
}
