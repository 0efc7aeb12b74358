package authserver_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
)

func TestRefreshWithRotation(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{RotateRefreshTokens: true})
	first := signIn(t, srv)

	second := refresh(t, srv, confidential, first.RefreshToken)
	wantStatus(t, second, http.StatusOK)
	if second.RefreshToken == "" || second.RefreshToken == first.RefreshToken || second.AccessToken == first.AccessToken {
		t.Fatalf("rotation gave %v", second.Raw)
	}
	third := refresh(t, srv, confidential, second.RefreshToken)
	wantStatus(t, third, http.StatusOK)

	// Reusing a retired refresh token is refused and revokes the whole grant.
	wantError(t, refresh(t, srv, confidential, first.RefreshToken), http.StatusBadRequest, "invalid_grant")
	wantError(t, refresh(t, srv, confidential, third.RefreshToken), http.StatusBadRequest, "invalid_grant")
	if resp, _ := callAPI(t, srv, third.AccessToken); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("API after reuse: %d, want 401", resp.StatusCode)
	}
	if st := srv.Stats(); st.Refreshes != 2 || st.RefreshRequests != 4 || st.RefreshReuses != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestRefreshWithoutRotation(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	first := signIn(t, srv)
	for range 3 {
		a := refresh(t, srv, confidential, first.RefreshToken)
		wantStatus(t, a, http.StatusOK)
		if _, ok := a.Raw["refresh_token"]; ok {
			t.Fatalf("refresh without rotation answered a refresh_token: %v", a.Raw)
		}
		if a.AccessToken == first.AccessToken || a.Scope != "read write" {
			t.Fatalf("refresh answer %v", a.Raw)
		}
	}
	// The first access token is still good until it expires.
	if resp, _ := callAPI(t, srv, first.AccessToken); resp.StatusCode != http.StatusOK {
		t.Fatalf("first access token: %d", resp.StatusCode)
	}
}

func TestRefreshRefused(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   authserver.Options
		act    func(*testing.T, *authserver.Server, *fakeclock.Clock, answer) answer
		status int
		code   string
	}{
		{"expired", authserver.Options{RefreshTokenTTL: time.Hour},
			func(t *testing.T, s *authserver.Server, c *fakeclock.Clock, a answer) answer {
				c.Advance(time.Hour)
				return refresh(t, s, confidential, a.RefreshToken)
			}, http.StatusBadRequest, "invalid_grant"},
		{"unknown", authserver.Options{},
			func(t *testing.T, s *authserver.Server, _ *fakeclock.Clock, _ answer) answer {
				return refresh(t, s, confidential, "nope")
			}, http.StatusBadRequest, "invalid_grant"},
		{"another client's", authserver.Options{},
			func(t *testing.T, s *authserver.Server, _ *fakeclock.Clock, a answer) answer {
				return refresh(t, s, public, a.RefreshToken)
			}, http.StatusBadRequest, "invalid_grant"},
		{"wider scope", authserver.Options{},
			func(t *testing.T, s *authserver.Server, _ *fakeclock.Clock, a answer) answer {
				return post(t, s.TokenURL(), confidential, url.Values{"grant_type": {"refresh_token"},
					"refresh_token": {a.RefreshToken}, "scope": {"read admin"}})
			}, http.StatusBadRequest, "invalid_scope"},
		{"narrower scope", authserver.Options{},
			func(t *testing.T, s *authserver.Server, _ *fakeclock.Clock, a answer) answer {
				return post(t, s.TokenURL(), confidential, url.Values{"grant_type": {"refresh_token"},
					"refresh_token": {a.RefreshToken}, "scope": {"read"}})
			}, http.StatusOK, ""},
		{"revoked", authserver.Options{},
			func(t *testing.T, s *authserver.Server, _ *fakeclock.Clock, a answer) answer {
				wantStatus(t, post(t, s.RevokeURL(), confidential, url.Values{"token": {a.RefreshToken}}), http.StatusOK)
				return refresh(t, s, confidential, a.RefreshToken)
			}, http.StatusBadRequest, "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clock := newClock()
			tt.opts.Now = clock.Now
			srv := start(t, tt.opts)
			a := tt.act(t, srv, clock, signIn(t, srv))
			if a.Status != tt.status || a.Error != tt.code {
				t.Fatalf("got %d %v, want %d %q", a.Status, a.Raw, tt.status, tt.code)
			}
		})
	}
}

func TestLifetimes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		opts        authserver.Options
		expiresIn   any // the JSON value, nil when omitted
		withRefresh bool
	}{
		{"defaults", authserver.Options{}, float64(3600), true},
		{"short", authserver.Options{AccessTokenTTL: 1500 * time.Millisecond}, float64(2), true},
		{"never expires", authserver.Options{AccessTokenTTL: -1}, nil, true},
		{"no refresh token", authserver.Options{NoRefreshToken: true}, float64(3600), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			a := signIn(t, start(t, tt.opts))
			if a.Raw["expires_in"] != tt.expiresIn || (a.RefreshToken != "") != tt.withRefresh {
				t.Fatalf("answer %v", a.Raw)
			}
		})
	}
}
