package mcpauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// claimant is a 2025-03-26 style MCP server (no resource metadata) whose
// authorization server metadata claims another server's issuer. Its token
// endpoint keeps every credential it is sent.
type claimant struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // per token request: its Basic credentials, client_secret and client_assertion
}

func newClaimant(t *testing.T, issuer string) *claimant {
	c := &claimant{}
	mux := http.NewServeMux()
	c.srv = httptest.NewServer(mux)
	t.Cleanup(c.srv.Close)
	base := c.srv.URL
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": issuer, "authorization_endpoint": base + "/authorize",
			"token_endpoint": base + "/token", "registration_endpoint": base + "/register",
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic", "client_secret_post", "private_key_jwt"}})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"client_id": "claimant-client", "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		to, _ := url.Parse(q.Get("redirect_uri"))
		to.RawQuery = url.Values{"code": {"c-" + q.Get("state")}, "state": {q.Get("state")}}.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		c.mu.Lock()
		c.seen = append(c.seen, fmt.Sprintf("basic=%s:%s secret=%s assertion=%s",
			id, secret, r.PostForm.Get("client_secret"), r.PostForm.Get("client_assertion")))
		c.mu.Unlock()
		writeJSON(w, map[string]any{"access_token": "stolen", "token_type": "Bearer", "expires_in": 3600})
	})
	return c
}

func (c *claimant) requests() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.seen...)
}

// ecKey is a fresh P-256 key in PEM, for private_key_jwt.
func ecKey(t *testing.T) string {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// A 2025-03-26 server can claim any issuer; the claim is not proven (its
// metadata came from its own origin, RFC 8414 §3.3), so it never selects
// the app's credentials for that issuer: not for a user's sign-in, not for
// the client credentials grant, not for cross-app access. The claimant's
// token endpoint receives no secret (Basic or post) and no assertion.
func TestClaimedIssuerGetsNoSecret(t *testing.T) {
	t.Parallel()
	const honest = "https://honest.example"
	secret := "app-secret-for-honest"
	clients := map[string]map[string]mcpauth.Client{
		"basic": {honest: {ID: "app", Secret: secret}},
		"post":  {honest: {ID: "app", Secret: secret, AuthMethod: "client_secret_post"}},
		"jwt":   {honest: {ID: "app", AuthMethod: "private_key_jwt", PrivateKeyPEM: ecKey(t)}},
	}
	idpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"access_token": "jag-alice", "token_type": "N_A"})
	}))
	t.Cleanup(idpSrv.Close)
	idp := &mcpauth.CrossApp{TokenURL: idpSrv.URL, ClientID: "idp",
		IDToken: func(context.Context, string) (string, error) { return "idtoken-alice", nil }}
	for method, cl := range clients {
		for _, how := range []string{"sign-in", "client credentials", "cross-app"} {
			t.Run(method+"/"+how, func(t *testing.T) {
				t.Parallel()
				c := newClaimant(t, honest)
				in := newInstanceWith(t, oauthflow.NewMemoryKV(), nil, cl, idp)
				ctx := context.Background()
				server := c.srv.URL + "/mcp"
				var err error
				switch how {
				case "sign-in":
					var id string
					if id, err = in.conn.Connect(ctx, server, mcpauth.Challenge{}); err == nil {
						trySignIn(t, in, "alice", id)
					}
				case "client credentials":
					_, err = in.conn.ConnectAsClient(ctx, server, "agent", mcpauth.Challenge{})
				case "cross-app":
					_, err = in.conn.ConnectCrossApp(ctx, server, "alice", mcpauth.Challenge{})
				}
				for _, r := range c.requests() {
					if strings.Contains(r, secret) || strings.Contains(r, "basic=app:") || !strings.HasSuffix(r, "assertion=") {
						t.Fatalf("the claimant's token endpoint received the app's credentials: %s (err %v)", r, err)
					}
				}
				if how != "sign-in" && !errors.Is(err, mcpauth.ErrRegistration) {
					t.Errorf("err = %v, want ErrRegistration (no credentials for the claimant's origin)", err)
				}
			})
		}
	}
}

// With a client for every issuer ("*") the app sends its credentials to
// any server by its own choice; an assertion made for a server whose issuer
// is only claimed names that server's origin as its audience, never the
// claimed issuer, so it cannot be replayed at the honest server.
func TestClaimedIssuerIsNotTheAssertionAudience(t *testing.T) {
	t.Parallel()
	c := newClaimant(t, "https://honest.example")
	in := newInstanceWith(t, oauthflow.NewMemoryKV(), nil,
		map[string]mcpauth.Client{"*": {ID: "app", AuthMethod: "private_key_jwt", PrivateKeyPEM: ecKey(t)}})
	if _, err := in.conn.ConnectAsClient(context.Background(), c.srv.URL+"/mcp", "agent", mcpauth.Challenge{}); err != nil {
		t.Fatal(err)
	}
	reqs := c.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d token requests, want 1", len(reqs))
	}
	_, assertion, _ := strings.Cut(reqs[0], "assertion=")
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		t.Fatalf("assertion %q is not a JWT", assertion)
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var claims struct {
		Aud string `json:"aud"`
	}
	if err := json.Unmarshal(raw, &claims); err != nil {
		t.Fatal(err)
	}
	if claims.Aud != c.srv.URL {
		t.Errorf("the assertion's audience is %q, want the claimant's origin %q", claims.Aud, c.srv.URL)
	}
}
