package mcpauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// dpopAS is an MCP server and its authorization server for the grants an
// agent makes without a sign-in: client credentials (the client's Basic
// credentials), and the JWT bearer grant for an ID-JAG its identity
// provider (/idp/token) exchanges a user's ID token for, or for a
// workload's JWT. With dpop set it advertises ES256 for DPoP (RFC 9449):
// a token request with a valid proof gets a token bound to the proof's key
// (token_type DPoP), which its MCP endpoint then takes only with the DPoP
// scheme and a proof of that key binding the token (ath). With nonces set,
// its token endpoint answers a proof without its current nonce with
// use_dpop_nonce. With lie set, it answers token_type DPoP whatever the
// request proved. With jwtClient set, the client credentials grant
// authenticates with private_key_jwt, each assertion's jti spent at once
// (authenticateClient). It records every token request and every MCP call.
type dpopAS struct {
	srv       *httptest.Server
	dpop      bool
	nonce     string           // the nonce demanded of every proof; "" demands none
	expiresIn int              // of every token
	client    mcpauth.Client   // the app's client at the fake (Config.Clients)
	clientKey *ecdsa.PublicKey // set: the client signs assertions with its private key

	mu         sync.Mutex
	lie        bool
	requests   []grantRequest
	jtis       map[string]bool   // the jti of every proof accepted
	spent      map[string]bool   // the jti of every client assertion verified
	bound      map[string]string // access token -> the thumbprint of its key ("" for a bearer token)
	calls      []mcpCall
	idpProofs  int // requests to the identity provider that carried a DPoP header
	assertions int // workload JWTs issued
}

// grantRequest is one request of the fake's token endpoint.
type grantRequest struct {
	grant      string
	proof      string // the DPoP header, "" when none came
	jkt        string // the thumbprint of the proof's key, when the proof was accepted
	challenged bool   // answered use_dpop_nonce
	clientJTI  string // the jti of the client assertion, when one came
}

// mcpCall is one request of the fake's MCP endpoint.
type mcpCall struct {
	scheme string // of the Authorization header
	proof  string // the DPoP header
	ok     bool   // the token was taken
}

// dpopOptions is what a dpopAS does: take DPoP, demand nonces, and give
// tokens that live expiresIn seconds (0: an hour).
type dpopOptions struct {
	dpop, nonces bool
	expiresIn    int
	jwtClient    bool // the app's client authenticates with private_key_jwt
}

func newDPoPAS(t *testing.T, o dpopOptions) *dpopAS {
	t.Helper()
	f := &dpopAS{dpop: o.dpop, expiresIn: o.expiresIn, client: mcpauth.Client{ID: "agent-client", Secret: "agent-secret"},
		jtis: map[string]bool{}, spent: map[string]bool{}, bound: map[string]string{}}
	if o.jwtClient {
		f.client, f.clientKey = jwtClient(t)
	}
	if f.expiresIn == 0 {
		f.expiresIn = 3600
	}
	if o.nonces {
		f.nonce = rand.Text()
	}
	mux := http.NewServeMux()
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": f.srv.URL + "/mcp", "authorization_servers": []string{f.srv.URL},
			"scopes_supported": []string{"tools:call"}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		md := map[string]any{"issuer": f.srv.URL, "authorization_endpoint": f.srv.URL + "/authorize", "token_endpoint": f.srv.URL + "/token",
			"grant_types_supported":                 []string{"client_credentials", jwtBearer},
			"code_challenge_methods_supported":      []string{"S256"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_basic"}}
		if f.clientKey != nil {
			md["token_endpoint_auth_methods_supported"] = []string{"private_key_jwt"}
		}
		if f.dpop {
			md["dpop_signing_alg_values_supported"] = []string{"RS256", "ES256"}
		}
		writeJSON(w, md)
	})
	mux.HandleFunc("POST /token", f.token)
	mux.HandleFunc("POST /idp/token", f.idp)
	mux.HandleFunc("POST /mcp", f.mcp)
	return f
}

