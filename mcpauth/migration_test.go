package mcpauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
	"golang.org/x/oauth2"
)

// authServer is an authorization server of the migration tests. Clients
// register with a secret (client_secret_basic), sign-ins consent at once,
// tokens live 30 s (inside the store's skew: every read refreshes) and
// refresh tokens rotate. A refresh token is taken only from the client it
// was issued to (RFC 6749 §6). It logs every request it gets, whole, and keeps
// every secret it gave out or was given (client IDs and secrets, codes,
// verifiers, tokens), so a test can tell whether another server's reached it.
type authServer struct {
	name          string
	srv           *httptest.Server
	registrations atomic.Int64

	mu         sync.Mutex
	n          int
	log        []string          // every request: method, path and query, Authorization, body
	secrets    []string          // what it issued or was given
	clients    map[string]string // client ID -> secret
	challenges map[string]string // code -> code_challenge
	refresh    map[string]string // live refresh tokens -> the client they were issued to ("": any)
	keep       bool              // a refresh answers without a new refresh token: the one sent stays
	calls      map[string]int    // requests per path
}

func newAuthServer(t *testing.T, name string) *authServer {
	a := &authServer{name: name, clients: map[string]string{}, challenges: map[string]string{},
		refresh: map[string]string{}, calls: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", a.metadata)
	mux.HandleFunc("POST /register", a.register)
	mux.HandleFunc("GET /authorize", a.authorize)
	mux.HandleFunc("POST /token", a.token)
	mux.HandleFunc("POST /revoke", func(w http.ResponseWriter, r *http.Request) {})
	a.srv = httptest.NewServer(a.logged(mux))
	t.Cleanup(a.srv.Close)
	return a
}

// logged logs each request before mux answers it.
func (a *authServer) logged(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		a.mu.Lock()
		a.log = append(a.log, r.Method+" "+r.URL.RequestURI()+"\n"+r.Header.Get("Authorization")+"\n"+string(body))
		a.calls[r.URL.Path]++
		a.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		mux.ServeHTTP(w, r)
	})
}

func (a *authServer) metadata(w http.ResponseWriter, r *http.Request) {
	base := a.srv.URL
	writeJSON(w, map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize",
		"token_endpoint": base + "/token", "registration_endpoint": base + "/register", "revocation_endpoint": base + "/revoke",
		"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"client_secret_basic"}})
}

func (a *authServer) register(w http.ResponseWriter, r *http.Request) {
	n := a.registrations.Add(1)
	id, secret := fmt.Sprintf("%s-client-%d", a.name, n), fmt.Sprintf("%s-secret-%d", a.name, n)
	a.mu.Lock()
	a.clients[id] = secret
	a.secrets = append(a.secrets, id, secret)
	a.mu.Unlock()
	w.WriteHeader(http.StatusCreated)
	writeJSON(w, map[string]any{"client_id": id, "client_secret": secret, "token_endpoint_auth_method": "client_secret_basic"})
}

func (a *authServer) authorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	a.mu.Lock()
	a.n++
	code := fmt.Sprintf("%s-code-%d", a.name, a.n)
	a.challenges[code] = q.Get("code_challenge")
	a.secrets = append(a.secrets, code)
	a.mu.Unlock()
	to, _ := url.Parse(q.Get("redirect_uri"))
	to.RawQuery = url.Values{"code": {code}, "state": {q.Get("state")}}.Encode()
	http.Redirect(w, r, to.String(), http.StatusFound)
}

