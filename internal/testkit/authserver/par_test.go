package authserver_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

// push sends a pushed authorization request of q with the client's credentials
// and a DPoP header for each of proofs.
func push(t testing.TB, srv *authserver.Server, auth clientAuth, q url.Values, proofs ...string) answer {
	t.Helper()
	return post(t, srv.PARURL(), auth, q, proofs...)
}

// requestURI is the request_uri of a push that must succeed.
func requestURI(t testing.TB, a answer) string {
	t.Helper()
	wantStatus(t, a, http.StatusCreated)
	uri, _ := a.Raw["request_uri"].(string)
	if !strings.HasPrefix(uri, "urn:ietf:params:oauth:request_uri:") || len(uri) < len("urn:ietf:params:oauth:request_uri:")+16 {
		t.Fatalf("request_uri %q", uri)
	}
	return uri
}

// pushedQuery is the query of an authorization request that uses uri.
func pushedQuery(clientID, uri string) url.Values {
	return url.Values{"client_id": {clientID}, "request_uri": {uri}}
}

// refusedPage sends an authorization request that must be refused with a page.
func refusedPage(t testing.TB, srv *authserver.Server, q url.Values) {
	t.Helper()
	resp := authorize(t, srv, q)
	if resp.StatusCode != http.StatusBadRequest || resp.Header.Get("Location") != "" {
		t.Fatalf("authorize %v: status %d, Location %q; want a 400 page", q, resp.StatusCode, resp.Header.Get("Location"))
	}
}

// A pushed request, from a confidential client with either authentication or
// from a public one, is answered 201 with a request_uri that stands for it: the
// browser carries client_id and request_uri only, and the code comes back to
// the pushed redirect URI with the pushed state, bound to the pushed PKCE
// challenge.
func TestPARFlow(t *testing.T) {
	t.Parallel()
	for name, auth := range map[string]clientAuth{
		"client_secret_basic": confidential,
		"client_secret_post":  {id: authserver.DefaultClientID, secret: authserver.DefaultClientSecret},
		"public":              public,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{PAR: true, IssParameter: true})
			verifier := oauth2.GenerateVerifier()
			q := authParams(verifier)
			q.Set("client_id", auth.id)
			a := push(t, srv, auth, q)
			uri := requestURI(t, a)
			if a.Raw["expires_in"] != float64(60) || a.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("answer %v, Cache-Control %q", a.Raw, a.Header.Get("Cache-Control"))
			}
			got := redirected(t, srv, pushedQuery(auth.id, uri))
			if got.Get("state") != "state-123" || got.Get("iss") != srv.URL() || got.Get("code") == "" {
				t.Fatalf("redirect query %v", got)
			}
			wantError(t, exchange(t, srv, auth, got.Get("code"), oauth2.GenerateVerifier()), http.StatusBadRequest, "invalid_grant")
			got = redirected(t, srv, pushedQuery(auth.id, requestURI(t, push(t, srv, auth, q))))
			tok := exchange(t, srv, auth, got.Get("code"), verifier)
			wantStatus(t, tok, http.StatusOK)
			if tok.Scope != "read write" {
				t.Fatalf("scope %q, want the pushed one", tok.Scope)
			}
			if st := srv.Stats(); st.PARRequests != 2 || st.RequestURIsRedeemed != 2 || st.Authorizations != 2 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// The PAR endpoint authenticates its client exactly as the token endpoint
// does, and takes the authorization request's parameters only from it.
func TestPARClientAuthentication(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{PAR: true})
	q := authParams(oauth2.GenerateVerifier())
	wrong := confidential
	wrong.secret = "not-the-secret"
	wantError(t, push(t, srv, wrong, q), http.StatusUnauthorized, "invalid_client")
	wantError(t, push(t, srv, clientAuth{}, url.Values{"response_type": {"code"}}), http.StatusUnauthorized, "invalid_client")
	other := authParams(oauth2.GenerateVerifier())
	other.Set("client_id", authserver.DefaultPublicClientID)
	wantError(t, push(t, srv, confidential, other), http.StatusBadRequest, "invalid_request")
	noID := authParams(oauth2.GenerateVerifier())
	noID.Del("client_id")
	uri := requestURI(t, push(t, srv, confidential, noID)) // the authenticated client is the request's
	redirected(t, srv, pushedQuery(authserver.DefaultClientID, uri))
}

