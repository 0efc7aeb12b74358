package mcpauth_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// keyedRequest is what a token request carried for the client's
// authentication.
type keyedRequest struct {
	grant, clientID, secret, basic, assertion string
}

// keyedAS is an authorization server whose one client, "app", authenticates
// with private_key_jwt alone, and which keeps what each token request
// carried.
type keyedAS struct {
	*authserver.Server
	url  string
	mu   sync.Mutex
	seen []keyedRequest
}

// newKeyedAS starts a keyedAS for the client's public key; its tokens live
// 30 s, inside the store's skew, so every read of one refreshes it.
func newKeyedAS(t *testing.T, pub any) *keyedAS {
	t.Helper()
	as := &keyedAS{}
	srv := httptest.NewUnstartedServer(nil)
	as.url = "http://" + srv.Listener.Addr().String()
	as.Server = authserver.New(authserver.Options{Issuer: as.url, AccessTokenTTL: 30 * time.Second,
		Clients: []authserver.Client{{ID: "app", PublicKey: pub, AllowLoopback: true,
			RedirectURIs: []string{"http://127.0.0.1:1/api/v1/oauth/callback"}}}})
	srv.Config.Handler = http.HandlerFunc(as.serve)
	srv.Start()
	t.Cleanup(srv.Close)
	return as
}

// serve notes a token request's client authentication and hands the
// request to the authorization server.
func (as *keyedAS) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost && r.URL.Path == authserver.PathToken {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		as.mu.Lock()
		as.seen = append(as.seen, keyedRequest{grant: form.Get("grant_type"), clientID: form.Get("client_id"),
			secret: form.Get("client_secret"), basic: r.Header.Get("Authorization"), assertion: form.Get("client_assertion")})
		as.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
	}
	as.Server.ServeHTTP(w, r)
}

func (as *keyedAS) requests() []keyedRequest {
	as.mu.Lock()
	defer as.mu.Unlock()
	return append([]keyedRequest(nil), as.seen...)
}

// resourceServer is an MCP server whose resource metadata names issuer as
// its authorization server, which proves that issuer.
func resourceServer(t *testing.T, issuer string) string {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": srv.URL + "/mcp", "authorization_servers": []string{issuer},
			"scopes_supported": []string{"notes:read"}})
	})
	return srv.URL + "/mcp"
}

// jwtClaims is what a client assertion says, its header's kid included.
type jwtClaims struct {
	Kid string
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	Aud any    `json:"aud"`
	Jti string `json:"jti"`
}

// readAssertion takes a client assertion's header and claims apart.
func readAssertion(t *testing.T, raw string) jwtClaims {
	t.Helper()
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		t.Fatalf("client assertion %q is no JWT", raw)
	}
	var header struct {
		Kid string `json:"kid"`
	}
	var c jwtClaims
	for i, dst := range []any{&header, &c} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(b, dst); err != nil {
			t.Fatal(err)
		}
	}
	c.Kid = header.Kid
	return c
}

// A user's sign-in at an MCP server whose authorization server takes the
// app's client with private_key_jwt alone: the code exchange and each
// refresh carry client_id and a new assertion signed with the app's key,
// named by its KeyID, for the issuer the resource metadata proved; no
// secret, no Basic header.
func TestPrivateKeyJWTUserSignIn(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	as := newKeyedAS(t, key.Public())
	in := newInstanceWith(t, oauthflow.NewMemoryKV(), nil, map[string]mcpauth.Client{as.url: {ID: "app",
		AuthMethod: "private_key_jwt", KeyID: "app-key-1", PrivateKeyPEM: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}})
	ctx := context.Background()
	id, err := in.conn.Connect(ctx, resourceServer(t, as.url), mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, in, "alice", id)
	if _, err := in.mod.Tokens.GetValidAccessToken(ctx, "alice", id); err != nil { // a 30 s token: refreshed
		t.Fatal(err)
	}

	reqs := as.requests()
	if len(reqs) != 2 || reqs[0].grant != "authorization_code" || reqs[1].grant != "refresh_token" {
		t.Fatalf("token requests %+v, want a code exchange and a refresh", reqs)
	}
	jtis := map[string]bool{}
	for _, r := range reqs {
		if r.secret != "" || r.basic != "" || r.clientID != "app" {
			t.Errorf("%s: client_id %q, client_secret %q, Authorization %q; want client_id app and no secret", r.grant, r.clientID, r.secret, r.basic)
		}
		c := readAssertion(t, r.assertion)
		if c.Aud != as.url || c.Iss != "app" || c.Sub != "app" || c.Kid != "app-key-1" {
			t.Errorf("%s: assertion %+v, want aud %s, iss and sub app, kid app-key-1", r.grant, c, as.url)
		}
		jtis[c.Jti] = true
	}
	if len(jtis) != len(reqs) {
		t.Errorf("%d jtis in %d assertions, want one each", len(jtis), len(reqs))
	}
	if st := as.Stats(); st.ClientAssertionsAccepted != 2 || st.CodesExchanged != 1 || st.Refreshes != 1 {
		t.Errorf("the server accepted %d assertions, exchanged %d codes, refreshed %d times; want 2, 1, 1",
			st.ClientAssertionsAccepted, st.CodesExchanged, st.Refreshes)
	}
}

// A 2025-03-26 server's metadata may claim any issuer; with the app's
// private_key_jwt client for every issuer ("*"), a sign-in there would
// sign assertions for the claimed issuer, which the claimed server would
// take, and the callback's iss check rests on the same issuer. So the
// sign-in is refused (ErrRegistration) before the claimant's token
// endpoint hears from the app.
func TestPrivateKeyJWTUserSignInRefusedForAClaimedIssuer(t *testing.T) {
	t.Parallel()
	c := newClaimant(t, "https://honest.example")
	in := newInstanceWith(t, oauthflow.NewMemoryKV(), nil,
		map[string]mcpauth.Client{"*": {ID: "app", AuthMethod: "private_key_jwt", PrivateKeyPEM: ecKey(t)}})
	id, err := in.conn.Connect(context.Background(), c.srv.URL+"/mcp", mcpauth.Challenge{})
	if err == nil {
		trySignIn(t, in, "alice", id)
	}
	if !errors.Is(err, mcpauth.ErrRegistration) {
		t.Errorf("Connect: %v, want ErrRegistration (a private_key_jwt sign-in for an unproven issuer)", err)
	}
	if reqs := c.requests(); len(reqs) != 0 {
		t.Errorf("the claimant's token endpoint received %q", reqs)
	}
}
