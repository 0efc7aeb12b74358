package authserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

// getUserinfo asks the user-info endpoint with the Authorization header h ("" for
// none) and a DPoP header for each of proofs.
func getUserinfo(srv *authserver.Server, h string, proofs ...string) (*httptest.ResponseRecorder, authserver.Userinfo) {
	req := httptest.NewRequest(http.MethodGet, srv.UserinfoURL(), nil)
	if h != "" {
		req.Header.Set("Authorization", h)
	}
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, req)
	var info authserver.Userinfo
	_ = json.Unmarshal(rec.Body.Bytes(), &info)
	return rec, info
}

// The user-info endpoint names the user a token was issued for, the one a
// login_hint named included, and takes tokens as the demo API does.
func TestUserinfo(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	a := signIn(t, srv)
	rec, info := getUserinfo(srv, bearer(a))
	if rec.Code != http.StatusOK || info != (authserver.Userinfo{Sub: authserver.DefaultUser, PreferredUsername: authserver.DefaultUser}) {
		t.Fatalf("got %d %+v", rec.Code, info)
	}

	verifier := oauth2.GenerateVerifier()
	q := authParams(verifier)
	q.Set("login_hint", "alice")
	alice := exchange(t, srv, confidential, getCode(t, srv, q), verifier)
	wantStatus(t, alice, http.StatusOK)
	if _, info := getUserinfo(srv, bearer(alice)); info.Sub != "alice" {
		t.Fatalf("a login_hint's user: %+v", info)
	}

	rec, _ = getUserinfo(srv, "")
	wantChallenge(t, rec, `Bearer realm="authserver"`)
	wantStatus(t, post(t, srv.RevokeURL(), confidential, url.Values{"token": {a.AccessToken}}), http.StatusOK)
	rec, _ = getUserinfo(srv, bearer(a))
	wantChallenge(t, rec, `error="invalid_token"`)
	if n := srv.Stats().UserinfoCalls; n != 2 {
		t.Fatalf("UserinfoCalls = %d, want 2", n)
	}
}

// A DPoP-bound token reaches the user-info endpoint with a proof made for that
// endpoint; a proof made for the demo API does not do.
func TestUserinfoDPoP(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{})
	a := p.signIn(t, public, p.tokenProof(t, ""))
	rec, _ := getUserinfo(p.srv, "DPoP "+a.AccessToken, p.apiProof(t, a.AccessToken, ""))
	wantChallenge(t, rec, `error="invalid_dpop_proof"`)
	proof := p.proofAt(t, 0, http.MethodGet, p.srv.UserinfoURL(), a.AccessToken, "")
	if rec, info := getUserinfo(p.srv, "DPoP "+a.AccessToken, proof); rec.Code != http.StatusOK || info.Sub != authserver.DefaultUser {
		t.Fatalf("got %d %s", rec.Code, rec.Body)
	}
}

// Active tells the tokens the server honours from those it does not.
func TestActive(t *testing.T) {
	t.Parallel()
	clock := newClock()
	srv := start(t, authserver.Options{Now: clock.Now, RotateRefreshTokens: true})
	a := signIn(t, srv)
	if !srv.Active(a.AccessToken) || !srv.Active(a.RefreshToken) || srv.Active("nope") {
		t.Fatal("a new grant's tokens are active, an unknown one is not")
	}
	b := refresh(t, srv, confidential, a.RefreshToken)
	wantStatus(t, b, http.StatusOK)
	if srv.Active(a.RefreshToken) || !srv.Active(b.RefreshToken) {
		t.Fatal("rotation retires the old refresh token alone")
	}
	clock.Advance(authserver.DefaultAccessTokenTTL)
	if srv.Active(b.AccessToken) || !srv.Active(b.RefreshToken) {
		t.Fatal("an access token expires before its refresh token")
	}
	wantStatus(t, post(t, srv.RevokeURL(), confidential, url.Values{"token": {b.RefreshToken}}), http.StatusOK)
	if srv.Active(b.RefreshToken) {
		t.Fatal("a revoked refresh token is not active")
	}
}