func (a *authServer) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	id, secret, _ := r.BasicAuth()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.clients[id] == "" || a.clients[id] != secret {
		tokenError(w, http.StatusUnauthorized, "invalid_client")
		return
	}
	switch r.Form.Get("grant_type") {
	case "authorization_code":
		a.secrets = append(a.secrets, r.Form.Get("code_verifier"))
		sum := sha256.Sum256([]byte(r.Form.Get("code_verifier")))
		challenge, ok := a.challenges[r.Form.Get("code")]
		delete(a.challenges, r.Form.Get("code"))
		if !ok || challenge != base64.RawURLEncoding.EncodeToString(sum[:]) {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
	case "refresh_token":
		if to, ok := a.refresh[r.Form.Get("refresh_token")]; !ok || to != "" && to != id {
			tokenError(w, http.StatusBadRequest, "invalid_grant")
			return
		}
		if a.keep {
			a.n++
			at := fmt.Sprintf("%s-at-%d", a.name, a.n)
			a.secrets = append(a.secrets, at)
			writeJSON(w, map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": 30})
			return
		}
		delete(a.refresh, r.Form.Get("refresh_token"))
	}
	a.n++
	at, rt := fmt.Sprintf("%s-at-%d", a.name, a.n), fmt.Sprintf("%s-rt-%d", a.name, a.n)
	a.refresh[rt] = id
	a.secrets = append(a.secrets, at, rt)
	writeJSON(w, map[string]any{"access_token": at, "refresh_token": rt, "token_type": "Bearer", "expires_in": 30})
}

// tokenError answers a token request with an RFC 6749 §5.2 error.
func tokenError(w http.ResponseWriter, status int, code string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code})
}

// allow has the server take the client id with secret, as if the app
// pre-registered it there.
func (a *authServer) allow(id, secret string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.clients[id] = secret
}

// plant makes rt a live refresh token of the server's, as if it issued it
// (to whichever client presents it).
func (a *authServer) plant(rt string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refresh[rt] = ""
	a.secrets = append(a.secrets, rt)
}

// end has the server refuse rt from now on, as if the user revoked the grant.
func (a *authServer) end(rt string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.refresh, rt)
}

// given is every secret the server gave out or was given.
func (a *authServer) given() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.secrets)
}

// saw reports the first request the server got with s in it.
func (a *authServer) saw(s string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, req := range a.log {
		if strings.Contains(req, s) {
			return req, true
		}
	}
	return "", false
}

// called is how many requests the server got at path.
func (a *authServer) called(path string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.calls[path]
}

// noneOf fails t if to got any secret from's: a client ID or secret, a
// code, a verifier, a token.
func noneOf(t *testing.T, from, to *authServer) {
	t.Helper()
	for _, s := range from.given() {
		if req, ok := to.saw(s); ok {
			t.Errorf("%s got %s's %q:\n%s", to.name, from.name, s, req)
		}
	}
}

// movingServer is an MCP server whose resource metadata names one
// authorization server, until it moves to another: it takes the tokens of
// the one it names now, and answers anything else as the conformance suite's
// does, 401 with a Bearer challenge naming its scope and its metadata.
type movingServer struct {
	srv        *httptest.Server
	prmFetches atomic.Int64

	mu     sync.Mutex
	as     *authServer
	reject bool // every token is refused
}

func newMovingServer(t *testing.T, as *authServer) *movingServer {
	m := &movingServer{as: as}
	mux := http.NewServeMux()
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		m.prmFetches.Add(1)
		writeJSON(w, map[string]any{"resource": m.srv.URL + "/mcp", "authorization_servers": []string{m.now().srv.URL},
			"scopes_supported": []string{"mcp:basic"}})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		m.mu.Lock()
		as, reject := m.as, m.reject
		m.mu.Unlock()
		if reject || !strings.HasPrefix(tok, as.name+"-at-") {
			w.Header().Set("WWW-Authenticate", `Bearer scope="mcp:basic", resource_metadata="`+m.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
			writeJSON(w, map[string]string{"error": "invalid_token"})
			return
		}
		_, _ = io.WriteString(w, "ok "+tok)
	})
	return m
}

func (m *movingServer) now() *authServer {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.as
}

func (m *movingServer) moveTo(as *authServer) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.as = as
}

func (m *movingServer) refuseEveryToken() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reject = true
}