// A pushed request is checked as one in a query, and its errors are answered
// as JSON: nothing is redirected from the PAR endpoint.
func TestPARRefusesBadRequests(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{PAR: true})
	for name, tc := range map[string]struct {
		change func(url.Values)
		code   string
	}{
		"a request_uri":        {func(q url.Values) { q.Set("request_uri", "urn:x") }, "invalid_request"},
		"unregistered":         {func(q url.Values) { q.Set("redirect_uri", "https://evil.example/cb") }, "invalid_request"},
		"no response_type":     {func(q url.Values) { q.Del("response_type") }, "unsupported_response_type"},
		"bad challenge method": {func(q url.Values) { q.Set("code_challenge_method", "S512") }, "invalid_request"},
	} {
		q := authParams(oauth2.GenerateVerifier())
		tc.change(q)
		a := push(t, srv, confidential, q)
		if a.Status != http.StatusBadRequest || a.Error != tc.code || a.Header.Get("Location") != "" {
			t.Errorf("%s: %d %v, want 400 %s", name, a.Status, a.Raw, tc.code)
		}
	}
	q := authParams("")
	wantError(t, push(t, srv, public, withClient(q, authserver.DefaultPublicClientID)), http.StatusBadRequest, "invalid_request")
	if st := srv.Stats(); st.PARRequests != 5 {
		t.Fatalf("stats %+v", st)
	}
}

func withClient(q url.Values, id string) url.Values {
	q.Set("client_id", id)
	return q
}

// A request_uri is good for one authorization request: the second use is
// refused, and so is a request that adds any parameter to client_id and
// request_uri, or names another client.
func TestPARRequestURIIsSingleUse(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{PAR: true})
	q := authParams(oauth2.GenerateVerifier())
	uri := requestURI(t, push(t, srv, confidential, q))
	redirected(t, srv, pushedQuery(authserver.DefaultClientID, uri))
	refusedPage(t, srv, pushedQuery(authserver.DefaultClientID, uri))

	extra := pushedQuery(authserver.DefaultClientID, requestURI(t, push(t, srv, confidential, q)))
	extra.Set("scope", "admin")
	refusedPage(t, srv, extra)
	refusedPage(t, srv, pushedQuery(authserver.DefaultPublicClientID, requestURI(t, push(t, srv, confidential, q))))
	refusedPage(t, srv, pushedQuery(authserver.DefaultClientID, "urn:ietf:params:oauth:request_uri:made-up"))
	if st := srv.Stats(); st.RequestURIsRedeemed != 1 || st.RequestURIsRefused != 4 || st.Authorizations != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// A request_uri expires after Options.RequestURITTL, which the answer names.
func TestPARRequestURIExpires(t *testing.T) {
	t.Parallel()
	clock := newClock()
	srv := start(t, authserver.Options{PAR: true, RequestURITTL: 30 * time.Second, Now: clock.Now})
	q := authParams(oauth2.GenerateVerifier())
	a := push(t, srv, confidential, q)
	if a.Raw["expires_in"] != float64(30) {
		t.Fatalf("answer %v", a.Raw)
	}
	late := requestURI(t, a)
	inTime := requestURI(t, push(t, srv, confidential, q))
	clock.Advance(29 * time.Second)
	redirected(t, srv, pushedQuery(authserver.DefaultClientID, inTime))
	clock.Advance(time.Second)
	refusedPage(t, srv, pushedQuery(authserver.DefaultClientID, late))
}

// With RequirePAR the metadata says so, and an authorization request in a
// query is refused: back to the client with invalid_request when it names a
// client and redirect URI, else with a page.
func TestPARRequired(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{RequirePAR: true})
	md := metadataOf(t, srv)
	if md["pushed_authorization_request_endpoint"] != srv.PARURL() || md["require_pushed_authorization_requests"] != true {
		t.Fatalf("metadata %v", md)
	}
	q := authParams(oauth2.GenerateVerifier())
	got := redirected(t, srv, q)
	if got.Get("error") != "invalid_request" || got.Get("code") != "" || got.Get("state") != "state-123" {
		t.Fatalf("redirect %v", got)
	}
	bad := authParams("")
	bad.Set("client_id", "unknown")
	refusedPage(t, srv, bad)
	redirected(t, srv, pushedQuery(authserver.DefaultClientID, requestURI(t, push(t, srv, confidential, q))))
	if st := srv.Stats(); st.RequestURIsRefused != 2 || st.RequestURIsRedeemed != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// Without PAR the server has no PAR endpoint and names none; with it, the