// token answers a token request: a use_dpop_nonce or invalid_dpop_proof
// refusal of its proof, a refusal of its grant, or a token bound to the key
// it proved.
func (f *dpopAS) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	req := grantRequest{grant: r.PostForm.Get("grant_type"), proof: r.Header.Get("DPoP")}
	client := f.authenticateClient(r, &req)
	refusal := f.acceptProof(w, r, &req)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.requests = append(f.requests, req)
	if refusal != "" {
		tokenError(w, http.StatusBadRequest, refusal)
		return
	}
	prefix, ok := f.granted(r, client)
	if !ok {
		tokenError(w, http.StatusBadRequest, "invalid_grant")
		return
	}
	tok := fmt.Sprintf("%s-%d", prefix, len(f.requests))
	f.bound[tok] = req.jkt
	tokenType := "Bearer"
	if req.jkt != "" || f.lie {
		tokenType = "DPoP"
	}
	writeJSON(w, map[string]any{"access_token": tok, "token_type": tokenType, "expires_in": f.expiresIn})
}

// acceptProof checks r's proof, when the fake takes DPoP and r carries one,
// and returns the error code that refuses it ("" when it is accepted).
func (f *dpopAS) acceptProof(w http.ResponseWriter, r *http.Request, req *grantRequest) string {
	if !f.dpop || req.proof == "" {
		return ""
	}
	if f.nonce != "" {
		w.Header().Set("DPoP-Nonce", f.nonce)
	}
	jkt, err := dpop.Verify(req.proof, http.MethodPost, f.srv.URL+"/token", time.Now(), time.Minute, "", f.nonce)
	switch {
	case errors.Is(err, dpop.ErrUseNonce):
		req.challenged = true
		return "use_dpop_nonce"
	case err != nil:
		return "invalid_dpop_proof"
	}
	p, _ := decodeProof(req.proof) // it verified: it decodes
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.jtis[p.claims.JTI] {
		return "invalid_dpop_proof"
	}
	f.jtis[p.claims.JTI] = true
	req.jkt = jkt
	return ""
}

// granted checks r's grant, whose client authenticated when client is set,
// and returns the prefix of the token it gets.
func (f *dpopAS) granted(r *http.Request, client bool) (string, bool) {
	switch r.PostForm.Get("grant_type") {
	case "client_credentials":
		return "cc", client && r.PostForm.Get("resource") == f.srv.URL+"/mcp"
	case jwtBearer:
		assertion := r.PostForm.Get("assertion")
		if user, ok := strings.CutPrefix(assertion, "jag-"); ok {
			return "xaa-" + user, true
		}
		return "wif", strings.HasPrefix(assertion, "jwt-")
	}
	return "", false
}

// idp is the enterprise identity provider's token exchange: an ID-JAG for
// the user of the ID token.
func (f *dpopAS) idp(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	f.mu.Lock()
	if r.Header.Get("DPoP") != "" {
		f.idpProofs++
	}
	f.mu.Unlock()
	user, ok := strings.CutPrefix(r.PostForm.Get("subject_token"), "idtoken-")
	if !ok || r.PostForm.Get("audience") != f.srv.URL {
		tokenError(w, http.StatusBadRequest, "invalid_request")
		return
	}
	writeJSON(w, map[string]any{"access_token": "jag-" + user, "issued_token_type": "urn:ietf:params:oauth:token-type:id-jag", "token_type": "N_A"})
}

// mcp takes a token the fake issued: a bearer token with the Bearer scheme,
// a bound one with the DPoP scheme and a proof of its key that binds it.
func (f *dpopAS) mcp(w http.ResponseWriter, r *http.Request) {
	scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	call := mcpCall{scheme: scheme, proof: r.Header.Get("DPoP")}
	f.mu.Lock()
	jkt, known := f.bound[tok]
	f.mu.Unlock()
	switch {
	case !known:
	case jkt == "":
		call.ok = scheme == "Bearer"
	case scheme == "DPoP":
		got, err := dpop.Verify(call.proof, r.Method, f.srv.URL+"/mcp", time.Now(), time.Minute, tok, "")
		call.ok = err == nil && got == jkt
	}
	f.mu.Lock()
	f.calls = append(f.calls, call)
	f.mu.Unlock()
	if !call.ok {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+f.srv.URL+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	_, _ = io.WriteString(w, "ok "+tok)
}

// seen is the fake's token requests and MCP calls so far.
func (f *dpopAS) seen() ([]grantRequest, []mcpCall) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.requests), slices.Clone(f.calls)
}

