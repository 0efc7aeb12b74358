package authserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"golang.org/x/oauth2"
)

// prover is a DPoP client of one server: a key, and the server's clock to sign with.
type prover struct {
	key   *dpop.Key
	srv   *authserver.Server
	clock *fakeclock.Clock
}

// dpopServer runs a server with opts, DPoP on, on a clock of its own, and returns a
// prover for it.
func dpopServer(t *testing.T, opts authserver.Options) prover {
	t.Helper()
	clock := newClock()
	opts.Now, opts.DPoP = clock.Now, true
	srv := start(t, opts)
	return prover{key: newDPoPKey(t), srv: srv, clock: clock}
}

func newDPoPKey(t testing.TB) *dpop.Key {
	t.Helper()
	key, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// other is a prover for the same server with another key.
func (p prover) other(t *testing.T) prover {
	p.key = newDPoPKey(t)
	return p
}

// proofAt is a proof for method and target signed at the server's clock moved by skew.
func (p prover) proofAt(t testing.TB, skew time.Duration, method, target, token, nonce string) string {
	t.Helper()
	proof, err := p.key.Proof(method, target, p.clock.Now().Add(skew), token, nonce)
	if err != nil {
		t.Fatal(err)
	}
	return proof
}

// tokenProof is a proof for a token request.
func (p prover) tokenProof(t testing.TB, nonce string) string {
	t.Helper()
	return p.proofAt(t, 0, http.MethodPost, p.srv.TokenURL(), "", nonce)
}

// apiProof is a proof for a call of the demo API with token.
func (p prover) apiProof(t testing.TB, token, nonce string) string {
	t.Helper()
	return p.proofAt(t, 0, http.MethodGet, p.srv.APIURL(), token, nonce)
}

// signIn runs an authorization and a code exchange that carries proofs, and
// returns the answer, which must be 200.
func (p prover) signIn(t *testing.T, auth clientAuth, proofs ...string) answer {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	q := authParams(verifier)
	q.Set("client_id", auth.id)
	a := exchange(t, p.srv, auth, getCode(t, p.srv, q), verifier, proofs...)
	wantStatus(t, a, http.StatusOK)
	return a
}

// callAPIWith calls the demo API of srv with an Authorization header ("" for none)
// and a DPoP header for each of proofs.
func callAPIWith(srv *authserver.Server, authorization string, proofs ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, srv.APIURL(), nil)
	if authorization != "" {
		req.Header.Set("Authorization", authorization)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	return rec
}

// wantChallenge fails unless rec is a 401 whose WWW-Authenticate values hold
// each of fragments.
func wantChallenge(t *testing.T, rec *httptest.ResponseRecorder, fragments ...string) {
	t.Helper()
	challenges := strings.Join(rec.Header().Values("WWW-Authenticate"), " | ")
	for _, f := range fragments {
		if rec.Code != http.StatusUnauthorized || !strings.Contains(challenges, f) {
			t.Fatalf("got %d %q, want 401 with %q; body %s", rec.Code, challenges, f, rec.Body)
		}
	}
}

func TestDPoPMetadata(t *testing.T) {
	t.Parallel()
	tests := []struct {
		opts authserver.Options
		want string
	}{
		{authserver.Options{}, "null"},
		{authserver.Options{DPoP: true}, `["ES256"]`},
		{authserver.Options{RequireDPoP: true}, `["ES256"]`},
		{authserver.Options{DPoPNonces: true}, `["ES256"]`},
	}
	for _, tt := range tests {
		srv := start(t, tt.opts)
		resp, err := http.Get(srv.URL() + authserver.PathMetadata)
		if err != nil {
			t.Fatal(err)
		}
		var md map[string]any
		err = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if algs, _ := json.Marshal(md["dpop_signing_alg_values_supported"]); string(algs) != tt.want {
			t.Errorf("%+v: dpop_signing_alg_values_supported = %s, want %s", tt.opts, algs, tt.want)
		}
	}
}

// TestDPoPBindsTokens follows a bound grant through the exchange, the API,
// introspection and a refresh.
func TestDPoPBindsTokens(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{RotateRefreshTokens: true})
	a := p.signIn(t, confidential, p.tokenProof(t, ""))
	if a.TokenType != "DPoP" {
		t.Fatalf("token_type %q, want DPoP", a.TokenType)
	}
	if rec := callAPIWith(p.srv, "DPoP "+a.AccessToken, p.apiProof(t, a.AccessToken, "")); rec.Code != http.StatusOK {
		t.Fatalf("API: %d %s", rec.Code, rec.Body)
	}
	for _, tok := range []string{a.AccessToken, a.RefreshToken} {
		got := post(t, p.srv.IntrospectURL(), confidential, url.Values{"token": {tok}})
		if cnf, _ := got.Raw["cnf"].(map[string]any); cnf["jkt"] != p.key.Thumbprint() {
			t.Fatalf("introspection %v, want cnf.jkt %s", got.Raw, p.key.Thumbprint())
		}
	}
	if got := post(t, p.srv.IntrospectURL(), confidential, url.Values{"token": {a.AccessToken}}); got.Raw["token_type"] != "DPoP" {
		t.Fatalf("introspection %v, want token_type DPoP", got.Raw)
	}
	b := refresh(t, p.srv, confidential, a.RefreshToken, p.tokenProof(t, ""))
	wantStatus(t, b, http.StatusOK)
	if b.TokenType != "DPoP" {
		t.Fatalf("refresh: token_type %q, want DPoP", b.TokenType)
	}
	if rec := callAPIWith(p.srv, "DPoP "+b.AccessToken, p.apiProof(t, b.AccessToken, "")); rec.Code != http.StatusOK {
		t.Fatalf("API after refresh: %d %s", rec.Code, rec.Body)
	}
	if st := p.srv.Stats(); st.DPoPTokenRequests != 2 || st.DPoPProofsAccepted != 4 || st.DPoPProofsInvalid != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDPoPTokenRequest(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		opts      authserver.Options
		proofs    func(*testing.T, prover) []string
		status    int
		code      string
		tokenType string                       // of a 200
		counted   func(authserver.Stats) int64 // the counter this request adds one to
	}{
		{name: "proof", proofs: oneTokenProof, status: http.StatusOK, tokenType: "DPoP",
			counted: func(s authserver.Stats) int64 { return s.DPoPProofsAccepted }},
		{name: "no proof", status: http.StatusOK, tokenType: "Bearer"},
		{name: "no proof when one is required", opts: authserver.Options{RequireDPoP: true},
			status: http.StatusBadRequest, code: "invalid_dpop_proof",
			counted: func(s authserver.Stats) int64 { return s.DPoPProofsMissing }},
		{name: "two proofs", proofs: func(t *testing.T, p prover) []string {
			return []string{p.tokenProof(t, ""), p.tokenProof(t, "")}
		}, status: http.StatusBadRequest, code: "invalid_dpop_proof", counted: invalidProofs},
		{name: "another method", proofs: func(t *testing.T, p prover) []string {
			return []string{p.proofAt(t, 0, http.MethodGet, p.srv.TokenURL(), "", "")}
		}, status: http.StatusBadRequest, code: "invalid_dpop_proof", counted: invalidProofs},
		{name: "another URL", proofs: func(t *testing.T, p prover) []string {
			return []string{p.proofAt(t, 0, http.MethodPost, p.srv.RevokeURL(), "", "")}
		}, status: http.StatusBadRequest, code: "invalid_dpop_proof", counted: invalidProofs},
		{name: "stale", proofs: func(t *testing.T, p prover) []string {
			return []string{p.proofAt(t, -2*dpop.DefaultMaxAge, http.MethodPost, p.srv.TokenURL(), "", "")}
		}, status: http.StatusBadRequest, code: "invalid_dpop_proof", counted: invalidProofs},
		{name: "not a JWS", proofs: func(*testing.T, prover) []string { return []string{"a.b.c"} },
			status: http.StatusBadRequest, code: "invalid_dpop_proof", counted: invalidProofs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := dpopServer(t, tt.opts)
			verifier := oauth2.GenerateVerifier()
			code := getCode(t, p.srv, authParams(verifier))
			var proofs []string
			if tt.proofs != nil {
				proofs = tt.proofs(t, p)
			}
			a := exchange(t, p.srv, confidential, code, verifier, proofs...)
			if a.Status != tt.status || a.Error != tt.code || tt.status == http.StatusOK && a.TokenType != tt.tokenType {
				t.Fatalf("got %d %v, want %d %q %q", a.Status, a.Raw, tt.status, tt.code, tt.tokenType)
			}
			carried := int64(0)
			if len(proofs) > 0 {
				carried = 1
			}
			if st := p.srv.Stats(); tt.counted != nil && tt.counted(st) != 1 || st.DPoPTokenRequests != carried {
				t.Fatalf("stats %+v", st)
			}
			if tt.status != http.StatusOK { // a refused proof leaves the code usable
				wantStatus(t, exchange(t, p.srv, confidential, code, verifier, p.tokenProof(t, "")), http.StatusOK)
			}
		})
	}
}