// call posts to the MCP server through client: nil for a 200.
func (m *movingServer) call(client *http.Client) error {
	resp, err := client.Post(m.srv.URL+"/mcp", "application/json", strings.NewReader(`{}`))
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// connectAs has user's first call meet the server's 401 and returns the
// server's provider ID from the UnauthorizedError.
func connectAs(t *testing.T, m *movingServer, in *instance, user string) string {
	t.Helper()
	err := m.call(in.conn.Client(context.Background(), user, m.srv.URL+"/mcp"))
	var ue *mcpauth.UnauthorizedError
	if !errors.As(err, &ue) || !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("the first call: %v, want an UnauthorizedError wrapping ErrNoToken", err)
	}
	return ue.ProviderID
}

// The MCP server moves to another authorization server, one of its own
// choosing (an attacker's, for all the client can tell): the next 401 to a
// user's token has the client read the resource metadata again, register at
// the new server (once, across instances) and sign the user in there. The
// tokens every user got from the old server are refused where they would be
// sent, on either instance: a refresh is a dead grant, made nowhere; a
// disconnect revokes nothing at the new server; a token the app stored
// itself (no binding) too, once the server moved, though it was refreshed
// before. Nothing of the old server's (client, secret, code, verifier,
// token) ever reaches the new one.
func TestMovedServerIsFollowedToItsNewAuthorizationServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1, as2 := newAuthServer(t, "as1"), newAuthServer(t, "as2")
	m := newMovingServer(t, as1)
	kv := oauthflow.NewMemoryKV()
	a, b := newInstance(t, kv, &http.Client{}), newInstance(t, kv, &http.Client{})
	alice := a.conn.Client(ctx, "alice", m.srv.URL+"/mcp")

	id := connectAs(t, m, a, "alice")
	signIn(t, a, "alice", id)
	if err := m.call(alice); err != nil {
		t.Fatalf("a call with the first server's token: %v", err)
	}
	signIn(t, b, "bob", id) // b builds the provider for the first server
	signIn(t, a, "carol", id)
	for _, user := range []string{"dave", "erin"} { // stored by the app itself: no binding
		rt := "as1-rt-" + user
		as1.plant(rt)
		tok := oauthflow.StoredTokens{AccessToken: "as1-at-" + user, RefreshToken: rt, ExpiresAt: time.Now().UnixMilli(), Scope: "mcp:basic"}
		if err := a.mod.Tokens.StoreTokens(ctx, user, id, tok); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.mod.Tokens.GetValidAccessToken(ctx, "dave", id); err != nil {
		t.Fatalf("a token without a binding, before any move: %v, want it refreshed", err)
	}

	m.moveTo(as2)
	err := m.call(alice)
	var ue *mcpauth.UnauthorizedError
	if !errors.As(err, &ue) || !errors.Is(err, oauthflow.ErrNoToken) || ue.Status != http.StatusUnauthorized {
		t.Fatalf("the call after the move: %v, want an UnauthorizedError for the 401, wrapping ErrNoToken", err)
	}
	if _, err := a.mod.Tokens.GetTokens(ctx, "alice", id); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("alice's tokens after the move: %v, want them deleted", err)
	}
	for _, user := range []string{"bob", "erin"} {
		if _, err := b.mod.Tokens.GetValidAccessToken(ctx, user, id); !errors.Is(err, oauthflow.ErrNoToken) {
			t.Errorf("%s's read on the other instance after the move: %v, want ErrNoToken (a dead grant)", user, err)
		}
	}
	if err := a.mod.Tokens.DeleteTokens(ctx, "carol", id); err != nil {
		t.Fatal(err)
	}

	signIn(t, b, "alice", id)
	if err := m.call(alice); err != nil {
		t.Fatalf("a call with the new server's token: %v", err)
	}
	signIn(t, a, "bob", id)
	if n1, n2 := as1.registrations.Load(), as2.registrations.Load(); n1 != 1 || n2 != 1 {
		t.Errorf("registrations: %d at the first server, %d at the second; want 1 and 1", n1, n2)
	}
	if n := as2.called("/revoke"); n != 0 {
		t.Errorf("%d revocations at the new server", n)
	}
	noneOf(t, as1, as2)
}

