package mcpauth_test

import (
	"context"
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
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// workloadAS is an MCP server and its authorization server, whose issuer
// has a path (base/tenant): resource metadata, server metadata advertising
// grants, a token endpoint that records every request and answers with
// refusal when it is set (else a token for the JWT bearer grant), an MCP
// endpoint that takes the tokens it issued, and an authorization and a
// registration endpoint that count what reaches them (a workload must
// reach neither).
type workloadAS struct {
	srv       *httptest.Server
	grants    []string // grant_types_supported; nil: not advertised
	expiresIn int
	refusal   *tokenRefusal

	mu       sync.Mutex
	requests []tokenRequest
	issued   map[string]bool
	signIns  int // requests to /authorize and /register
}

// tokenRefusal is how the fake's token endpoint refuses a grant.
type tokenRefusal struct {
	status int
	code   string
}

// tokenRequest is one request the fake's token endpoint received.
type tokenRequest struct {
	form      url.Values
	basicUser string // the client ID in the Basic header; "" without one
}

func newWorkloadAS(t *testing.T) *workloadAS {
	f := &workloadAS{grants: []string{"authorization_code", jwtBearer}, expiresIn: 3600, issued: map[string]bool{}}
	mux := http.NewServeMux()
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": f.srv.URL + "/mcp", "authorization_servers": []string{f.issuer()},
			"scopes_supported": []string{"tools:call"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server/tenant", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": f.issuer(), "authorization_endpoint": f.srv.URL + "/authorize",
			"token_endpoint": f.srv.URL + "/token", "registration_endpoint": f.srv.URL + "/register",
			"code_challenge_methods_supported": []string{"S256"}, "grant_types_supported": f.grants,
			"token_endpoint_auth_methods_supported": []string{"none", "client_secret_basic"}})
	})
	signIn := func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.signIns++
		f.mu.Unlock()
		http.Error(w, "a workload never signs in", http.StatusBadRequest)
	}
	mux.HandleFunc("GET /authorize", signIn)
	mux.HandleFunc("POST /register", signIn)
	mux.HandleFunc("POST /token", f.token)
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		f.mu.Lock()
		ok := f.issued[tok]
		f.mu.Unlock()
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+f.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		_, _ = io.WriteString(w, "ok "+tok)
	})
	return f
}

func (f *workloadAS) issuer() string { return f.srv.URL + "/tenant" }