func oneTokenProof(t *testing.T, p prover) []string { return []string{p.tokenProof(t, "")} }

func invalidProofs(s authserver.Stats) int64 { return s.DPoPProofsInvalid }

// TestDPoPIgnoredWithoutDPoP: a server that does not do DPoP answers a proof
// with a bearer token, and lets dpop_jkt pass.
func TestDPoPIgnoredWithoutDPoP(t *testing.T) {
	t.Parallel()
	clock := newClock()
	srv := start(t, authserver.Options{Now: clock.Now})
	p := prover{key: newDPoPKey(t), srv: srv, clock: clock}
	verifier := oauth2.GenerateVerifier()
	q := authParams(verifier)
	q.Set("dpop_jkt", "not a thumbprint")
	a := exchange(t, srv, confidential, getCode(t, srv, q), verifier, p.tokenProof(t, ""))
	wantStatus(t, a, http.StatusOK)
	if a.TokenType != "Bearer" {
		t.Fatalf("token_type %q, want Bearer", a.TokenType)
	}
	if st := srv.Stats(); st.DPoPTokenRequests != 1 || st.DPoPProofsAccepted != 0 {
		t.Fatalf("stats %+v", st)
	}
	// The DPoP scheme is one it does not know.
	rec := callAPIWith(srv, "DPoP "+a.AccessToken, p.apiProof(t, a.AccessToken, ""))
	if challenges := rec.Header().Values("WWW-Authenticate"); len(challenges) != 1 || challenges[0] != `Bearer realm="authserver"` {
		t.Fatalf("API with the DPoP scheme: %d %q, want 401 with a Bearer challenge alone", rec.Code, challenges)
	}
}