// The server moves while its record is gone (expired): the instance that
// rebuilds the record from the server's name finds only the new server, and
// cannot tell whether it moved, so it takes it as moved. The old server's
// tokens are refused, those bound to it and one without a binding alike.
func TestServerMovedWhileItsRecordWasGone(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1, as2 := newAuthServer(t, "as1"), newAuthServer(t, "as2")
	m := newMovingServer(t, as1)
	kv := oauthflow.NewMemoryKV()
	a, b := newInstance(t, kv, &http.Client{}), newInstance(t, kv, &http.Client{})
	id := connectAs(t, m, a, "alice")
	signIn(t, a, "alice", id)
	as1.plant("as1-rt-dave")
	tok := oauthflow.StoredTokens{AccessToken: "as1-at-dave", RefreshToken: "as1-rt-dave", ExpiresAt: time.Now().UnixMilli(), Scope: "mcp:basic"}
	if err := a.mod.Tokens.StoreTokens(ctx, "dave", id, tok); err != nil { // by the app itself: no binding
		t.Fatal(err)
	}

	m.moveTo(as2)
	if err := kv.Del(ctx, "oauth:mcp:server:"+id); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "dave"} {
		if _, err := b.mod.Tokens.GetValidAccessToken(ctx, user, id); !errors.Is(err, oauthflow.ErrNoToken) {
			t.Errorf("%s's read after the record was rebuilt at the new server: %v, want ErrNoToken", user, err)
		}
	}
	noneOf(t, as1, as2)
}

// The app's own client, pre-registered at both authorization servers,
// serves the new server too: the provider follows the move though its
// client stays the same, and the user's next sign-in goes to the new server.
func TestMovedServerIsFollowedWithTheAppsClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1, as2 := newAuthServer(t, "as1"), newAuthServer(t, "as2")
	for _, as := range []*authServer{as1, as2} {
		as.allow("app-client", "app-secret")
	}
	m := newMovingServer(t, as1)
	app := mcpauth.Client{ID: "app-client", Secret: "app-secret"}
	in := newInstanceWith(t, oauthflow.NewMemoryKV(), &http.Client{}, map[string]mcpauth.Client{as1.srv.URL: app, as2.srv.URL: app})
	alice := in.conn.Client(ctx, "alice", m.srv.URL+"/mcp")
	id := connectAs(t, m, in, "alice")
	signIn(t, in, "alice", id)
	m.moveTo(as2)
	if err := m.call(alice); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("the call after the move: %v, want ErrNoToken", err)
	}
	signIn(t, in, "alice", id)
	if err := m.call(alice); err != nil {
		t.Fatalf("a call after the sign-in that followed the move: %v", err)
	}
	if n1, n2 := as1.called("/authorize"), as2.called("/authorize"); n1 != 1 || n2 != 1 {
		t.Errorf("sign-ins: %d at the first server, %d at the second; want 1 and 1", n1, n2)
	}
	noneOf(t, as1, as2)
}

// A 401 to a request that did not carry the user's token changes nothing:
// here the app's request to another origin is redirected to the MCP server,
// which gets it without the token (a hop from elsewhere carries none).
func TestUnauthorizedWithoutTheTokenChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1, as2 := newAuthServer(t, "as1"), newAuthServer(t, "as2")
	m := newMovingServer(t, as1)
	in := newInstance(t, oauthflow.NewMemoryKV(), &http.Client{})
	id := connectAs(t, m, in, "alice")
	signIn(t, in, "alice", id)
	elsewhere := httptest.NewServer(http.RedirectHandler(m.srv.URL+"/mcp", http.StatusTemporaryRedirect))
	t.Cleanup(elsewhere.Close)

	m.moveTo(as2)
	before := m.prmFetches.Load()
	resp, err := in.conn.Client(ctx, "alice", m.srv.URL+"/mcp").Post(elsewhere.URL, "application/json", strings.NewReader(`{}`))
	if err == nil {
		_ = resp.Body.Close()
	}
	if n := m.prmFetches.Load() - before; n != 0 {
		t.Errorf("a 401 to a request without the token read the resource metadata %d times", n)
	}
	if tok, err := in.mod.Tokens.GetTokens(ctx, "alice", id); err != nil || !strings.HasPrefix(tok.AccessToken, "as1-") {
		t.Errorf("alice's tokens after a 401 without them: %v, %v; want them kept", tok, err)
	}
}

