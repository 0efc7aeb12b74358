package authserver_test

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

// hardSecret needs form-encoding in a Basic header (RFC 6749 §2.3.1).
const hardSecret = `p@ss:w/rd+ %&=`

func hardClientOptions() authserver.Options {
	return authserver.Options{Clients: []authserver.Client{
		{ID: "hard:client", Secret: hardSecret, RedirectURIs: []string{"http://127.0.0.1/api/v1/oauth/callback"}, AllowLoopback: true},
		{ID: "app", Public: true, RedirectURIs: []string{"http://127.0.0.1/api/v1/oauth/callback"}, AllowLoopback: true},
	}}
}

func TestClientAuthentication(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		auth   clientAuth
		status int
		code   string
	}{
		{"basic, form-encoded", clientAuth{id: "hard:client", secret: hardSecret, basic: true}, http.StatusOK, ""},
		{"post", clientAuth{id: "hard:client", secret: hardSecret}, http.StatusOK, ""},
		{"basic, not encoded", clientAuth{id: "hard:client", secret: hardSecret, rawBasic: true}, http.StatusUnauthorized, "invalid_client"},
		{"basic, wrong secret", clientAuth{id: "hard:client", secret: "p@ss", basic: true}, http.StatusUnauthorized, "invalid_client"},
		{"post, wrong secret", clientAuth{id: "hard:client", secret: "nope"}, http.StatusUnauthorized, "invalid_client"},
		{"post, no secret", clientAuth{id: "hard:client"}, http.StatusUnauthorized, "invalid_client"},
		{"unknown client", clientAuth{id: "nobody", secret: "x", basic: true}, http.StatusUnauthorized, "invalid_client"},
		{"no client", clientAuth{}, http.StatusUnauthorized, "invalid_client"},
		{"bearer header", clientAuth{header: "Bearer something"}, http.StatusUnauthorized, "invalid_client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, hardClientOptions())
			verifier := oauth2.GenerateVerifier()
			q := authParams(verifier)
			q.Set("client_id", "hard:client")
			code := getCode(t, srv, q)
			form := url.Values{"grant_type": {"authorization_code"}, "code": {code},
				"redirect_uri": {callback}, "code_verifier": {verifier}}
			a := post(t, srv.TokenURL(), tt.auth, form)
			if a.Status != tt.status || a.Error != tt.code {
				t.Fatalf("got %d %v, want %d %q", a.Status, a.Raw, tt.status, tt.code)
			}
			if tt.status == http.StatusUnauthorized && a.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
}

func TestClientAuthenticationConflicts(t *testing.T) {
	t.Parallel()
	srv := start(t, hardClientOptions())
	tests := []struct {
		name   string
		auth   clientAuth
		form   url.Values
		status int
		code   string
	}{
		{"basic and post at once", clientAuth{id: "hard:client", secret: hardSecret, basic: true},
			url.Values{"client_secret": {hardSecret}}, http.StatusBadRequest, "invalid_request"},
		{"basic and another client_id", clientAuth{id: "hard:client", secret: hardSecret, basic: true},
			url.Values{"client_id": {"app"}}, http.StatusBadRequest, "invalid_request"},
		{"public client with a secret", clientAuth{id: "app", secret: "invented"},
			url.Values{}, http.StatusUnauthorized, "invalid_client"},
		{"public client, empty Basic secret", clientAuth{id: "app", basic: true},
			url.Values{}, http.StatusBadRequest, "invalid_grant"},
		{"public client, client_id only", clientAuth{id: "app"},
			url.Values{}, http.StatusBadRequest, "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.form.Set("grant_type", "authorization_code")
			tt.form.Set("code", "unknown") // authentication passes or fails before the code is looked at
			wantError(t, post(t, srv.TokenURL(), tt.auth, tt.form), tt.status, tt.code)
		})
	}
}

// TestOAuth2Interop runs the flow with golang.org/x/oauth2, the client the library
// builds on, in both of its authentication styles and with a secret that needs escaping.
func TestOAuth2Interop(t *testing.T) {
	t.Parallel()
	for _, style := range []oauth2.AuthStyle{oauth2.AuthStyleInHeader, oauth2.AuthStyleInParams, oauth2.AuthStyleAutoDetect} {
		t.Run(map[oauth2.AuthStyle]string{0: "auto", 1: "params", 2: "header"}[style], func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{RotateRefreshTokens: true})
			cfg := &oauth2.Config{
				ClientID: authserver.DefaultClientID, ClientSecret: authserver.DefaultClientSecret,
				Endpoint:    oauth2.Endpoint{AuthURL: srv.AuthURL(), TokenURL: srv.TokenURL(), AuthStyle: style},
				RedirectURL: callback, Scopes: []string{"read"},
			}
			runOAuth2Flow(t, srv, cfg)
		})
	}
	t.Run("hard secret", func(t *testing.T) {
		t.Parallel()
		srv := start(t, hardClientOptions())
		cfg := &oauth2.Config{
			ClientID: "hard:client", ClientSecret: hardSecret,
			Endpoint:    oauth2.Endpoint{AuthURL: srv.AuthURL(), TokenURL: srv.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader},
			RedirectURL: callback, Scopes: []string{"read"},
		}
		runOAuth2Flow(t, srv, cfg)
	})
	t.Run("invalid_grant reaches RetrieveError", func(t *testing.T) {
		t.Parallel()
		srv := start(t, authserver.Options{})
		cfg := &oauth2.Config{ClientID: authserver.DefaultClientID, ClientSecret: authserver.DefaultClientSecret,
			Endpoint: oauth2.Endpoint{AuthURL: srv.AuthURL(), TokenURL: srv.TokenURL(), AuthStyle: oauth2.AuthStyleInHeader}}
		_, err := cfg.Exchange(context.Background(), "bogus")
		var re *oauth2.RetrieveError
		if !errors.As(err, &re) || re.ErrorCode != "invalid_grant" || re.Response.StatusCode != http.StatusBadRequest {
			t.Fatalf("err = %v, want RetrieveError invalid_grant", err)
		}
	})
}

func runOAuth2Flow(t *testing.T, srv *authserver.Server, cfg *oauth2.Config) {
	t.Helper()
	ctx := context.Background()
	verifier := oauth2.GenerateVerifier()
	authURL, _ := url.Parse(cfg.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
	code := getCode(t, srv, authURL.Query())
	tok, err := cfg.Exchange(ctx, code, oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatalf("Exchange: %v", err)
	}
	resp, err := cfg.Client(ctx, tok).Get(srv.APIURL())
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("API: %v %v", resp, err)
	}
	resp.Body.Close()
	tok.Expiry = tok.Expiry.Add(-2 * 3600e9) // force a refresh
	fresh, err := cfg.TokenSource(ctx, tok).Token()
	if err != nil || fresh.AccessToken == tok.AccessToken {
		t.Fatalf("refresh: %v", err)
	}
}
