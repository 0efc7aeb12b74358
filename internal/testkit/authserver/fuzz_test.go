package authserver_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
)

// fuzzServer is a server whose clock never moves, so fuzzing stays deterministic.
func fuzzServer(f *testing.F) *authserver.Server {
	srv := authserver.New(authserver.Options{Issuer: "http://as.test", IssParameter: true, Now: newClock().Now})
	f.Cleanup(srv.Close)
	return srv
}

func FuzzAuthorize(f *testing.F) {
	f.Add("response_type=code&client_id=demo-client&redirect_uri=http%3A%2F%2F127.0.0.1%3A1%2Fcallback&state=s")
	f.Add("client_id=demo-public&redirect_uri=http://[::1]:0/callback&code_challenge=" + strings.Repeat("A", 43))
	f.Add("client_id=demo-client&redirect_uri=http://127.0.0.1:99999/callback&login_hint=deny")
	f.Add("client_id=%zz&&&;=")
	srv := fuzzServer(f)
	f.Fuzz(func(t *testing.T, query string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, "http://as.test/authorize", nil)
		req.URL.RawQuery = query
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusFound && rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for %q", rec.Code, query)
		}
		if rec.Code == http.StatusFound && !strings.HasPrefix(rec.Header().Get("Location"), "http") {
			t.Fatalf("redirect to %q", rec.Header().Get("Location"))
		}
	})
}

func FuzzToken(f *testing.F) {
	f.Add("grant_type=authorization_code&code=x&redirect_uri=y&code_verifier=z", "Basic ZGVtby1jbGllbnQ6ZGVtby1zZWNyZXQ=")
	f.Add("grant_type=refresh_token&refresh_token=x&client_id=demo-public", "")
	f.Add("grant_type=refresh_token&scope=a+b&client_id=demo-client&client_secret=demo-secret", "")
	f.Add("%%%", "Basic %%%")
	f.Add("client_id=a&client_id=b", "Bearer x")
	srv := fuzzServer(f)
	allowed := []int{http.StatusBadRequest, http.StatusUnauthorized}
	f.Fuzz(func(t *testing.T, body, authorization string) {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://as.test/token", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Authorization", authorization)
		srv.ServeHTTP(rec, req)
		if !slices.Contains(allowed, rec.Code) {
			t.Fatalf("status %d for %q %q: %s", rec.Code, body, authorization, rec.Body)
		}
	})
}

// FuzzTokenProof sends any DPoP header to the token endpoint of a DPoP server: the
// answer is a 400, never a failure of the server.
func FuzzTokenProof(f *testing.F) {
	clock := newClock()
	srv := authserver.New(authserver.Options{Issuer: "http://as.test", DPoP: true, Now: clock.Now})
	f.Cleanup(srv.Close)
	key, err := dpop.NewKey()
	if err != nil {
		f.Fatal(err)
	}
	for _, nonce := range []string{"", "n"} {
		proof, err := key.Proof(http.MethodPost, srv.TokenURL(), clock.Now(), "", nonce)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(proof)
	}
	f.Add("a.b.c")
	f.Add("..")
	f.Fuzz(func(t *testing.T, proof string) {
		rec := httptest.NewRecorder()
		body := strings.NewReader("grant_type=refresh_token&refresh_token=x&client_id=demo-public")
		req := httptest.NewRequest(http.MethodPost, "http://as.test/token", body)
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("DPoP", proof)
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusBadRequest {
			t.Fatalf("status %d for %q: %s", rec.Code, proof, rec.Body)
		}
	})
}