// A 401 to a user's token from a server that did not move reads its
// metadata once per interval, however many 401s come, and changes nothing:
// no registration, and the user's tokens stay.
func TestUnmovedServerIsNotReregistered(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1 := newAuthServer(t, "as1")
	m := newMovingServer(t, as1)
	in := newInstance(t, oauthflow.NewMemoryKV(), &http.Client{})
	alice := in.conn.Client(ctx, "alice", m.srv.URL+"/mcp")
	id := connectAs(t, m, in, "alice")
	signIn(t, in, "alice", id)
	if err := m.call(alice); err != nil {
		t.Fatal(err)
	}

	m.refuseEveryToken()
	before := m.prmFetches.Load()
	for range 3 { // each call meets two 401s: to the token, and to the one refreshed for it
		if err := m.call(alice); !errors.Is(err, oauthflow.ErrNoToken) {
			t.Fatalf("a call the server refuses: %v, want ErrNoToken", err)
		}
	}
	if n := m.prmFetches.Load() - before; n != 1 {
		t.Errorf("six 401s read the resource metadata %d times, want 1", n)
	}
	if n := as1.registrations.Load(); n != 1 {
		t.Errorf("%d registrations, want 1", n)
	}
	if _, err := in.mod.Tokens.GetTokens(ctx, "alice", id); err != nil {
		t.Errorf("alice's tokens: %v, want them kept", err)
	}
}

// The SDK's way in: Authorize answers a 401 to the user's token from a
// server that moved by deleting the user's tokens of the old server, and the
// next sign-in is at the new one; a 401 to a request without the token
// changes nothing.
func TestAuthorizeFollowsAMoveOnlyForTheUsersToken(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1, as2 := newAuthServer(t, "as1"), newAuthServer(t, "as2")
	m := newMovingServer(t, as1)
	in := newInstance(t, oauthflow.NewMemoryKV(), &http.Client{})
	server := m.srv.URL + "/mcp"
	id, _ := mcpauth.ProviderID(server)
	withSignIn := &mcpauth.OAuthHandler{Connector: in.conn, UserID: "alice", ServerURL: server,
		SignIn: func(_ context.Context, authURL string) (url.Values, error) {
			return url.ParseQuery(consent(t, authURL))
		}}
	noSignIn := &mcpauth.OAuthHandler{Connector: in.conn, UserID: "alice", ServerURL: server}
	authorize := func(h *mcpauth.OAuthHandler, token string) error {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, server, strings.NewReader(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("the server answered HTTP %d, want 401", resp.StatusCode)
		}
		return h.Authorize(ctx, req, resp)
	}
	token := func() string {
		t.Helper()
		tok, err := in.mod.Tokens.GetTokens(ctx, "alice", id)
		if errors.Is(err, oauthflow.ErrNoToken) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return tok.AccessToken
	}
	if err := authorize(withSignIn, ""); err != nil {
		t.Fatal(err)
	}
	first := token()

	m.moveTo(as2)
	before := m.prmFetches.Load()
	if err := authorize(noSignIn, ""); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("a 401 to a request without the token: %v, want ErrNoToken", err)
	}
	if n := m.prmFetches.Load() - before; n != 0 || token() != first {
		t.Fatalf("a 401 to a request without the token read the metadata %d times; the user's token is now %q", n, token())
	}
	if err := authorize(noSignIn, first); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("a 401 to the user's token after the move: %v, want ErrNoToken", err)
	}
	if n, tok := m.prmFetches.Load()-before, token(); n != 1 || tok != "" {
		t.Fatalf("a 401 to the user's token after the move read the metadata %d times and left the token %q; want 1, and the token deleted", n, tok)
	}
	if err := authorize(withSignIn, ""); err != nil {
		t.Fatalf("the sign-in after the move: %v", err)
	}
	if tok := token(); !strings.HasPrefix(tok, "as2-at-") || as2.registrations.Load() != 1 {
		t.Fatalf("after the move the user holds %q, with %d registrations at the new server; want a token of the new server, one registration",
			tok, as2.registrations.Load())
	}
	noneOf(t, as1, as2)
}

