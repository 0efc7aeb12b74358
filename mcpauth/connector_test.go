package mcpauth_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
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
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// fakeMCPAuth is an MCP server's resource metadata and its authorization
// server in one: dynamic registration (counted), an authorization endpoint
// that consents at once, and a token endpoint that checks the code's PKCE
// verifier and the resource.
type fakeMCPAuth struct {
	srv           *httptest.Server
	registrations atomic.Int64
	grants        atomic.Int64 // client credentials grants
	refreshes     atomic.Int64 // refresh_token grants
	// release, when set, holds the first registration until it is closed or
	// a second registration arrives.
	release, second chan struct{}
	mu              sync.Mutex
	challenges      map[string]string // code -> code_challenge
	resources       []string          // the resource of each authorization and token request
	scopes          map[string]string // access token -> its scope
	need            []string          // scopes the MCP endpoint wants; nil: any token will do
	refuse          bool              // the MCP endpoint answers insufficient_scope for need, whatever the token has
	revoked         map[string]bool   // client IDs the token endpoint answers invalid_client
	iss             string            // when set: the metadata advertises RFC 9207 and redirects carry this iss ("{base}": the issuer)
	short           bool              // sign-ins get 30 s tokens (inside the store's skew: every read refreshes) and a refresh token
	lastClient      string            // the client ID of the last token request
}