// proofsAtIdP is how many requests to the identity provider carried a proof.
func (f *dpopAS) proofsAtIdP() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.idpProofs
}

func (f *dpopAS) setLie(lie bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lie = lie
}

// workloadJWT is the workload's platform: a new JWT for each grant.
func (f *dpopAS) workloadJWT(context.Context, string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.assertions++
	return fmt.Sprintf("jwt-%d", f.assertions), nil
}

// newDPoPInstance is an instance on kv, sealing with ring when it is not
// nil, whose Connector has the client credentials, the identity provider
// and the workload identity f takes.
func newDPoPInstance(t *testing.T, kv oauthflow.KV, f *dpopAS, ring *oauthflow.KeyRing) *instance {
	t.Helper()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Encryption: ring, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	c, err := mcpauth.New(mcpauth.Config{Module: m, RedirectURL: "http://127.0.0.1:1/api/v1/oauth/callback", HTTPClient: f.srv.Client(),
		Clients: map[string]mcpauth.Client{f.srv.URL: f.client},
		CrossApp: &mcpauth.CrossApp{TokenURL: f.srv.URL + "/idp/token", ClientID: "idp-client",
			IDToken: func(_ context.Context, user string) (string, error) { return "idtoken-" + user, nil }},
		Workload: &mcpauth.Workload{Assertion: f.workloadJWT}})
	if err != nil {
		t.Fatal(err)
	}
	return &instance{mod: m, conn: c}
}

// grantWithoutSignIn is one of the grants an agent makes without a sign-in.
type grantWithoutSignIn struct {
	name    string
	grant   string // its grant_type at the token endpoint
	connect func(c *mcpauth.Connector, ctx context.Context, serverURL, userID string, ch mcpauth.Challenge) (string, error)
	way     func(h *mcpauth.OAuthHandler) // sets the handler's way in
}

var grantsWithoutSignIn = []grantWithoutSignIn{
	{"client credentials", "client_credentials", (*mcpauth.Connector).ConnectAsClient, func(h *mcpauth.OAuthHandler) { h.AsClient = true }},
	{"cross-app access", jwtBearer, (*mcpauth.Connector).ConnectCrossApp, func(h *mcpauth.OAuthHandler) { h.CrossApp = true }},
	{"workload identity", jwtBearer, (*mcpauth.Connector).ConnectAsWorkload, func(h *mcpauth.OAuthHandler) { h.Workload = true }},
}

// forEachGrant runs test for each grant without a sign-in, in parallel.
func forEachGrant(t *testing.T, test func(t *testing.T, g grantWithoutSignIn)) {
	t.Helper()
	for _, g := range grantsWithoutSignIn {
		t.Run(g.name, func(t *testing.T) {
			t.Parallel()
			test(t, g)
		})
	}
}

// proofClaims is a DPoP proof's payload (RFC 9449 §4.2).
type proofClaims struct {
	JTI   string  `json:"jti"`
	HTM   string  `json:"htm"`
	HTU   string  `json:"htu"`
	IAT   float64 `json:"iat"`
	ATH   string  `json:"ath"`
	Nonce string  `json:"nonce"`
}

// proofParts is a proof's header jwk and its claims.
type proofParts struct {
	jwk    dpop.JWK
	claims proofClaims
}

// decodeProof reads a proof's jwk and claims as they are, unchecked (the
// fake's dpop.Verify checks the proofs it accepts).
func decodeProof(proof string) (proofParts, error) {
	var p proofParts
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return p, fmt.Errorf("a proof of %d parts", len(parts))
	}
	var header struct {
		JWK dpop.JWK `json:"jwk"`
	}
	for i, v := range []any{&header, &p.claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return p, err
		}
		if err := json.Unmarshal(raw, v); err != nil {
			return p, err
		}
	}
	p.jwk = header.JWK
	return p, nil
}

// readProof is decodeProof's reading of proof, which must decode.
func readProof(t *testing.T, proof string) proofParts {
	t.Helper()
	p, err := decodeProof(proof)
	if err != nil {
		t.Fatalf("proof %q: %v", proof, err)
	}
	return p
}