// verifierExchanger is the optional method of an oauthflow.Provider a
// completion calls with the sign-in's PKCE verifier as a string.
type verifierExchanger interface {
	ExchangeCodeVerifier(ctx context.Context, code, verifier string) (*oauthflow.TokenSet, error)
}

// A sign-in sent to the old server before the move comes back after it: its
// code is the old server's and is exchanged nowhere, least of all at the new
// server, even when its URL is built again after the move (oauthflow's
// /start does), which names the new server: a sign-in is bound to the
// server of its first URL.
func TestSignInToTheOldServerIsNotExchangedAtTheNew(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1, as2 := newAuthServer(t, "as1"), newAuthServer(t, "as2")
	m := newMovingServer(t, as1)
	in := newInstance(t, oauthflow.NewMemoryKV(), &http.Client{})
	id := connectAs(t, m, in, "bob")
	signIn(t, in, "bob", id)
	_, doc, err := in.mod.StartSignIn(ctx, "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	back := consent(t, doc.AuthURL) // the first server's code
	p, err := in.mod.Registry.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	verifier := oauth2.GenerateVerifier()
	first := p.BuildAuthURL(nil, "again", oauth2.S256ChallengeOption(verifier))
	code, err := url.ParseQuery(consent(t, first))
	if err != nil || !strings.HasPrefix(first, as1.srv.URL) {
		t.Fatalf("the first URL %s, %v", first, err)
	}

	m.moveTo(as2)
	if err := m.call(in.conn.Client(ctx, "bob", m.srv.URL+"/mcp")); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("bob's call after the move: %v, want ErrNoToken", err)
	}
	cb, err := http.Get(in.api.URL + oauthflow.CallbackPath + "?" + back)
	if err != nil {
		t.Fatal(err)
	}
	_ = cb.Body.Close()
	if cb.StatusCode == http.StatusOK {
		t.Error("a sign-in to the old server completed after the move")
	}
	if again := p.BuildAuthURL(nil, "again", oauth2.S256ChallengeOption(verifier)); !strings.HasPrefix(again, as2.srv.URL) {
		t.Fatalf("the URL built again after the move: %s, want the new server's", again)
	}
	if _, err := p.(verifierExchanger).ExchangeCodeVerifier(ctx, code.Get("code"), verifier); !errors.Is(err, mcpauth.ErrIssuerChanged) {
		t.Errorf("the old server's code after its URL was built again: %v, want ErrIssuerChanged", err)
	}
	if n := as2.called("/token"); n != 0 {
		t.Errorf("%d token requests at the new server", n)
	}
	noneOf(t, as1, as2)
}