func newFakeMCPAuth(t *testing.T) *fakeMCPAuth {
	f := &fakeMCPAuth{challenges: map[string]string{}, scopes: map[string]string{}, revoked: map[string]bool{}}
	mux := http.NewServeMux()
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	base := func() string { return f.srv.URL }
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": base() + "/mcp", "authorization_servers": []string{base()},
			"scopes_supported": []string{"notes:read"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": base(), "authorization_endpoint": base() + "/authorize",
			"token_endpoint": base() + "/token", "registration_endpoint": base() + "/register",
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"},
			"authorization_response_iss_parameter_supported": f.iss != ""})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		n := f.registrations.Add(1)
		switch {
		case n == 1 && f.release != nil:
			select {
			case <-f.release:
			case <-f.second:
			case <-r.Context().Done():
			}
		case n == 2 && f.second != nil:
			close(f.second)
		}
		w.WriteHeader(http.StatusCreated)
		writeJSON(w, map[string]any{"client_id": "client-" + string(rune('0'+n)), "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f.mu.Lock()
		f.challenges["code-"+q.Get("state")] = q.Get("code_challenge")
		f.scopes["at-code-"+q.Get("state")] = q.Get("scope")
		f.resources = append(f.resources, q.Get("resource"))
		f.mu.Unlock()
		to, _ := url.Parse(q.Get("redirect_uri"))
		back := url.Values{"code": {"code-" + q.Get("state")}, "state": {q.Get("state")}}
		if f.iss != "" {
			back.Set("iss", strings.ReplaceAll(f.iss, "{base}", base()))
		}
		to.RawQuery = back.Encode()
		http.Redirect(w, r, to.String(), http.StatusFound)
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		if r.Form.Get("grant_type") == "urn:ietf:params:oauth:grant-type:jwt-bearer" {
			user, ok := strings.CutPrefix(r.Form.Get("assertion"), "jag-")
			if !ok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":"invalid_grant"}`)
				return
			}
			n := f.grants.Add(1)
			writeJSON(w, map[string]any{"access_token": fmt.Sprintf("xaa-%s-%d", user, n), "token_type": "Bearer", "expires_in": 30})
			return
		}
		if r.Form.Get("grant_type") == "client_credentials" {
			id, secret, ok := r.BasicAuth()
			if !ok || id != "agent-client" || secret != "agent-secret" || r.Form.Get("resource") != base()+"/mcp" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
				return
			}
			n := f.grants.Add(1)
			writeJSON(w, map[string]any{"access_token": fmt.Sprintf("cc-%d", n), "token_type": "Bearer", "expires_in": 30})
			return
		}
		if r.Form.Get("grant_type") == "refresh_token" {
			f.refreshes.Add(1)
		}
		f.mu.Lock()
		f.resources = append(f.resources, r.Form.Get("resource"))
		_, known := f.challenges[r.Form.Get("code")]
		f.lastClient = r.Form.Get("client_id")
		revoked := f.revoked[r.Form.Get("client_id")]
		f.mu.Unlock()
		if revoked {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"error":"invalid_client"}`)
			return
		}
		if !known || r.Form.Get("code_verifier") == "" {
			w.WriteHeader(http.StatusBadRequest)
			writeJSON(w, map[string]string{"error": "invalid_grant"})
			return
		}
		f.mu.Lock()
		scope, short := f.scopes["at-"+r.Form.Get("code")], f.short
		f.mu.Unlock()
		answer := map[string]any{"access_token": "at-" + r.Form.Get("code"), "token_type": "Bearer", "expires_in": 3600, "scope": scope}
		if short {
			answer["expires_in"], answer["refresh_token"] = 30, "rt-"+r.Form.Get("code")
		}
		writeJSON(w, answer)
	})
	mux.HandleFunc("POST /idp/token", func(w http.ResponseWriter, r *http.Request) { // the enterprise IdP's token exchange
		_ = r.ParseForm()
		user, ok := strings.CutPrefix(r.Form.Get("subject_token"), "idtoken-")
		if !ok || r.Form.Get("audience") != base() || r.Form.Get("resource") != base()+"/mcp" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"invalid_request"}`)
			return
		}
		writeJSON(w, map[string]any{"access_token": "jag-" + user, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"})
	})
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		scope, known := f.scopes[tok]
		need, refuse := f.need, f.refuse
		f.mu.Unlock()
		switch {
		case !known:
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base()+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
		case refuse || !containsAll(strings.Fields(scope), need):
			w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="`+strings.Join(need, " ")+`"`)
			w.WriteHeader(http.StatusForbidden)
		default:
			_, _ = io.WriteString(w, "ok "+tok)
		}
	})
	return f
}

// refusedKV closes refused the first time a registration lock is refused.
type refusedKV struct {
	oauthflow.KV
	once    sync.Once
	refused chan struct{}
}

func (k *refusedKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.SetNX(ctx, key, v, ttl)
	if err == nil && !ok && strings.HasPrefix(key, "oauth:mcp:reglock:") {
		k.once.Do(func() { close(k.refused) })
	}
	return ok, err
}

func containsAll(have, want []string) bool {
	for _, w := range want {
		if !slices.Contains(have, w) {
			return false
		}
	}
	return true
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// instance is one app instance: a Module on the shared store, mounted, and its Connector.
type instance struct {
	mod  *oauthflow.Module
	conn *mcpauth.Connector
	api  *httptest.Server
}

func newInstance(t *testing.T, kv oauthflow.KV, client *http.Client) *instance {
	t.Helper()
	return newInstanceWith(t, kv, client, nil)
}

// newInstanceWith is newInstance whose Connector has clients
// (Config.Clients) and, when given, the app's identity provider.
func newInstanceWith(t *testing.T, kv oauthflow.KV, client *http.Client, clients map[string]mcpauth.Client, idp ...*mcpauth.CrossApp) *instance {
	t.Helper()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	mux := http.NewServeMux()
	m.Mount(mux)
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	cfg := mcpauth.Config{Module: m, RedirectURL: "http://127.0.0.1:1/api/v1/oauth/callback", HTTPClient: client, Clients: clients}
	if len(idp) > 0 {
		cfg.CrossApp = idp[0]
	}
	c, err := mcpauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{mod: m, conn: c, api: api}
}

// Two instances connect the same MCP server at once: one registration
// between them, one provider ID; a user's sign-in started on one completes on
// the other (which rebuilds the provider from the store), and both the
// authorization and the token request name the server as the resource.
func TestConnectAcrossInstances(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	kv := &refusedKV{KV: oauthflow.NewMemoryKV(), refused: make(chan struct{})}
	// The first registration waits until the other instance has found the
	// lock taken (or, were there no lock, until the other registers too).
	f.release, f.second = kv.refused, make(chan struct{})
	a, b := newInstance(t, kv, f.srv.Client()), newInstance(t, kv, f.srv.Client())
	server := f.srv.URL + "/mcp"

	var wg sync.WaitGroup
	ids := make([]string, 2)
	for i, in := range []*instance{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id, err := in.conn.Connect(context.Background(), server, mcpauth.Challenge{})
			if err != nil {
				t.Error(err)
			}
			ids[i] = id
		}()
	}
	waitfor.Group(t, &wg, "both Connects")
	if ids[0] == "" || ids[0] != ids[1] || !strings.HasPrefix(ids[0], "mcp-127.0.0.1-") {
		t.Fatalf("provider IDs %q", ids)
	}
	if n := f.registrations.Load(); n != 1 {
		t.Fatalf("%d registrations, want 1", n)
	}

	_, doc, err := a.mod.StartSignIn(context.Background(), "alice", ids[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(doc.AuthURL, "code_challenge_method=S256") || !strings.Contains(doc.AuthURL, "scope=notes%3Aread") {
		t.Errorf("auth URL %s", doc.AuthURL)
	}
	cb, err := http.Get(b.api.URL + oauthflow.CallbackPath + "?" + consent(t, doc.AuthURL)) // on the other instance
	if err != nil {
		t.Fatal(err)
	}
	_ = cb.Body.Close()
	if cb.StatusCode != http.StatusOK {
		t.Fatalf("callback on the other instance: HTTP %d", cb.StatusCode)
	}
	tok, err := b.mod.Tokens.GetValidAccessToken(context.Background(), "alice", ids[0])
	if err != nil || !strings.HasPrefix(tok, "at-code-") {
		t.Fatalf("token %q, %v", tok, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.resources {
		if r != server {
			t.Errorf("resource %q, want %q", r, server)
		}
	}
	if len(f.resources) != 2 {
		t.Errorf("%d requests carried a resource, want 2", len(f.resources))
	}
}

// signIn completes a sign-in of user to the server on in, with scopes.
func signIn(t *testing.T, in *instance, user, id string, scopes ...string) {
	t.Helper()
	if status := trySignIn(t, in, user, id, scopes...); status != http.StatusOK {
		t.Fatalf("callback: HTTP %d", status)
	}
}

// trySignIn runs a sign-in of user to the server on in and returns the
// callback's status.
func trySignIn(t *testing.T, in *instance, user, id string, scopes ...string) int {
	t.Helper()
	_, doc, err := in.mod.StartSignIn(context.Background(), user, id, scopes...)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := http.Get(in.api.URL + oauthflow.CallbackPath + "?" + consent(t, doc.AuthURL))
	if err != nil {
		t.Fatal(err)
	}
	_ = cb.Body.Close()
	return cb.StatusCode
}

// A server that answers invalid_client (it dropped a dynamic registration)
// gets a new registration, once: the sign-in that met it fails, the next
// one uses the new client; another instance still holding the old client
// takes the new one from the store instead of registering a third.
func TestReregistersAfterInvalidClient(t *testing.T) {
	t.Parallel()
	f, _, a, b, id := twoInstances(t)
	signIn(t, a, "alice", id)
	if _, err := b.mod.Registry.Get(id); err != nil { // b builds the provider with the first client
		t.Fatal(err)
	}
	lastClient := func() string {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.lastClient
	}
	first := lastClient()

	f.mu.Lock()
	f.revoked[first] = true
	f.mu.Unlock()
	if status := trySignIn(t, a, "bob", id); status == http.StatusOK {
		t.Fatal("a sign-in with a dropped client completed")
	}
	if n := f.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations after invalid_client, want 2", n)
	}
	signIn(t, a, "bob", id)
	if second := lastClient(); second == first {
		t.Fatalf("the sign-in after invalid_client used the dropped client %s", first)
	}

	if status := trySignIn(t, b, "carol", id); status == http.StatusOK {
		t.Fatal("instance b's sign-in with the dropped client completed")
	}
	signIn(t, b, "carol", id)
	if n := f.registrations.Load(); n != 2 {
		t.Errorf("%d registrations, want 2: instance b takes the new client from the store", n)
	}
}

// The MCP transport: a first request meets the server's 401, connects the
// server and asks for a sign-in (ErrNoToken); after it, requests carry the
// user's token; a 403 insufficient_scope asks for a sign-in with the granted
// and the missing scopes (a ScopeError); a 403 for scopes the grant already
// holds is the server's refusal, not another sign-in (the step-up's limit);
// and a 401 to the stored token asks for a sign-in again.
func TestTransport(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	in := newInstance(t, oauthflow.NewMemoryKV(), f.srv.Client())
	server := f.srv.URL + "/mcp"
	client := in.conn.Client(context.Background(), "alice", server)
	post := func() error {
		resp, err := client.Post(server, "application/json", strings.NewReader(`{}`))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				err = errors.New(resp.Status)
			}
		}
		return err
	}
	set := func(need []string, refuse bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.need, f.refuse = need, refuse
	}

	err := post()
	var ue *mcpauth.UnauthorizedError
	if !errors.As(err, &ue) || !errors.Is(err, oauthflow.ErrNoToken) || ue.Status != http.StatusUnauthorized {
		t.Fatalf("first request: %v, want an UnauthorizedError wrapping ErrNoToken", err)
	}
	signIn(t, in, "alice", ue.ProviderID)
	if err := post(); err != nil {
		t.Fatalf("after the sign-in: %v", err)
	}

	set([]string{"notes:read", "notes:write"}, false)
	err = post()
	var se *oauthflow.ScopeError
	if !errors.As(err, &se) || strings.Join(se.Scopes(), " ") != "notes:read notes:write" {
		t.Fatalf("403 insufficient_scope: %v, want a ScopeError asking for notes:read notes:write", err)
	}
	signIn(t, in, "alice", ue.ProviderID, se.Scopes()...)
	if err := post(); err != nil {
		t.Fatalf("after the step-up: %v", err)
	}

	set([]string{"notes:write"}, true) // granted, and still refused
	if err := post(); err == nil || errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("a 403 for granted scopes: %v, want the server's refusal, not ErrNoToken", err)
	}

	set(nil, false)
	f.mu.Lock()
	clear(f.scopes) // no token is good any more
	f.mu.Unlock()
	if err := post(); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("a 401 to the stored token: %v, want ErrNoToken", err)
	}
}

// An agent reaches the server as itself with the client credentials grant:
// its token is stored under the app's name for it, and when it expires an
// instance that never met the server fetches the next one (it rebuilds the
// provider from the store).
func TestClientCredentialsAcrossInstances(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	kv := oauthflow.NewMemoryKV()
	clients := map[string]mcpauth.Client{f.srv.URL: {ID: "agent-client", Secret: "agent-secret"}}
	a, b := newInstanceWith(t, kv, f.srv.Client(), clients), newInstanceWith(t, kv, f.srv.Client(), clients)
	id, err := a.conn.ConnectAsClient(context.Background(), f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	// The token lives 30 s, inside the store's 60 s skew: every read fetches a new one.
	tok, err := b.mod.Tokens.GetValidAccessToken(context.Background(), "agent", id)
	if err != nil || tok != "cc-2" {
		t.Fatalf("instance b read %q, %v; want the second grant", tok, err)
	}
	if n := f.registrations.Load(); n != 0 {
		t.Errorf("%d registrations for a client with its own credentials", n)
	}
}

// consent opens authURL at the fake, which consents at once, and returns the
// query it redirected to the callback with.
func consent(t *testing.T, authURL string) string {
	t.Helper()
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	return loc.RawQuery
}

// Cross-app access for two users of one server: each user's tokens come from
// that user's own ID token, on the first grant and on every refresh, on any
// instance.
func TestCrossAppAccessKeepsUsersApart(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	kv := oauthflow.NewMemoryKV()
	clients := map[string]mcpauth.Client{f.srv.URL: {ID: "agent-client", Secret: "agent-secret"}}
	idp := &mcpauth.CrossApp{TokenURL: f.srv.URL + "/idp/token", ClientID: "idp-client",
		IDToken: func(_ context.Context, user string) (string, error) { return "idtoken-" + user, nil }}
	a, b := newInstanceWith(t, kv, f.srv.Client(), clients, idp), newInstanceWith(t, kv, f.srv.Client(), clients, idp)
	server := f.srv.URL + "/mcp"
	var id string
	for _, user := range []string{"alice", "bob"} {
		var err error
		if id, err = a.conn.ConnectCrossApp(context.Background(), server, user, mcpauth.Challenge{}); err != nil {
			t.Fatal(err)
		}
	}
	// The tokens live 30 s, inside the store's 60 s skew: every read is a
	// refresh, on this instance and on one that never connected the server.
	for _, in := range []*instance{a, b} {
		for _, user := range []string{"alice", "bob"} {
			tok, err := in.mod.Tokens.GetValidAccessToken(context.Background(), user, id)
			if err != nil || !strings.HasPrefix(tok, "xaa-"+user+"-") {
				t.Errorf("%s's refreshed token is %q (%v), want one granted for %s", user, tok, err, user)
			}
		}
	}
}

// A refresh that meets invalid_client from a dynamically registered client
// the server dropped ends the user's grant (the refresh token belonged to
// that client): the user signs in again, with the new client. The app's own
// pre-registered client answering invalid_client is a configuration fault
// (a rotated secret), and its users' tokens are kept.
func TestDroppedRegistrationEndsItsGrants(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		clients map[string]mcpauth.Client
		dead    bool
	}{
		{"dynamic registration", nil, true},
		{"pre-registered client", map[string]mcpauth.Client{"*": {ID: "preset", AuthMethod: "none"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeMCPAuth(t)
			f.short = true
			in := newInstanceWith(t, oauthflow.NewMemoryKV(), f.srv.Client(), tc.clients)
			id, err := in.conn.Connect(context.Background(), f.srv.URL+"/mcp", mcpauth.Challenge{})
			if err != nil {
				t.Fatal(err)
			}
			signIn(t, in, "alice", id)
			f.mu.Lock()
			f.revoked[f.lastClient] = true
			f.mu.Unlock()
			_, err = in.mod.Tokens.GetValidAccessToken(context.Background(), "alice", id)
			_, gone := in.mod.Tokens.GetTokens(context.Background(), "alice", id)
			if tc.dead != errors.Is(err, oauthflow.ErrNoToken) || tc.dead != errors.Is(gone, oauthflow.ErrNoToken) {
				t.Fatalf("refresh: %v, record: %v; want the grant ended: %v", err, gone, tc.dead)
			}
		})
	}
}

// A server whose metadata advertises RFC 9207 has its sign-ins' iss checked:
// the issuer's own completes, another's is refused and stores nothing.
func TestIssuerIsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		iss string
		ok  bool
	}{{"{base}", true}, {"https://mix-up.example", false}} {
		t.Run(tc.iss, func(t *testing.T) {
			t.Parallel()
			f := newFakeMCPAuth(t)
			f.iss = tc.iss
			in := newInstance(t, oauthflow.NewMemoryKV(), f.srv.Client())
			id, err := in.conn.Connect(context.Background(), f.srv.URL+"/mcp", mcpauth.Challenge{})
			if err != nil {
				t.Fatal(err)
			}
			status := trySignIn(t, in, "alice", id)
			_, err = in.mod.Tokens.GetTokens(context.Background(), "alice", id)
			if (status == http.StatusOK) != tc.ok || (err == nil) != tc.ok {
				t.Fatalf("iss %s: callback HTTP %d, token %v; want the sign-in to complete: %v", tc.iss, status, err, tc.ok)
			}
		})
	}
}
