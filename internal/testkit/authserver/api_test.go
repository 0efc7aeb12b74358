package authserver_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
)

func TestAPI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		header    func(a answer) string
		before    func(*testing.T, *authserver.Server, *fakeclock.Clock, answer)
		status    int
		challenge string // a fragment of WWW-Authenticate
	}{
		{name: "valid token", header: bearer, status: http.StatusOK},
		{name: "lower-case scheme", header: func(a answer) string { return "bearer " + a.AccessToken }, status: http.StatusOK},
		{name: "no header", header: func(answer) string { return "" },
			status: http.StatusUnauthorized, challenge: `Bearer realm="authserver"`},
		{name: "basic scheme", header: func(answer) string { return "Basic eDp5" },
			status: http.StatusUnauthorized, challenge: `Bearer realm="authserver"`},
		{name: "unknown token", header: func(answer) string { return "Bearer nope" },
			status: http.StatusUnauthorized, challenge: `error="invalid_token"`},
		{name: "refresh token", header: func(a answer) string { return "Bearer " + a.RefreshToken },
			status: http.StatusUnauthorized, challenge: `error="invalid_token"`},
		{name: "expired token", header: bearer, before: func(_ *testing.T, _ *authserver.Server, c *fakeclock.Clock, _ answer) {
			c.Advance(authserver.DefaultAccessTokenTTL)
		}, status: http.StatusUnauthorized, challenge: `error="invalid_token"`},
		{name: "revoked token", header: bearer, before: func(t *testing.T, s *authserver.Server, _ *fakeclock.Clock, a answer) {
			wantStatus(t, post(t, s.RevokeURL(), confidential, url.Values{"token": {a.AccessToken}}), http.StatusOK)
		}, status: http.StatusUnauthorized, challenge: `error="invalid_token"`},
		{name: "grant revoked by its refresh token", header: bearer, before: func(t *testing.T, s *authserver.Server, _ *fakeclock.Clock, a answer) {
			wantStatus(t, post(t, s.RevokeURL(), confidential, url.Values{"token": {a.RefreshToken}}), http.StatusOK)
		}, status: http.StatusUnauthorized, challenge: `error="invalid_token"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			srv := start(t, authserver.Options{Now: clock.Now})
			a := signIn(t, srv)
			clock.Advance(authserver.DefaultAccessTokenTTL - time.Second)
			if tt.before != nil {
				tt.before(t, srv, clock, a)
			}
			req := httptest.NewRequest(http.MethodGet, authserver.PathAPI, nil)
			if h := tt.header(a); h != "" {
				req.Header.Set("Authorization", h)
			}
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != tt.status || !strings.Contains(rec.Header().Get("WWW-Authenticate"), tt.challenge) {
				t.Fatalf("got %d %q, want %d with %q", rec.Code, rec.Header().Get("WWW-Authenticate"), tt.status, tt.challenge)
			}
			if tt.status == http.StatusOK {
				wantMe(t, rec.Body.Bytes())
			}
		})
	}
}

func bearer(a answer) string { return "Bearer " + a.AccessToken }

func wantMe(t *testing.T, body []byte) {
	t.Helper()
	var me authserver.Me
	if err := json.Unmarshal(body, &me); err != nil {
		t.Fatal(err)
	}
	if me.User != authserver.DefaultUser || me.Scope != "read write" || len(me.Repos) != 3 ||
		me.Repos[0].FullName != authserver.DefaultUser+"/hello-world" {
		t.Fatalf("API answer %+v", me)
	}
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	a := signIn(t, srv)
	tests := []struct {
		name   string
		auth   clientAuth
		form   url.Values
		status int
	}{
		{"another client's token is left alone", public, url.Values{"token": {a.AccessToken}}, http.StatusOK},
		{"unknown token", confidential, url.Values{"token": {"nope"}}, http.StatusOK},
		{"no token", confidential, url.Values{}, http.StatusBadRequest},
		{"bad client", clientAuth{id: authserver.DefaultClientID, secret: "wrong"}, url.Values{"token": {a.AccessToken}}, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wantStatus(t, post(t, srv.RevokeURL(), tt.auth, tt.form), tt.status)
		})
	}
	if resp, _ := callAPI(t, srv, a.AccessToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("API after refused revocations: %d", resp.StatusCode)
	}
	if n := srv.Stats().Revocations; n != 2 {
		t.Fatalf("Revocations = %d, want 2", n)
	}
}

func TestIntrospect(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	a := signIn(t, srv)
	tests := []struct {
		name   string
		token  string
		active bool
	}{
		{"access token", a.AccessToken, true},
		{"refresh token", a.RefreshToken, true},
		{"unknown", "nope", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := post(t, srv.IntrospectURL(), confidential, url.Values{"token": {tt.token}})
			wantStatus(t, got, http.StatusOK)
			if got.Raw["active"] != tt.active {
				t.Fatalf("introspection %v", got.Raw)
			}
			if tt.active && (got.Raw["client_id"] != authserver.DefaultClientID || got.Raw["sub"] != authserver.DefaultUser ||
				got.Raw["iss"] != srv.URL()) {
				t.Fatalf("introspection %v", got.Raw)
			}
			if !tt.active && len(got.Raw) != 1 {
				t.Fatalf("an inactive token must say nothing else: %v", got.Raw)
			}
		})
	}
	wantError(t, post(t, srv.IntrospectURL(), clientAuth{}, url.Values{"token": {a.AccessToken}}), http.StatusUnauthorized, "invalid_client")
}

func TestMetadata(t *testing.T) {
	t.Parallel()
	for _, iss := range []bool{false, true} {
		srv := start(t, authserver.Options{IssParameter: iss})
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
		want := map[string]any{
			"issuer":                 srv.URL(),
			"authorization_endpoint": srv.AuthURL(),
			"token_endpoint":         srv.TokenURL(),
			"revocation_endpoint":    srv.RevokeURL(),
			"introspection_endpoint": srv.IntrospectURL(),
		}
		for k, v := range want {
			if md[k] != v {
				t.Errorf("%s = %v, want %v", k, md[k], v)
			}
		}
		if methods, _ := json.Marshal(md["code_challenge_methods_supported"]); string(methods) != `["S256","plain"]` {
			t.Errorf("code_challenge_methods_supported = %s", methods)
		}
		if _, has := md["authorization_response_iss_parameter_supported"]; has != iss {
			t.Errorf("IssParameter %v: metadata %v", iss, md)
		}
	}
}

// TestIssuerFromRequest covers a server mounted without Options.Issuer: it names
// itself after the host the request reached.
func TestIssuerFromRequest(t *testing.T) {
	t.Parallel()
	srv := authserver.New(authserver.Options{IssParameter: true})
	defer srv.Close()
	rec := httptest.NewRecorder()
	srv.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://demo.test"+authserver.PathMetadata, nil))
	var md map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &md); err != nil {
		t.Fatal(err)
	}
	if md["issuer"] != "http://demo.test" || md["token_endpoint"] != "http://demo.test/token" {
		t.Fatalf("metadata %v", md)
	}
}

func TestNewRejectsBadClients(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		clients []authserver.Client
	}{
		{"no ID", []authserver.Client{{Secret: "s"}}},
		{"public with secret", []authserver.Client{{ID: "a", Secret: "s", Public: true}}},
		{"confidential without secret", []authserver.Client{{ID: "a"}}},
		{"duplicate", []authserver.Client{{ID: "a", Secret: "s"}, {ID: "a", Secret: "t"}}},
		{"relative redirect", []authserver.Client{{ID: "a", Secret: "s", RedirectURIs: []string{"/cb"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Fatal("New accepted a bad client")
				}
			}()
			authserver.New(authserver.Options{Clients: tt.clients})
		})
	}
}
