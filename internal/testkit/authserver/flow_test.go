package authserver_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

func TestAuthorizationCodeFlow(t *testing.T) {
	t.Parallel()
	verifier := oauth2.GenerateVerifier()
	tests := []struct {
		name     string
		auth     clientAuth
		query    func(url.Values)
		verifier string
	}{
		{"S256, basic auth", confidential, func(url.Values) {}, verifier},
		{"plain, post auth", clientAuth{id: authserver.DefaultClientID, secret: authserver.DefaultClientSecret},
			func(q url.Values) { q.Set("code_challenge", verifier); q.Set("code_challenge_method", "plain") }, verifier},
		{"plain by default", confidential,
			func(q url.Values) { q.Set("code_challenge", verifier); q.Del("code_challenge_method") }, verifier},
		{"no PKCE, confidential client", confidential,
			func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }, ""},
		{"public client", public,
			func(q url.Values) { q.Set("client_id", authserver.DefaultPublicClientID) }, verifier},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{IssParameter: true})
			q := authParams(verifier)
			tt.query(q)
			got := redirected(t, srv, q)
			if got.Get("state") != "state-123" || got.Get("iss") != srv.URL() {
				t.Fatalf("redirect query %v: want state and iss %s", got, srv.URL())
			}
			a := exchange(t, srv, tt.auth, got.Get("code"), tt.verifier)
			wantStatus(t, a, http.StatusOK)
			if a.AccessToken == "" || a.RefreshToken == "" || a.TokenType != "Bearer" || a.Scope != "read write" {
				t.Fatalf("token answer %v", a.Raw)
			}
			if a.ExpiresIn != int64(time.Hour/time.Second) {
				t.Fatalf("expires_in = %d, want 3600", a.ExpiresIn)
			}
			if a.Header.Get("Cache-Control") != "no-store" {
				t.Fatalf("Cache-Control = %q", a.Header.Get("Cache-Control"))
			}
			resp, me := callAPI(t, srv, a.AccessToken)
			if resp.StatusCode != http.StatusOK || me.User != authserver.DefaultUser || len(me.Repos) == 0 {
				t.Fatalf("API: %d %+v", resp.StatusCode, me)
			}
			if st := srv.Stats(); st.CodesExchanged != 1 || st.CodeRequests != 1 || st.Authorizations != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}