// endpoint is named and not required.
func TestPARMetadata(t *testing.T) {
	t.Parallel()
	off := start(t, authserver.Options{})
	md := metadataOf(t, off)
	if _, ok := md["pushed_authorization_request_endpoint"]; ok {
		t.Fatalf("metadata %v", md)
	}
	resp, err := http.PostForm(off.PARURL(), authParams(""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("POST /par without PAR: %d", resp.StatusCode)
	}
	on := start(t, authserver.Options{PAR: true})
	md = metadataOf(t, on)
	if md["pushed_authorization_request_endpoint"] != on.PARURL() || md["require_pushed_authorization_requests"] != nil {
		t.Fatalf("metadata %v", md)
	}
	redirected(t, on, authParams("")) // a request in a query is still served
}

func metadataOf(t *testing.T, srv *authserver.Server) map[string]any {
	t.Helper()
	resp, err := http.Get(srv.URL() + authserver.PathMetadata)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	return md
}

// On a server that does DPoP, a proof on the push binds the code to its key
// (RFC 9449 §10.1): the exchange must prove that key, and gets a bound token.
// A dpop_jkt that names another key than the proof's is refused.
func TestPARDPoPBindsTheCode(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{PAR: true})
	parProof := func(p prover) string { return p.proofAt(t, 0, http.MethodPost, p.srv.PARURL(), "", "") }
	verifier := oauth2.GenerateVerifier()
	q := authParams(verifier)
	code := getCode(t, p.srv, pushedQuery(authserver.DefaultClientID, requestURI(t, push(t, p.srv, confidential, q, parProof(p)))))
	wantError(t, exchange(t, p.srv, confidential, code, verifier, p.other(t).tokenProof(t, "")), http.StatusBadRequest, "invalid_grant")

	code = getCode(t, p.srv, pushedQuery(authserver.DefaultClientID, requestURI(t, push(t, p.srv, confidential, q, parProof(p)))))
	wantError(t, exchange(t, p.srv, confidential, code, verifier), http.StatusBadRequest, "invalid_grant")
	code = getCode(t, p.srv, pushedQuery(authserver.DefaultClientID, requestURI(t, push(t, p.srv, confidential, q, parProof(p)))))
	a := exchange(t, p.srv, confidential, code, verifier, p.tokenProof(t, ""))
	wantStatus(t, a, http.StatusOK)
	if a.TokenType != "DPoP" {
		t.Fatalf("token_type %q", a.TokenType)
	}

	mismatched := authParams(verifier)
	mismatched.Set("dpop_jkt", p.other(t).key.Thumbprint())
	wantError(t, push(t, p.srv, confidential, mismatched, parProof(p)), http.StatusBadRequest, "invalid_request")
	matched := authParams(verifier)
	matched.Set("dpop_jkt", p.key.Thumbprint())
	requestURI(t, push(t, p.srv, confidential, matched, parProof(p)))
	wantError(t, push(t, p.srv, confidential, q, "not-a-proof"), http.StatusBadRequest, "invalid_dpop_proof")
	if st := p.srv.Stats(); st.DPoPPARRequests != 6 || st.PARRequests != 6 {
		t.Fatalf("stats %+v", st)
	}
}

// With DPoPNonces the PAR endpoint demands the nonce as the token endpoint
// does: a proof without it is answered use_dpop_nonce with the nonce.
func TestPARDPoPNonce(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{PAR: true, DPoPNonces: true})
	q := authParams(oauth2.GenerateVerifier())
	a := push(t, p.srv, confidential, q, p.proofAt(t, 0, http.MethodPost, p.srv.PARURL(), "", ""))
	wantError(t, a, http.StatusBadRequest, "use_dpop_nonce")
	nonce := a.Header.Get("DPoP-Nonce")
	if nonce != p.srv.DPoPNonce() {
		t.Fatalf("DPoP-Nonce %q", nonce)
	}
	requestURI(t, push(t, p.srv, confidential, q, p.proofAt(t, 0, http.MethodPost, p.srv.PARURL(), "", nonce)))
}

// FailNextPAR scripts the PAR endpoint's answers as FailNext does the token
// endpoint's: each failure is used once, in order, and a delay ends when the
// client gives up.
func TestPARScriptedFailures(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{PAR: true})
	q := authParams(oauth2.GenerateVerifier())
	srv.FailNextPAR(authserver.Failure{Status: http.StatusServiceUnavailable},
		authserver.Failure{Error: "invalid_request", Description: "scripted"},
		authserver.Failure{Status: http.StatusBadGateway, Body: "<html>Bad Gateway</html>"},
		authserver.Failure{Delay: time.Hour})
	wantError(t, push(t, srv, confidential, q), http.StatusServiceUnavailable, "temporarily_unavailable")
	wantError(t, push(t, srv, confidential, q), http.StatusBadRequest, "invalid_request")
	req := newPost(t, srv.PARURL(), confidential, q)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || string(body) != "<html>Bad Gateway</html>" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	_, err = http.DefaultClient.Do(newPost(t, srv.PARURL(), confidential, q).WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("slow push: %v, want the client's deadline", err)
	}
	requestURI(t, push(t, srv, confidential, q))
	srv.FailNext(authserver.Failure{Status: http.StatusServiceUnavailable}) // a token failure is not the PAR endpoint's
	requestURI(t, push(t, srv, confidential, q))
	if st := srv.Stats(); st.PARRequests != 6 {
		t.Fatalf("stats %+v", st)
	}
}