// TestDPoPMountedUnderAPrefix: htu is the issuer's URL and the endpoint's path,
// whatever path the handler itself sees.
func TestDPoPMountedUnderAPrefix(t *testing.T) {
	t.Parallel()
	const issuer = "http://as.test/demo"
	clock := newClock()
	srv := authserver.New(authserver.Options{Issuer: issuer, DPoP: true, Now: clock.Now})
	t.Cleanup(srv.Close)
	mux := http.NewServeMux()
	mux.Handle("/demo/", http.StripPrefix("/demo", srv))
	p := prover{key: newDPoPKey(t), srv: srv, clock: clock}
	for _, tt := range []struct {
		target string
		status int
		answer string // a fragment of the body
	}{
		{"http://as.test/token", http.StatusBadRequest, `"error":"invalid_dpop_proof"`},
		{issuer + "/token", http.StatusOK, `"token_type":"DPoP"`},
	} {
		verifier := oauth2.GenerateVerifier()
		authz := httptest.NewRecorder()
		mux.ServeHTTP(authz, httptest.NewRequest(http.MethodGet, srv.AuthURL()+"?"+authParams(verifier).Encode(), nil))
		loc, _ := url.Parse(authz.Header().Get("Location"))
		if loc == nil || loc.Query().Get("code") == "" {
			t.Fatalf("authorize: %d %q", authz.Code, authz.Header().Get("Location"))
		}
		form := url.Values{"grant_type": {"authorization_code"}, "code": {loc.Query().Get("code")},
			"redirect_uri": {callback}, "code_verifier": {verifier}}
		req := newPost(t, srv.TokenURL(), confidential, form)
		req.Header.Set("DPoP", p.proofAt(t, 0, http.MethodPost, tt.target, "", ""))
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tt.status || !strings.Contains(rec.Body.String(), tt.answer) {
			t.Fatalf("proof for %s: %d %s, want %d with %s", tt.target, rec.Code, rec.Body, tt.status, tt.answer)
		}
	}
}

