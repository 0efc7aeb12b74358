package authserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

// A test plays the provider with Start, signs in with golang.org/x/oauth2 and calls
// the protected demo API; FailNext scripts the next refresh to fail.
func Example() {
	srv := authserver.Start(authserver.Options{AccessTokenTTL: time.Minute, RotateRefreshTokens: true})
	defer srv.Close()

	cfg := &oauth2.Config{
		ClientID:     authserver.DefaultClientID,
		ClientSecret: authserver.DefaultClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: srv.AuthURL(), TokenURL: srv.TokenURL()},
		RedirectURL:  "http://127.0.0.1:8080/api/v1/oauth/callback",
		Scopes:       []string{"read"},
	}
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifier))

	// The server consents at once and redirects to the client with a code.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(authURL)
	if err != nil {
		panic(err)
	}
	resp.Body.Close()
	redirect, _ := url.Parse(resp.Header.Get("Location"))
	fmt.Println("state:", redirect.Query().Get("state"))

	ctx := context.Background()
	tok, err := cfg.Exchange(ctx, redirect.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		panic(err)
	}
	api, err := cfg.Client(ctx, tok).Get(srv.APIURL())
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(api.Body)
	api.Body.Close()
	fmt.Printf("GET /api/me: %d %s", api.StatusCode, body)

	srv.FailNext(authserver.Failure{Grant: authserver.GrantRefreshToken, Error: "invalid_grant"})
	tok.Expiry = time.Now().Add(-time.Second)
	_, err = cfg.TokenSource(ctx, tok).Token()
	fmt.Println("refresh fails:", err != nil)
	fmt.Printf("codes exchanged: %d, refresh requests: %d\n", srv.Stats().CodesExchanged, srv.Stats().RefreshRequests)
	// Output:
	// state: state-1
	// GET /api/me: 200 {"user":"demo-user","scope":"read","repos":[{"name":"hello-world","full_name":"demo-user/hello-world","private":false,"description":"My first repository"},{"name":"oauthflow-demo","full_name":"demo-user/oauthflow-demo","private":true,"description":"Signed in through the demo provider"},{"name":"dotfiles","full_name":"demo-user/dotfiles","private":false,"description":"Configuration files"}]}
	// refresh fails: true
	// codes exchanged: 1, refresh requests: 1
}

// In a program, the server is a handler like any other; mounted under a prefix it
// needs its Issuer.
func ExampleNew() {
	srv := authserver.New(authserver.Options{
		Issuer:      "http://127.0.0.1:8080/demo",
		ConsentPage: true,
	})
	mux := http.NewServeMux()
	mux.Handle("/demo/", http.StripPrefix("/demo", srv))
	fmt.Println(srv.AuthURL())
	fmt.Println(srv.TokenURL())
	// Output:
	// http://127.0.0.1:8080/demo/authorize
	// http://127.0.0.1:8080/demo/token
}

// With DPoPNonces the server demands its current nonce in every proof: after
// RotateDPoPNonce a client that still holds the old one is answered use_dpop_nonce
// and retries with the new one.
func ExampleServer_RotateDPoPNonce() {
	srv := authserver.Start(authserver.Options{DPoPNonces: true})
	defer srv.Close()
	key, err := dpop.NewKey()
	if err != nil {
		panic(err)
	}
	// refresh sends a refresh with an unknown token: a proof the server accepts
	// still ends in invalid_grant.
	refresh := func(nonce string) string {
		proof, err := key.Proof(http.MethodPost, srv.TokenURL(), time.Now(), "", nonce)
		if err != nil {
			panic(err)
		}
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {"unknown"}, "client_id": {authserver.DefaultPublicClientID}}
		req, _ := http.NewRequest(http.MethodPost, srv.TokenURL(), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("DPoP", proof)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		var answer struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&answer)
		return answer.Error
	}

	old := srv.DPoPNonce()
	fmt.Println("current nonce:", refresh(old))
	srv.RotateDPoPNonce()
	fmt.Println("old nonce:", refresh(old))
	fmt.Println("new nonce:", refresh(srv.DPoPNonce()))
	// Output:
	// current nonce: invalid_grant
	// old nonce: use_dpop_nonce
	// new nonce: invalid_grant
}

// A device sign-in (RFC 8628) with golang.org/x/oauth2: the client asks for a
// device code, the user allows its user code (here ApproveDevice stands in for
// the page at the verification URI), and the client's next poll gets the tokens.
func ExampleServer_ApproveDevice() {
	srv := authserver.Start(authserver.Options{DeviceInterval: time.Second})
	defer srv.Close()
	cfg := &oauth2.Config{
		ClientID: authserver.DefaultPublicClientID,
		Endpoint: oauth2.Endpoint{DeviceAuthURL: srv.DeviceAuthorizationURL(), TokenURL: srv.TokenURL()},
		Scopes:   []string{"read"},
	}
	ctx := context.Background()
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println("verification URI:", strings.TrimPrefix(da.VerificationURI, srv.URL()))
	fmt.Println("interval:", da.Interval)

	if err := srv.ApproveDevice(da.UserCode, "alice"); err != nil {
		panic(err)
	}
	tok, err := cfg.DeviceAccessToken(ctx, da) // polls once the interval has passed
	if err != nil {
		panic(err)
	}
	fmt.Println("scope:", tok.Extra("scope"))
	st := srv.Stats()
	fmt.Printf("device authorizations: %d, polls: %d, tokens: %d\n", st.DeviceAuthorizations, st.DevicePolls, st.DeviceTokens)
	// Output:
	// verification URI: /device
	// interval: 1
	// scope: read
	// device authorizations: 1, polls: 1, tokens: 1
}