// storedKey is the key userID's token for id is bound to, as the store
// keeps it; nil for a bearer token.
func storedKey(t *testing.T, in *instance, userID, id string) *dpop.Key {
	t.Helper()
	stored, err := in.mod.Tokens.GetTokens(context.Background(), userID, id)
	if err != nil {
		t.Fatal(err)
	}
	if stored.TokenType == "" && stored.DPoPKey == "" {
		return nil
	}
	if stored.TokenType != "DPoP" {
		t.Fatalf("the stored token is of type %q with a key %t, want DPoP", stored.TokenType, stored.DPoPKey != "")
	}
	raw, err := base64.RawURLEncoding.DecodeString(stored.DPoPKey)
	if err != nil {
		t.Fatal(err)
	}
	k, err := dpop.ParseKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// callMCP sends a request to f's MCP endpoint as the Go SDK does through
// OAuthHandler.HTTPClient, with the token its TokenSource gives for userID,
// and returns the answer's status and body.
func callMCP(t *testing.T, in *instance, f *dpopAS, g grantWithoutSignIn, userID string) (int, string) {
	t.Helper()
	ctx := context.Background()
	h := &mcpauth.OAuthHandler{Connector: in.conn, UserID: userID, ServerURL: f.srv.URL + "/mcp"}
	g.way(h)
	ts, err := h.TokenSource(ctx)
	if err != nil || ts == nil {
		t.Fatalf("token source: %v, %v", ts, err)
	}
	tok, err := ts.Token()
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.srv.URL+"/mcp", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	tok.SetAuthHeader(req)
	resp, err := h.HTTPClient(nil).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// checkProof fails unless r carried a valid proof for the token endpoint,
// signed now with key.
func checkProof(t *testing.T, f *dpopAS, r grantRequest, key *dpop.Key) {
	t.Helper()
	if r.proof == "" || r.jkt == "" {
		t.Fatalf("the %s request carried proof %q, accepted %t; want a valid proof", r.grant, r.proof, r.jkt != "")
	}
	p := readProof(t, r.proof)
	c := p.claims
	if c.HTM != http.MethodPost || c.HTU != f.srv.URL+"/token" || c.JTI == "" || math.Abs(float64(time.Now().Unix())-c.IAT) > 60 {
		t.Errorf("the proof claims htm %q, htu %q, jti %q, iat %v; want POST to %s/token, now, with a jti", c.HTM, c.HTU, c.JTI, c.IAT, f.srv.URL)
	}
	if key == nil || p.jwk != key.PublicJWK() || r.jkt != key.Thumbprint() {
		t.Errorf("the proof's jwk %+v is not the stored key's", p.jwk)
	}
}

// checkBoundCall fails unless the last MCP call took a token with the DPoP
// scheme and a proof binding it.
func checkBoundCall(t *testing.T, f *dpopAS, status int, body string) {
	t.Helper()
	_, calls := f.seen()
	if status != http.StatusOK || len(calls) == 0 {
		t.Fatalf("the MCP server answered %d %q after %d calls", status, body, len(calls))
	}
	last := calls[len(calls)-1]
	if last.scheme != "DPoP" || !last.ok || readProof(t, last.proof).claims.ATH == "" {
		t.Errorf("the MCP call went as %q with proof %t, taken %t; want DPoP with a proof binding the token (ath)", last.scheme, last.proof != "", last.ok)
	}
}

// Against an authorization server that takes DPoP, each grant without a
// sign-in proves a key at the token endpoint, a key of the connection's own
// (another user's or agent's connection proves another), stores its token
// bound to that key, and the MCP server gets the token with the DPoP scheme
// and a proof binding it. The identity provider of cross-app access gets no
// proof.
func TestGrantsWithoutSignInProveTheirKey(t *testing.T) {
	t.Parallel()
	forEachGrant(t, func(t *testing.T, g grantWithoutSignIn) {
		f := newDPoPAS(t, dpopOptions{dpop: true})
		in := newDPoPInstance(t, oauthflow.NewMemoryKV(), f, nil)
		ctx := context.Background()
		id, err := g.connect(in.conn, ctx, f.srv.URL+"/mcp", "alice", mcpauth.Challenge{})
		if err != nil {
			t.Fatal(err)
		}
		reqs, _ := f.seen()
		if len(reqs) != 1 || reqs[0].grant != g.grant {
			t.Fatalf("token requests %+v, want one of the %s grant", reqs, g.grant)
		}
		key := storedKey(t, in, "alice", id)
		checkProof(t, f, reqs[0], key)
		status, body := callMCP(t, in, f, g, "alice")
		checkBoundCall(t, f, status, body)

		if _, err := g.connect(in.conn, ctx, f.srv.URL+"/mcp", "bob", mcpauth.Challenge{}); err != nil {
			t.Fatal(err)
		}
		reqs, _ = f.seen()
		bobs := storedKey(t, in, "bob", id)
		checkProof(t, f, reqs[len(reqs)-1], bobs)
		if bobs.Thumbprint() == key.Thumbprint() {
			t.Error("two connections proved one key")
		}
		if n := f.proofsAtIdP(); n != 0 {
			t.Errorf("the identity provider got %d proofs, want none", n)
		}
	})
}

// A use_dpop_nonce answer to a grant's token request is answered by one
// retry with the nonce, and the nonce is remembered: the next connection's
// grant at that server carries it at once.
func TestGrantsWithoutSignInAnswerTheNonceOnce(t *testing.T) {
	t.Parallel()
	forEachGrant(t, func(t *testing.T, g grantWithoutSignIn) {
		f := newDPoPAS(t, dpopOptions{dpop: true, nonces: true})
		in := newDPoPInstance(t, oauthflow.NewMemoryKV(), f, nil)
		ctx := context.Background()
		for _, user := range []string{"alice", "bob"} {
			if _, err := g.connect(in.conn, ctx, f.srv.URL+"/mcp", user, mcpauth.Challenge{}); err != nil {
				t.Fatal(err)
			}
		}
		reqs, _ := f.seen()
		var challenged, taken int
		for _, r := range reqs {
			if r.challenged {
				challenged++
			}
			if r.jkt != "" {
				taken++
				if got := readProof(t, r.proof).claims.Nonce; got != f.nonce {
					t.Errorf("an accepted proof carries nonce %q, want %q", got, f.nonce)
				}
			}
		}
		if challenged != 1 || taken != 2 || len(reqs) != 3 {
			t.Errorf("%d token requests, %d answered use_dpop_nonce, %d proofs taken; want one retry, then the nonce remembered", len(reqs), challenged, taken)
		}
		if len(reqs) > 1 && reqs[0].challenged && readProof(t, reqs[0].proof).jwk != readProof(t, reqs[1].proof).jwk {
			t.Error("the retry proved another key")
		}
	})
}

// A grant's token, fetched again with the grant when it expires (here on an
// instance that never connected the server, at a server that demands
// nonces), is bound to the key the connection's record keeps: the refresh
// proves it, the record keeps it, and the MCP server takes the new token
// with a proof of it.
func TestGrantsWithoutSignInRefreshWithTheirKey(t *testing.T) {
	t.Parallel()
	forEachGrant(t, func(t *testing.T, g grantWithoutSignIn) {
		f := newDPoPAS(t, dpopOptions{dpop: true, nonces: true, expiresIn: 30}) // inside the store's skew: every read fetches a new token
		kv := oauthflow.NewMemoryKV()
		a, b := newDPoPInstance(t, kv, f, nil), newDPoPInstance(t, kv, f, nil)
		ctx := context.Background()
		id, err := g.connect(a.conn, ctx, f.srv.URL+"/mcp", "alice", mcpauth.Challenge{})
		if err != nil {
			t.Fatal(err)
		}
		key := storedKey(t, a, "alice", id)
		first, _ := f.seen()
		tok, err := b.mod.Tokens.GetValidAccessToken(ctx, "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		reqs, _ := f.seen()
		if len(reqs) <= len(first) || !strings.HasSuffix(tok, fmt.Sprintf("-%d", len(reqs))) {
			t.Fatalf("the read gave %q after %d token requests, want the next grant's token", tok, len(reqs))
		}
		checkProof(t, f, reqs[len(reqs)-1], key)
		if again := storedKey(t, b, "alice", id); again == nil || again.Thumbprint() != key.Thumbprint() {
			t.Error("the refreshed record keeps another key")
		}
		status, body := callMCP(t, b, f, g, "alice")
		checkBoundCall(t, f, status, body)
	})
}

// An authorization server that does not advertise DPoP gets no proof, and
// the grant's token is a bearer token, sent as Bearer.
func TestGrantsWithoutSignInStayBearerWithoutDPoP(t *testing.T) {
	t.Parallel()
	forEachGrant(t, func(t *testing.T, g grantWithoutSignIn) {
		f := newDPoPAS(t, dpopOptions{})
		in := newDPoPInstance(t, oauthflow.NewMemoryKV(), f, nil)
		id, err := g.connect(in.conn, context.Background(), f.srv.URL+"/mcp", "alice", mcpauth.Challenge{})
		if err != nil {
			t.Fatal(err)
		}
		reqs, _ := f.seen()
		if len(reqs) != 1 || reqs[0].proof != "" {
			t.Fatalf("token requests %+v, want one without a proof", reqs)
		}
		if k := storedKey(t, in, "alice", id); k != nil {
			t.Fatal("the stored token is bound to a key")
		}
		status, body := callMCP(t, in, f, g, "alice")
		_, calls := f.seen()
		if status != http.StatusOK || len(calls) != 1 || calls[0].scheme != "Bearer" || calls[0].proof != "" {
			t.Errorf("the MCP server answered %d %q to %+v, want a bearer token taken", status, body, calls)
		}
	})
}

// A token_type DPoP answer to a token request that proved no key is a
// token nothing can use: it is refused, on the first grant (nothing is
// stored) and on a refresh (the read fails).
func TestDPoPTokenForAnUnprovedGrantIsRefused(t *testing.T) {
	t.Parallel()
	forEachGrant(t, func(t *testing.T, g grantWithoutSignIn) {
		f := newDPoPAS(t, dpopOptions{expiresIn: 30}) // inside the store's skew: every read fetches a new token
		in := newDPoPInstance(t, oauthflow.NewMemoryKV(), f, nil)
		ctx := context.Background()
		id, err := g.connect(in.conn, ctx, f.srv.URL+"/mcp", "alice", mcpauth.Challenge{})
		if err != nil {
			t.Fatal(err)
		}
		f.setLie(true)
		var pe *oauthflow.ProviderError
		if tok, err := in.mod.Tokens.GetValidAccessToken(ctx, "alice", id); !errors.As(err, &pe) || pe.ProviderID != id {
			t.Errorf("a refresh answered DPoP without a proof gave %q, %v; want the provider's refusal", tok, err)
		}
		if _, err := g.connect(in.conn, ctx, f.srv.URL+"/mcp", "bob", mcpauth.Challenge{}); !errors.As(err, &pe) || pe.ProviderID != id {
			t.Errorf("a grant answered DPoP without a proof: %v; want the provider's refusal", err)
		}
		if _, err := in.mod.Tokens.GetTokens(ctx, "bob", id); !errors.Is(err, oauthflow.ErrNoToken) {
			t.Errorf("the refused grant's token was stored: %v", err)
		}
	})
}

// With encryption at rest, a bound grant's key is sealed with its token
// record, as a sign-in's is: neither the key nor the token is in any value
// of the keyspace, and the key still signs the MCP call.
func TestGrantKeyIsSealedAtRest(t *testing.T) {
	t.Parallel()
	f := newDPoPAS(t, dpopOptions{dpop: true})
	c, real := redistest.Any(t)
	prefix := "test:"
	if real {
		prefix = redistest.Prefix(t, c)
	}
	kv := oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), prefix)
	in := newDPoPInstance(t, kv, f, newRing(t, newKey("k1")))
	ctx := context.Background()
	id, err := in.conn.ConnectAsClient(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := in.mod.Tokens.GetTokens(ctx, "agent", id)
	if err != nil || stored.TokenType != "DPoP" || stored.DPoPKey == "" {
		t.Fatalf("the stored token: type %q, key %t, %v; want one bound to a key", stored.TokenType, stored.DPoPKey != "", err)
	}
	checkSealed(t, dumpStrings(t, c, prefix), "enc2:k1:", []string{stored.AccessToken, stored.DPoPKey})
	status, body := callMCP(t, in, f, grantsWithoutSignIn[0], "agent")
	checkBoundCall(t, f, status, body)
}