func (f *workloadAS) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	user, _, _ := r.BasicAuth()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, tokenRequest{form: r.PostForm, basicUser: user})
	if f.refusal != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(f.refusal.status)
		_, _ = fmt.Fprintf(w, `{"error":%q}`, f.refusal.code)
		return
	}
	if r.PostForm.Get("grant_type") != jwtBearer {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"error":"unsupported_grant_type"}`)
		return
	}
	tok := fmt.Sprintf("wif-%d", len(f.requests))
	f.issued[tok] = true
	writeJSON(w, map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": f.expiresIn})
}

// seen is what reached the fake: its token requests, and its sign-in endpoints' count.
func (f *workloadAS) seen() ([]tokenRequest, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests), f.signIns
}

// platform is a workload's platform: each JWT it issues is new ("jwt-1",
// "jwt-2", ...), and it records the audience each was asked for.
type platform struct {
	mu        sync.Mutex
	audiences []string
}

func (p *platform) assertion(_ context.Context, audience string) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.audiences = append(p.audiences, audience)
	return fmt.Sprintf("jwt-%d", len(p.audiences)), nil
}

func (p *platform) asked() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.audiences)
}

// newWorkloadInstance is an instance on kv whose Connector runs as the
// workload of p (nil: none) with clients.
func newWorkloadInstance(t *testing.T, kv oauthflow.KV, f *workloadAS, p *platform, clients map[string]mcpauth.Client) *instance {
	t.Helper()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	cfg := mcpauth.Config{Module: m, RedirectURL: "http://127.0.0.1:1/api/v1/oauth/callback", HTTPClient: f.srv.Client(),
		Clients: clients}
	if p != nil {
		cfg.Workload = &mcpauth.Workload{Assertion: p.assertion}
	}
	c, err := mcpauth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &instance{mod: m, conn: c}
}

// The workload's grant is one request to the token endpoint with exactly
// the JWT bearer grant's fields: the platform's JWT for the authorization
// server's issuer, the server's resource, the scope, and the client
// authentication of Config.Clients for that issuer, if any. Its token is
// stored for the agent and reaches the MCP server.
func TestWorkloadGrantRequest(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		clients  func(issuer string) map[string]mcpauth.Client
		clientID string // in the form (none)
		basic    string // in the Basic header (client_secret_basic)
	}{
		{name: "no client", clients: func(string) map[string]mcpauth.Client { return nil }},
		{name: "public client", clientID: "wif-client", clients: func(string) map[string]mcpauth.Client {
			return map[string]mcpauth.Client{"*": {ID: "wif-client", AuthMethod: "none"}}
		}},
		{name: "client of the issuer", basic: "issuer-client", clients: func(issuer string) map[string]mcpauth.Client {
			return map[string]mcpauth.Client{"*": {ID: "wif-client", AuthMethod: "none"}, issuer: {ID: "issuer-client", Secret: "s"}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, p := newWorkloadAS(t), &platform{}
			in := newWorkloadInstance(t, oauthflow.NewMemoryKV(), f, p, tc.clients(f.issuer()))
			ctx := context.Background()
			id, err := in.conn.ConnectAsWorkload(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
			if err != nil {
				t.Fatal(err)
			}
			reqs, signIns := f.seen()
			if len(reqs) != 1 || signIns != 0 {
				t.Fatalf("%d token requests and %d sign-in requests, want one token request", len(reqs), signIns)
			}
			want := url.Values{"grant_type": {jwtBearer}, "assertion": {"jwt-1"}, "resource": {f.srv.URL + "/mcp"},
				"scope": {"tools:call"}}
			if tc.clientID != "" {
				want.Set("client_id", tc.clientID)
			}
			if got := reqs[0].form; got.Encode() != want.Encode() || reqs[0].basicUser != tc.basic {
				t.Errorf("the token request was %v with Basic %q, want %v with Basic %q", got, reqs[0].basicUser, want, tc.basic)
			}
			if got := p.asked(); !slices.Equal(got, []string{f.issuer()}) {
				t.Errorf("the platform was asked for JWTs for %q, want one for the issuer %s", got, f.issuer())
			}
			resp, err := in.mod.Tokens.Client(ctx, "agent", id).Post(f.srv.URL+"/mcp", "application/json", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			if string(body) != "ok wif-1" {
				t.Errorf("the MCP server answered %d %q, want the stored token taken", resp.StatusCode, body)
			}
		})
	}
}

// answer401 is the MCP server's 401 to a request without a token, and that request.
func answer401(t *testing.T, f *workloadAS) (*http.Request, *http.Response) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, f.srv.URL+"/mcp", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the MCP server answered %d without a token", resp.StatusCode)
	}
	return req, resp
}

// The SDK's OAuthHandler with Workload answers the server's 401 with the
// workload's grant, and its token source then gives the token.
func TestWorkloadOAuthHandler(t *testing.T) {
	t.Parallel()
	f, p := newWorkloadAS(t), &platform{}
	in := newWorkloadInstance(t, oauthflow.NewMemoryKV(), f, p, nil)
	h := &mcpauth.OAuthHandler{Connector: in.conn, UserID: "agent", ServerURL: f.srv.URL + "/mcp", Workload: true}
	ctx := context.Background()
	if ts, err := h.TokenSource(ctx); ts != nil || err != nil {
		t.Fatalf("before the grant the token source is %v, %v; want none", ts, err)
	}
	req, resp := answer401(t, f)
	if err := h.Authorize(ctx, req, resp); err != nil {
		t.Fatal(err)
	}
	ts, err := h.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatalf("after the grant the token source is %v, %v", ts, err)
	}
	tok, err := ts.Token()
	if err != nil || tok.AccessToken != "wif-1" {
		t.Fatalf("the token source gave %v, %v; want wif-1", tok, err)
	}
}

// A refused grant is the answer: the SDK's connection meets a 401 twice
// (server/discover, then its fallback to initialize) and its second
// Authorize sends nothing, nor does another instance on the same store;
// there is one token request, for the JWT bearer grant, and no sign-in and
// no client credentials grant though the handler could sign in and the app
// has a client secret.
func TestWorkloadRefusalIsFinal(t *testing.T) {
	t.Parallel()
	for _, r := range []tokenRefusal{
		{http.StatusBadRequest, "invalid_grant"},
		{http.StatusBadRequest, "invalid_scope"},
		{http.StatusBadRequest, "unauthorized_client"},
		{http.StatusUnauthorized, "invalid_client"},
	} {
		t.Run(r.code, func(t *testing.T) {
			t.Parallel()
			f, p := newWorkloadAS(t), &platform{}
			f.refusal = &r
			kv := oauthflow.NewMemoryKV()
			clients := map[string]mcpauth.Client{f.issuer(): {ID: "agent-client", Secret: "agent-secret"}}
			a, b := newWorkloadInstance(t, kv, f, p, clients), newWorkloadInstance(t, kv, f, p, clients)
			signIn := func(context.Context, string) (url.Values, error) { return nil, errors.New("a workload never signs in") }
			ctx := context.Background()
			for i, in := range []*instance{a, a, b} {
				h := &mcpauth.OAuthHandler{Connector: in.conn, UserID: "agent", ServerURL: f.srv.URL + "/mcp",
					Workload: true, SignIn: signIn}
				req, resp := answer401(t, f)
				err := h.Authorize(ctx, req, resp)
				var pe *oauthflow.ProviderError
				if !errors.As(err, &pe) || pe.Code != r.code {
					t.Fatalf("Authorize %d: %v, want the refusal %s", i+1, err, r.code)
				}
			}
			reqs, signIns := f.seen()
			if len(reqs) != 1 || reqs[0].form.Get("grant_type") != jwtBearer || signIns != 0 {
				t.Fatalf("%d token requests (%v) and %d sign-in requests; want the one JWT bearer grant", len(reqs), reqs, signIns)
			}
			if n := len(p.asked()); n != 1 {
				t.Errorf("the platform was asked for %d JWTs, want 1", n)
			}
		})
	}
}

// A kept refusal answers the refused agent only: another agent of the app
// at the same server, on this instance or another, still asks for its own
// token and gets it, while the refused agent's next grant sends nothing.
func TestWorkloadRefusalAnswersOnlyTheRefusedAgent(t *testing.T) {
	t.Parallel()
	f, p := newWorkloadAS(t), &platform{}
	f.refusal = &tokenRefusal{http.StatusBadRequest, "invalid_grant"}
	kv := oauthflow.NewMemoryKV()
	a, b := newWorkloadInstance(t, kv, f, p, nil), newWorkloadInstance(t, kv, f, p, nil)
	ctx := context.Background()
	server := f.srv.URL + "/mcp"
	if _, err := a.conn.ConnectAsWorkload(ctx, server, "agent-1", mcpauth.Challenge{}); !oauthflow.IsGrantDead(err) {
		t.Fatalf("agent-1's grant: %v, want the refusal", err)
	}
	f.mu.Lock()
	f.refusal = nil
	f.mu.Unlock()
	for _, in := range []*instance{a, b} {
		if _, err := in.conn.ConnectAsWorkload(ctx, server, "agent-2", mcpauth.Challenge{}); err != nil {
			t.Errorf("agent-2, after agent-1 was refused: %v", err)
		}
		if _, err := in.conn.ConnectAsWorkload(ctx, server, "agent-1", mcpauth.Challenge{}); !oauthflow.IsGrantDead(err) {
			t.Errorf("agent-1 again: %v, want its kept refusal", err)
		}
	}
	if reqs, _ := f.seen(); len(reqs) != 3 {
		t.Errorf("%d token requests, want 3: agent-1's refused one and one for agent-2 on each instance", len(reqs))
	}
}

// A transient answer is not a refusal: a server failure (5xx), a 429 or a
// 408 (come back later), or temporarily_unavailable under any status. The
// next connect asks again, at once.
func TestWorkloadTransientAnswerIsNotARefusal(t *testing.T) {
	t.Parallel()
	for _, r := range []tokenRefusal{
		{http.StatusServiceUnavailable, "temporarily_unavailable"},
		{http.StatusInternalServerError, "server_error"},
		{http.StatusTooManyRequests, ""},
		{http.StatusTooManyRequests, "slow_down"},
		{http.StatusRequestTimeout, ""},
		{http.StatusBadRequest, "temporarily_unavailable"},
	} {
		t.Run(fmt.Sprintf("%d %s", r.status, r.code), func(t *testing.T) {
			t.Parallel()
			f, p := newWorkloadAS(t), &platform{}
			f.refusal = &r
			in := newWorkloadInstance(t, oauthflow.NewMemoryKV(), f, p, nil)
			ctx := context.Background()
			if _, err := in.conn.ConnectAsWorkload(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{}); err == nil {
				t.Fatalf("HTTP %d connected", r.status)
			}
			f.mu.Lock()
			f.refusal = nil
			f.mu.Unlock()
			if _, err := in.conn.ConnectAsWorkload(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{}); err != nil {
				t.Fatalf("after the server recovered: %v", err)
			}
			if reqs, _ := f.seen(); len(reqs) != 2 {
				t.Errorf("%d token requests, want 2", len(reqs))
			}
		})
	}
}

// On expiry the store runs the grant again, with a new JWT from the
// platform; a refusal then ends the token, and the grant is not asked again.
func TestWorkloadExpiryRerunsTheGrant(t *testing.T) {
	t.Parallel()
	f, p := newWorkloadAS(t), &platform{}
	f.expiresIn = 30 // inside the store's 60 s skew: every read grants anew
	in := newWorkloadInstance(t, oauthflow.NewMemoryKV(), f, p, nil)
	ctx := context.Background()
	server := f.srv.URL + "/mcp"
	id, err := in.conn.ConnectAsWorkload(ctx, server, "agent", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := in.mod.Tokens.GetValidAccessToken(ctx, "agent", id)
	if err != nil || tok != "wif-2" {
		t.Fatalf("the expired token's successor is %q, %v; want wif-2", tok, err)
	}
	reqs, _ := f.seen()
	if len(reqs) != 2 || reqs[1].form.Get("grant_type") != jwtBearer || reqs[1].form.Get("assertion") != "jwt-2" ||
		reqs[1].form.Get("resource") != server {
		t.Fatalf("the token requests were %v; want a second JWT bearer grant with a new JWT", reqs)
	}
	if got := p.asked(); !slices.Equal(got, []string{f.issuer(), f.issuer()}) {
		t.Errorf("the platform was asked for JWTs for %q, want two for %s", got, f.issuer())
	}

	f.mu.Lock()
	f.refusal = &tokenRefusal{http.StatusBadRequest, "invalid_grant"}
	f.mu.Unlock()
	if _, err := in.mod.Tokens.GetValidAccessToken(ctx, "agent", id); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("a refused grant on expiry: %v, want ErrNoToken", err)
	}
	if _, err := in.conn.ConnectAsWorkload(ctx, server, "agent", mcpauth.Challenge{}); !oauthflow.IsGrantDead(err) {
		t.Fatalf("a connect after the refusal: %v, want the refusal", err)
	}
	if reqs, _ := f.seen(); len(reqs) != 3 {
		t.Errorf("%d token requests, want 3: the connect after the refusal asks nothing", len(reqs))
	}
}

// An authorization server that does not advertise the JWT bearer grant is
// refused before any token request (and before the platform is asked for
// a JWT), and nothing else is tried.
func TestWorkloadNeedsTheGrantAdvertised(t *testing.T) {
	t.Parallel()
	for name, grants := range map[string][]string{
		"other grants":   {"authorization_code", "client_credentials"},
		"not advertised": nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f, p := newWorkloadAS(t), &platform{}
			f.grants = grants
			clients := map[string]mcpauth.Client{f.issuer(): {ID: "agent-client", Secret: "agent-secret"}}
			in := newWorkloadInstance(t, oauthflow.NewMemoryKV(), f, p, clients)
			_, err := in.conn.ConnectAsWorkload(context.Background(), f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
			if !errors.Is(err, mcpauth.ErrDiscovery) || !strings.Contains(err.Error(), "grant_types_supported") {
				t.Fatalf("connect: %v, want the grant refused as not advertised", err)
			}
			if reqs, signIns := f.seen(); len(reqs) != 0 || signIns != 0 {
				t.Errorf("%d token requests and %d sign-in requests, want none", len(reqs), signIns)
			}
			if n := len(p.asked()); n != 0 {
				t.Errorf("the platform was asked for %d JWTs, want none", n)
			}
		})
	}
}

// Without Config.Workload there is no workload to connect as.
func TestWorkloadNeedsConfig(t *testing.T) {
	t.Parallel()
	f := newWorkloadAS(t)
	in := newWorkloadInstance(t, oauthflow.NewMemoryKV(), f, nil, nil)
	_, err := in.conn.ConnectAsWorkload(context.Background(), f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
	if !errors.Is(err, oauthflow.ErrInvalidArgument) {
		t.Fatalf("connect: %v, want ErrInvalidArgument", err)
	}
	if reqs, _ := f.seen(); len(reqs) != 0 {
		t.Errorf("%d token requests, want none", len(reqs))
	}
}

// Another instance over the same store that reads the workload's expired
// token runs the JWT bearer grant again: it rebuilds the provider from the
// stored record as a workload grant, never as a sign-in.
func TestWorkloadAcrossInstances(t *testing.T) {
	t.Parallel()
	f, p := newWorkloadAS(t), &platform{}
	f.expiresIn = 30 // inside the store's 60 s skew: every read grants anew
	kv := oauthflow.NewMemoryKV()
	a := newWorkloadInstance(t, kv, f, p, nil)
	b := newWorkloadInstance(t, kv, f, p, nil)
	ctx := context.Background()
	id, err := a.conn.ConnectAsWorkload(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	tok, err := b.mod.Tokens.GetValidAccessToken(ctx, "agent", id)
	if err != nil || tok != "wif-2" {
		t.Fatalf("instance b read %q, %v; want wif-2, a second JWT bearer grant", tok, err)
	}
	reqs, signIns := f.seen()
	if len(reqs) != 2 || reqs[1].form.Get("grant_type") != jwtBearer || signIns != 0 {
		t.Errorf("%d token requests (%v), %d sign-in requests; want two JWT bearer grants and no sign-in", len(reqs), reqs, signIns)
	}
}

// A refusal's error text is the server's choice: what the workload grant
// keeps of it for five minutes, and the error the agent is given, are
// bounded however long the server makes it.
func TestWorkloadRefusalTextIsBounded(t *testing.T) {
	t.Parallel()
	f, p := newWorkloadAS(t), &platform{}
	f.refusal = &tokenRefusal{http.StatusBadRequest, "invalid_grant" + strings.Repeat("x", 50_000)}
	kv := newWrittenKV("")
	in := newWorkloadInstance(t, kv, f, p, nil)
	ctx := context.Background()
	for i := range 2 { // the server's refusal, then the kept one
		_, err := in.conn.ConnectAsWorkload(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
		var pe *oauthflow.ProviderError
		if !errors.As(err, &pe) || len(pe.Code) > 64 || len(pe.Description) > 1024 {
			t.Fatalf("grant %d: %v; want a refusal whose code keeps at most 64 bytes", i+1, err)
		}
	}
	if reqs, _ := f.seen(); len(reqs) != 1 {
		t.Fatalf("%d token requests, want 1 (the refusal kept)", len(reqs))
	}
	for k := range kv.live(t) {
		if v, err := kv.Get(ctx, k); err == nil && len(v) > 4096 {
			t.Errorf("%s keeps %d bytes", k, len(v))
		}
	}
}
