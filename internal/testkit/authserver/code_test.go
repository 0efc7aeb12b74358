package authserver_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"golang.org/x/oauth2"
)

func TestCodeExchangeRefused(t *testing.T) {
	t.Parallel()
	verifier := oauth2.GenerateVerifier()
	tests := []struct {
		name   string
		query  func(url.Values)                           // changes the authorization request
		form   func(url.Values)                           // changes the token request
		before func(*authserver.Server, *fakeclock.Clock) // runs between the two
		auth   clientAuth
	}{
		{name: "wrong verifier", form: func(f url.Values) { f.Set("code_verifier", oauth2.GenerateVerifier()) }},
		{name: "missing verifier", form: func(f url.Values) { f.Del("code_verifier") }},
		{name: "malformed verifier", form: func(f url.Values) { f.Set("code_verifier", "short") }},
		{name: "verifier without challenge",
			query: func(q url.Values) { q.Del("code_challenge"); q.Del("code_challenge_method") }},
		{name: "redirect mismatch",
			form: func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:8765/callback") }},
		{name: "redirect on another port",
			form: func(f url.Values) { f.Set("redirect_uri", "http://127.0.0.1:9999/api/v1/oauth/callback") }},
		{name: "redirect missing", form: func(f url.Values) { f.Del("redirect_uri") }},
		{name: "unknown code", form: func(f url.Values) { f.Set("code", "nope") }},
		{name: "another client's code", auth: clientAuth{id: authserver.DefaultPublicClientID}},
		{name: "expired code", before: func(_ *authserver.Server, c *fakeclock.Clock) { c.Advance(authserver.DefaultCodeTTL) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			srv := start(t, authserver.Options{Now: clock.Now})
			q := authParams(verifier)
			if tt.query != nil {
				tt.query(q)
			}
			code := getCode(t, srv, q)
			if tt.before != nil {
				tt.before(srv, clock)
			}
			form := url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"redirect_uri": {callback}, "code_verifier": {verifier}}
			if tt.form != nil {
				tt.form(form)
			}
			auth := tt.auth
			if auth.id == "" {
				auth = confidential
			}
			wantError(t, post(t, srv.TokenURL(), auth, form), http.StatusBadRequest, "invalid_grant")
			if n := srv.Stats().CodesExchanged; n != 0 {
				t.Fatalf("CodesExchanged = %d, want 0", n)
			}
		})
	}
}

func TestCodeLifetime(t *testing.T) {
	t.Parallel()
	clock := newClock()
	srv := start(t, authserver.Options{Now: clock.Now, CodeTTL: 5 * time.Second})
	verifier := oauth2.GenerateVerifier()
	code := getCode(t, srv, authParams(verifier))
	clock.Advance(4 * time.Second)
	wantStatus(t, exchange(t, srv, confidential, code, verifier), http.StatusOK)

	code = getCode(t, srv, authParams(verifier))
	clock.Advance(5 * time.Second)
	wantError(t, exchange(t, srv, confidential, code, verifier), http.StatusBadRequest, "invalid_grant")
}

func TestCodeReplayRevokesTokens(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	verifier := oauth2.GenerateVerifier()
	code := getCode(t, srv, authParams(verifier))
	first := exchange(t, srv, confidential, code, verifier)
	wantStatus(t, first, http.StatusOK)
	if resp, _ := callAPI(t, srv, first.AccessToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("API before replay: %d", resp.StatusCode)
	}

	wantError(t, exchange(t, srv, confidential, code, verifier), http.StatusBadRequest, "invalid_grant")

	if resp, _ := callAPI(t, srv, first.AccessToken); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API after replay: %d, want 401", resp.StatusCode)
	}
	wantError(t, refresh(t, srv, confidential, first.RefreshToken), http.StatusBadRequest, "invalid_grant")
	if st := srv.Stats(); st.CodesExchanged != 1 || st.CodeRequests != 2 || st.CodeReplays != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestTokenRequestRefused(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	tests := []struct {
		name   string
		form   url.Values
		status int
		code   string
	}{
		{"no grant type", url.Values{}, http.StatusBadRequest, "invalid_request"},
		{"unknown grant type", url.Values{"grant_type": {"password"}}, http.StatusBadRequest, "unsupported_grant_type"},
		{"repeated parameter", url.Values{"grant_type": {"authorization_code", "authorization_code"}}, http.StatusBadRequest, "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			wantError(t, post(t, srv.TokenURL(), confidential, tt.form), tt.status, tt.code)
		})
	}
	t.Run("JSON body", func(t *testing.T) {
		t.Parallel()
		req := newPost(t, srv.TokenURL(), confidential, url.Values{})
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		wantError(t, decodeAnswer(t, resp), http.StatusBadRequest, "invalid_request")
	})
	t.Run("oversized body", func(t *testing.T) {
		t.Parallel()
		big := url.Values{"grant_type": {"authorization_code"}, "code": {string(make([]byte, 100<<10))}}
		wantError(t, post(t, srv.TokenURL(), confidential, big), http.StatusBadRequest, "invalid_request")
	})
	t.Run("GET", func(t *testing.T) {
		t.Parallel()
		resp, err := http.Get(srv.TokenURL())
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("GET /token: %d, want 405", resp.StatusCode)
		}
	})
}