// A connection keeps one grant binding: the sign-in's own binding (its PKCE
// challenge) goes once its code is exchanged, a rotated refresh token's
// binding replaces the one it was refreshed with (a refresh token kept keeps
// its own), and a disconnect deletes it, as does a grant the server ends. A
// server that rotates on every refresh so leaves one key per connection,
// not one per refresh for 90 days. The binding still keeps the grant to its
// issuer (TestMovedServerIsFollowedToItsNewAuthorizationServer).
func TestOneGrantBindingPerConnection(t *testing.T) {
	t.Parallel()
	for _, rotate := range []bool{true, false} {
		t.Run(fmt.Sprintf("rotate=%v", rotate), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			as := newAuthServer(t, "as1")
			as.keep = !rotate
			m := newMovingServer(t, as)
			kv := newWrittenKV("oauth:mcp:issued:")
			in := newInstance(t, kv, &http.Client{})
			id := connectAs(t, m, in, "alice")
			signIn(t, in, "alice", id)
			afterSignIn := len(kv.live(t))
			const n = 5
			for range n { // tokens live 30 s, inside the store's skew: every read refreshes
				if _, err := in.mod.Tokens.GetValidAccessToken(ctx, "alice", id); err != nil {
					t.Fatal(err)
				}
			}
			if calls := as.called("/token"); calls != n+1 {
				t.Fatalf("%d token requests, want %d: the sign-in and %d refreshes", calls, n+1, n)
			}
			afterRefreshes := len(kv.live(t))
			if err := in.mod.Tokens.DeleteTokens(ctx, "alice", id); err != nil {
				t.Fatal(err)
			}
			afterDisconnect := len(kv.live(t))
			if afterSignIn != 1 || afterRefreshes != 1 || afterDisconnect != 0 {
				t.Fatalf("grant bindings: %d after the sign-in, %d after %d refreshes, %d after the disconnect; want 1, 1, 0",
					afterSignIn, afterRefreshes, n, afterDisconnect)
			}

			signIn(t, in, "bob", id) // a grant the server ends (invalid_grant) leaves no binding either
			tok, err := in.mod.Tokens.GetTokens(ctx, "bob", id)
			if err != nil {
				t.Fatal(err)
			}
			as.end(tok.RefreshToken)
			if _, err := in.mod.Tokens.GetValidAccessToken(ctx, "bob", id); !errors.Is(err, oauthflow.ErrNoToken) {
				t.Fatalf("bob's refresh of an ended grant: %v, want ErrNoToken", err)
			}
			if left := len(kv.live(t)); left != 0 {
				t.Fatalf("%d grant bindings after the server ended the only grant, want 0", left)
			}
		})
	}
}

// The grants of a server that moved leave no binding behind: the user
// whose 401 found the move is disconnected (nothing revoked at the new
// server), and another user's refresh token, refused as a dead grant with
// no request made, goes with its binding.
func TestMovedServerLeavesNoGrantBinding(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as1, as2 := newAuthServer(t, "as1"), newAuthServer(t, "as2")
	m := newMovingServer(t, as1)
	kv := newWrittenKV("oauth:mcp:issued:")
	in := newInstance(t, kv, &http.Client{})
	id := connectAs(t, m, in, "alice")
	signIn(t, in, "alice", id)
	signIn(t, in, "bob", id)
	if n := len(kv.live(t)); n != 2 {
		t.Fatalf("%d grant bindings for two connections, want 2", n)
	}
	m.moveTo(as2)
	if err := m.call(in.conn.Client(ctx, "alice", m.srv.URL+"/mcp")); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("alice's call after the move: %v, want ErrNoToken", err)
	}
	if _, err := in.mod.Tokens.GetValidAccessToken(ctx, "bob", id); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("bob's refresh after the move: %v, want ErrNoToken (a dead grant)", err)
	}
	if n := len(kv.live(t)); n != 0 {
		t.Fatalf("%d grant bindings after both grants of the old server ended, want 0", n)
	}
	noneOf(t, as1, as2)
}

// A grant without a refresh token is bound by its access token, for as
// long as that token lives, not for 90 days: a new sign-in replaces the
// record without a disconnect, and the old binding goes with its token.
func TestAccessTokenBindingLivesAsLongAsTheToken(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t) // tokens of an hour, no refresh token
	kv := newWrittenKV("oauth:mcp:issued:")
	in := newInstance(t, kv, f.srv.Client())
	id, err := in.conn.Connect(context.Background(), f.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, in, "alice", id)
	live := kv.live(t)
	if len(live) != 1 {
		t.Fatalf("%d bindings after the sign-in, want 1", len(live))
	}
	for key, ttl := range live {
		if ttl <= 0 || ttl > time.Hour+time.Minute {
			t.Fatalf("%s lives %v, want at most the access token's hour", key, ttl)
		}
	}
}