func TestDPoPTokenProofReplay(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{})
	proof := p.tokenProof(t, "")
	p.signIn(t, confidential, proof)
	verifier := oauth2.GenerateVerifier()
	code := getCode(t, p.srv, authParams(verifier))
	wantError(t, exchange(t, p.srv, confidential, code, verifier, proof), http.StatusBadRequest, "invalid_dpop_proof")
	if st := p.srv.Stats(); st.DPoPProofsReplayed != 1 || st.DPoPProofsAccepted != 1 {
		t.Fatalf("stats %+v", st)
	}
	wantStatus(t, exchange(t, p.srv, confidential, code, verifier, p.tokenProof(t, "")), http.StatusOK)
}

// TestDPoPRefreshProvesTheSameKey: the refresh token of a bound grant is bound
// too, for a confidential client as for a public one, rotated or not.
func TestDPoPRefreshProvesTheSameKey(t *testing.T) {
	t.Parallel()
	for _, auth := range []clientAuth{confidential, public} {
		t.Run(auth.id, func(t *testing.T) {
			t.Parallel()
			p := dpopServer(t, authserver.Options{RotateRefreshTokens: true})
			a := p.signIn(t, auth, p.tokenProof(t, ""))
			wantError(t, refresh(t, p.srv, auth, a.RefreshToken), http.StatusBadRequest, "invalid_grant")
			wantError(t, refresh(t, p.srv, auth, a.RefreshToken, p.other(t).tokenProof(t, "")), http.StatusBadRequest, "invalid_grant")
			if st := p.srv.Stats(); st.DPoPProofsMissing != 1 || st.DPoPKeyMismatches != 1 || st.Refreshes != 0 {
				t.Fatalf("stats %+v", st)
			}
			b := refresh(t, p.srv, auth, a.RefreshToken, p.tokenProof(t, ""))
			wantStatus(t, b, http.StatusOK)
			// The rotated refresh token is bound as well.
			wantError(t, refresh(t, p.srv, auth, b.RefreshToken), http.StatusBadRequest, "invalid_grant")
			// Without the key, presenting the retired one does not revoke the grant.
			wantError(t, refresh(t, p.srv, auth, a.RefreshToken, p.other(t).tokenProof(t, "")), http.StatusBadRequest, "invalid_grant")
			wantStatus(t, refresh(t, p.srv, auth, b.RefreshToken, p.tokenProof(t, "")), http.StatusOK)
			if st := p.srv.Stats(); st.RefreshReuses != 0 || st.Refreshes != 2 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestDPoPRefreshOfABearerGrant: a proof on the refresh of an unbound grant binds
// the new access token, not the grant: its refresh tokens stay unbound.
func TestDPoPRefreshOfABearerGrant(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{RotateRefreshTokens: true})
	a := p.signIn(t, confidential)
	if a.TokenType != "Bearer" {
		t.Fatalf("token_type %q, want Bearer", a.TokenType)
	}
	b := refresh(t, p.srv, confidential, a.RefreshToken, p.tokenProof(t, ""))
	wantStatus(t, b, http.StatusOK)
	if b.TokenType != "DPoP" {
		t.Fatalf("refresh with a proof: token_type %q, want DPoP", b.TokenType)
	}
	wantChallenge(t, callAPIWith(p.srv, "Bearer "+b.AccessToken), `DPoP error="invalid_token"`)
	if rec := callAPIWith(p.srv, "DPoP "+b.AccessToken, p.apiProof(t, b.AccessToken, "")); rec.Code != http.StatusOK {
		t.Fatalf("API: %d %s", rec.Code, rec.Body)
	}
	c := refresh(t, p.srv, confidential, b.RefreshToken)
	wantStatus(t, c, http.StatusOK)
	if c.TokenType != "Bearer" {
		t.Fatalf("refresh without a proof: token_type %q, want Bearer", c.TokenType)
	}
}

// TestDPoPJKT: a code asked for with dpop_jkt is exchanged only with a proof of
// that key (RFC 9449 §10).
func TestDPoPJKT(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		proofs  func(*testing.T, prover) []string
		status  int
		code    string
		counted func(authserver.Stats) int64
	}{
		{"the key", oneTokenProof, http.StatusOK, "", func(s authserver.Stats) int64 { return s.CodesExchanged }},
		{"no proof", func(*testing.T, prover) []string { return nil }, http.StatusBadRequest, "invalid_grant",
			func(s authserver.Stats) int64 { return s.DPoPProofsMissing }},
		{"another key", func(t *testing.T, p prover) []string { return oneTokenProof(t, p.other(t)) },
			http.StatusBadRequest, "invalid_grant", func(s authserver.Stats) int64 { return s.DPoPKeyMismatches }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := dpopServer(t, authserver.Options{})
			verifier := oauth2.GenerateVerifier()
			q := authParams(verifier)
			q.Set("dpop_jkt", p.key.Thumbprint())
			a := exchange(t, p.srv, confidential, getCode(t, p.srv, q), verifier, tt.proofs(t, p)...)
			if a.Status != tt.status || a.Error != tt.code {
				t.Fatalf("got %d %v, want %d %q", a.Status, a.Raw, tt.status, tt.code)
			}
			if st := p.srv.Stats(); tt.counted(st) != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
	t.Run("not a thumbprint", func(t *testing.T) {
		t.Parallel()
		p := dpopServer(t, authserver.Options{})
		for _, jkt := range []string{"abc", strings.Repeat("A", 42) + "=", strings.Repeat("*", 43)} {
			q := authParams(oauth2.GenerateVerifier())
			q.Set("dpop_jkt", jkt)
			if got := redirected(t, p.srv, q); got.Get("error") != "invalid_request" {
				t.Fatalf("dpop_jkt %q: redirect %v, want invalid_request", jkt, got)
			}
		}
	})
}

func TestDPoPAPI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		authorization func(apiTokens) string
		proofs        func(*testing.T, prover, apiTokens) []string
		status        int
		challenge     []string
		counted       func(authserver.Stats) int64
	}{
		{name: "bound token with a proof", authorization: dpopScheme, proofs: boundProof, status: http.StatusOK,
			counted: func(s authserver.Stats) int64 { return s.DPoPProofsAccepted }},
		{name: "lower-case scheme", authorization: func(tk apiTokens) string { return "dpop " + tk.bound },
			proofs: boundProof, status: http.StatusOK},
		{name: "bearer token", authorization: func(tk apiTokens) string { return "Bearer " + tk.bearer }, status: http.StatusOK},
		{name: "bound token as a bearer token", authorization: func(tk apiTokens) string { return "Bearer " + tk.bound },
			challenge: []string{`DPoP error="invalid_token"`, `algs="ES256"`},
			counted:   func(s authserver.Stats) int64 { return s.DPoPProofsMissing }},
		{name: "bound token as a bearer token, with a proof", authorization: func(tk apiTokens) string { return "Bearer " + tk.bound },
			proofs: boundProof, challenge: []string{`DPoP error="invalid_token"`}},
		{name: "no proof", authorization: dpopScheme,
			challenge: []string{`DPoP error="invalid_token"`, `algs="ES256"`},
			counted:   func(s authserver.Stats) int64 { return s.DPoPProofsMissing }},
		{name: "proof of another key", authorization: dpopScheme,
			proofs: func(t *testing.T, p prover, tk apiTokens) []string {
				return []string{p.other(t).apiProof(t, tk.bound, "")}
			}, challenge: []string{`DPoP error="invalid_token"`, `algs="ES256"`},
			counted: func(s authserver.Stats) int64 { return s.DPoPKeyMismatches }},
		{name: "proof without ath", authorization: dpopScheme,
			proofs:    func(t *testing.T, p prover, _ apiTokens) []string { return []string{p.apiProof(t, "", "")} },
			challenge: []string{`DPoP error="invalid_dpop_proof"`, `algs="ES256"`}, counted: invalidProofs},
		{name: "proof for another token", authorization: dpopScheme,
			proofs: func(t *testing.T, p prover, tk apiTokens) []string {
				return []string{p.apiProof(t, tk.bearer, "")}
			}, challenge: []string{`DPoP error="invalid_dpop_proof"`}, counted: invalidProofs},
		{name: "proof for another method", authorization: dpopScheme,
			proofs: func(t *testing.T, p prover, tk apiTokens) []string {
				return []string{p.proofAt(t, 0, http.MethodPost, p.srv.APIURL(), tk.bound, "")}
			}, challenge: []string{`DPoP error="invalid_dpop_proof"`}, counted: invalidProofs},
		{name: "proof for another URL", authorization: dpopScheme,
			proofs: func(t *testing.T, p prover, tk apiTokens) []string {
				return []string{p.proofAt(t, 0, http.MethodGet, p.srv.URL()+"/api/you", tk.bound, "")}
			}, challenge: []string{`DPoP error="invalid_dpop_proof"`}, counted: invalidProofs},
		{name: "stale proof", authorization: dpopScheme,
			proofs: func(t *testing.T, p prover, tk apiTokens) []string {
				return []string{p.proofAt(t, -2*dpop.DefaultMaxAge, http.MethodGet, p.srv.APIURL(), tk.bound, "")}
			}, challenge: []string{`DPoP error="invalid_dpop_proof"`}, counted: invalidProofs},
		{name: "two proofs", authorization: dpopScheme,
			proofs: func(t *testing.T, p prover, tk apiTokens) []string {
				return append(boundProof(t, p, tk), boundProof(t, p, tk)...)
			}, challenge: []string{`DPoP error="invalid_dpop_proof"`}, counted: invalidProofs},
		{name: "bearer token with the DPoP scheme", authorization: func(tk apiTokens) string { return "DPoP " + tk.bearer },
			proofs: func(t *testing.T, p prover, tk apiTokens) []string {
				return []string{p.apiProof(t, tk.bearer, "")}
			}, challenge: []string{`DPoP error="invalid_token"`}},
		{name: "unknown token with the DPoP scheme", authorization: func(apiTokens) string { return "DPoP nope" },
			proofs: func(t *testing.T, p prover, _ apiTokens) []string {
				return []string{p.apiProof(t, "nope", "")}
			}, challenge: []string{`DPoP error="invalid_token"`}},
		{name: "no token", authorization: func(apiTokens) string { return "" },
			challenge: []string{`Bearer realm="authserver"`, `DPoP algs="ES256"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := dpopServer(t, authserver.Options{})
			tk := apiTokens{bound: p.signIn(t, confidential, p.tokenProof(t, "")).AccessToken, bearer: p.signIn(t, confidential).AccessToken}
			before := p.srv.Stats()
			var proofs []string
			if tt.proofs != nil {
				proofs = tt.proofs(t, p, tk)
			}
			rec := callAPIWith(p.srv, tt.authorization(tk), proofs...)
			if tt.status == http.StatusOK {
				if rec.Code != http.StatusOK {
					t.Fatalf("got %d %q, want 200", rec.Code, rec.Header().Values("WWW-Authenticate"))
				}
				wantMe(t, rec.Body.Bytes())
			} else {
				wantChallenge(t, rec, tt.challenge...)
			}
			if tt.counted != nil && tt.counted(p.srv.Stats())-tt.counted(before) != 1 {
				t.Fatalf("stats before %+v, after %+v", before, p.srv.Stats())
			}
		})
	}
}

// apiTokens are the access tokens TestDPoPAPI presents: bound to the prover's key,
// and a bearer token.
type apiTokens struct{ bound, bearer string }

func dpopScheme(tk apiTokens) string { return "DPoP " + tk.bound }

func boundProof(t *testing.T, p prover, tk apiTokens) []string {
	return []string{p.apiProof(t, tk.bound, "")}
}

// TestDPoPAPIProofReplay presents one proof many times at once: exactly one call
// is answered.
func TestDPoPAPIProofReplay(t *testing.T) {
	t.Parallel()
	const n = 50
	p := dpopServer(t, authserver.Options{})
	tok := p.signIn(t, confidential, p.tokenProof(t, "")).AccessToken
	proof := p.apiProof(t, tok, "")
	var answered, replays atomic.Int64
	parallel(t, n, func(int) {
		rec := callAPIWith(p.srv, "DPoP "+tok, proof)
		switch {
		case rec.Code == http.StatusOK:
			answered.Add(1)
		case strings.Contains(rec.Header().Get("WWW-Authenticate"), `error="invalid_dpop_proof"`):
			replays.Add(1)
		}
	})
	if answered.Load() != 1 || replays.Load() != n-1 {
		t.Fatalf("%d answered and %d refused as replays, want 1 and %d", answered.Load(), replays.Load(), n-1)
	}
	if st := p.srv.Stats(); st.DPoPProofsReplayed != n-1 || st.APICalls != 1 {
		t.Fatalf("stats %+v", st)
	}
	// Once the proof is too old to be accepted anyway, it is still refused.
	p.clock.Advance(dpop.DefaultMaxAge + time.Second)
	wantChallenge(t, callAPIWith(p.srv, "DPoP "+tok, proof), `error="invalid_dpop_proof"`)
}

func TestDPoPNonces(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{DPoPNonces: true})
	nonce := p.srv.DPoPNonce()
	verifier := oauth2.GenerateVerifier()
	code := getCode(t, p.srv, authParams(verifier))

	for _, stale := range []string{"", "an-old-nonce"} {
		a := exchange(t, p.srv, confidential, code, verifier, p.tokenProof(t, stale))
		wantError(t, a, http.StatusBadRequest, "use_dpop_nonce")
		if got := a.Header.Get("DPoP-Nonce"); got != nonce {
			t.Fatalf("challenge with nonce %q, want %q", got, nonce)
		}
	}
	a := exchange(t, p.srv, confidential, code, verifier, p.tokenProof(t, nonce))
	wantStatus(t, a, http.StatusOK)
	if a.TokenType != "DPoP" || a.Header.Get("DPoP-Nonce") != nonce {
		t.Fatalf("answer %v, DPoP-Nonce %q", a.Raw, a.Header.Get("DPoP-Nonce"))
	}

	rec := callAPIWith(p.srv, "DPoP "+a.AccessToken, p.apiProof(t, a.AccessToken, ""))
	wantChallenge(t, rec, `DPoP error="use_dpop_nonce"`, `algs="ES256"`)
	if rec.Header().Get("DPoP-Nonce") != nonce {
		t.Fatalf("API challenge with nonce %q, want %q", rec.Header().Get("DPoP-Nonce"), nonce)
	}
	rec = callAPIWith(p.srv, "DPoP "+a.AccessToken, p.apiProof(t, a.AccessToken, nonce))
	if rec.Code != http.StatusOK || rec.Header().Get("DPoP-Nonce") != nonce {
		t.Fatalf("API: %d with DPoP-Nonce %q", rec.Code, rec.Header().Get("DPoP-Nonce"))
	}

	rotated := p.srv.RotateDPoPNonce()
	if rotated == nonce || p.srv.DPoPNonce() != rotated {
		t.Fatalf("rotated %q to %q, now %q", nonce, rotated, p.srv.DPoPNonce())
	}
	b := refresh(t, p.srv, confidential, a.RefreshToken, p.tokenProof(t, nonce))
	wantError(t, b, http.StatusBadRequest, "use_dpop_nonce")
	if b.Header.Get("DPoP-Nonce") != rotated {
		t.Fatalf("challenge after rotation with nonce %q, want %q", b.Header.Get("DPoP-Nonce"), rotated)
	}
	wantStatus(t, refresh(t, p.srv, confidential, a.RefreshToken, p.tokenProof(t, rotated)), http.StatusOK)
	if st := p.srv.Stats(); st.DPoPNonceChallenges != 4 || st.DPoPProofsAccepted != 3 || st.DPoPProofsInvalid != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestDPoPNoncesWithTheClientTransport: a client that keeps the nonce the server
// last sent is challenged once at first and once after each rotation.
func TestDPoPNoncesWithTheClientTransport(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{DPoPNonces: true})
	origin, _ := url.Parse(p.srv.URL())
	var accessToken string
	client := &http.Client{Timeout: 30 * time.Second, Transport: &dpop.Transport{
		Key: p.key, Nonces: &dpop.Nonces{}, Origin: origin, Now: p.clock.Now,
		AccessToken: func(req *http.Request) (string, error) {
			if req.URL.Path == authserver.PathAPI {
				return accessToken, nil
			}
			return "", nil
		},
	}}
	verifier := oauth2.GenerateVerifier()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {getCode(t, p.srv, authParams(verifier))},
		"redirect_uri": {callback}, "code_verifier": {verifier}}
	a := doAnswer(t, client, newPost(t, p.srv.TokenURL(), confidential, form))
	wantStatus(t, a, http.StatusOK)
	accessToken = a.AccessToken
	steps := []struct {
		rotate     bool
		challenges int64
	}{{false, 1}, {true, 2}, {false, 2}}
	for i, step := range steps {
		if step.rotate {
			p.srv.RotateDPoPNonce()
		}
		req, _ := http.NewRequest(http.MethodGet, p.srv.APIURL(), nil)
		wantStatus(t, doAnswer(t, client, req), http.StatusOK)
		if n := p.srv.Stats().DPoPNonceChallenges; n != step.challenges {
			t.Fatalf("step %d: %d nonce challenges, want %d", i, n, step.challenges)
		}
	}
}

func doAnswer(t *testing.T, client *http.Client, req *http.Request) answer {
	t.Helper()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	return decodeAnswer(t, resp)
}
