package authserver_test

import (
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

// Authorization details of the tests (RFC 9396 §2), compact.
const (
	paymentDetails = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"}}]`
	accountDetails = `[{"type":"account_information","actions":["list_accounts"]}]`
)

// detailsOf is the answer's authorization_details in canonical form; ""
// when absent.
func detailsOf(t testing.TB, a answer) string {
	t.Helper()
	v, ok := a.Raw["authorization_details"]
	if !ok {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canonical is the JSON text s in the form detailsOf gives: keys sorted.
func canonical(t testing.TB, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// The details an authorization request asks for, in its query or pushed,
// are granted with its code: the exchange's answer names them, and so does
// every refresh of the grant.
func TestAuthorizationDetailsGranted(t *testing.T) {
	t.Parallel()
	for name, pushed := range map[string]bool{"in the query": false, "pushed": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{PAR: true, RotateRefreshTokens: true})
			verifier := oauth2.GenerateVerifier()
			q := authParams(verifier)
			q.Set("authorization_details", paymentDetails)
			if pushed {
				q = pushedQuery(authserver.DefaultClientID, requestURI(t, push(t, srv, confidential, q)))
			}
			tok := exchange(t, srv, confidential, getCode(t, srv, q), verifier)
			wantStatus(t, tok, http.StatusOK)
			if got := detailsOf(t, tok); got != canonical(t, paymentDetails) {
				t.Fatalf("the exchange answered details %s, want %s", got, paymentDetails)
			}
			again := refresh(t, srv, confidential, tok.RefreshToken)
			wantStatus(t, again, http.StatusOK)
			if got := detailsOf(t, again); got != canonical(t, paymentDetails) {
				t.Fatalf("the refresh answered details %s, want %s", got, paymentDetails)
			}
		})
	}
}

// A request that asks for nothing is answered no details.
func TestAuthorizationDetailsNoneAsked(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	tok := signIn(t, srv)
	if _, ok := tok.Raw["authorization_details"]; ok {
		t.Fatalf("answer %v names authorization_details", tok.Raw)
	}
}

// Details that are not an array of objects, each with a string type, are
// refused with invalid_authorization_details (RFC 9396 §5): sent back to the
// client from the authorization endpoint, answered as JSON from /par.
func TestAuthorizationDetailsRefused(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{PAR: true})
	for _, bad := range []string{`{`, `{"type":"a"}`, `"a"`, `[1]`, `[null]`, `[{}]`, `[{"type":""}]`, `[{"type":1}]`, `[{"Type":"a"}]`} {
		q := authParams(oauth2.GenerateVerifier())
		q.Set("authorization_details", bad)
		if got := redirected(t, srv, q); got.Get("error") != "invalid_authorization_details" || got.Get("code") != "" {
			t.Errorf("authorize with %s: redirect %v", bad, got)
		}
		wantError(t, push(t, srv, confidential, q), http.StatusBadRequest, "invalid_authorization_details")
	}
}

// Options.AuthorizationDetails decides what is granted and answered: here
// less than was asked at the exchange; nothing named by the first refresh,
// which leaves the grant's as they were; other details named by the second,
// which the grant holds from then on.
func TestAuthorizationDetailsOption(t *testing.T) {
	t.Parallel()
	var refreshes atomic.Int32
	srv := start(t, authserver.Options{AuthorizationDetails: func(grant string, held []byte) []byte {
		if grant == authserver.GrantAuthorizationCode {
			return []byte(accountDetails) // granted: one of the two asked
		}
		switch refreshes.Add(1) {
		case 1:
			return nil
		case 2:
			return []byte(paymentDetails)
		}
		return held
	}})
	verifier := oauth2.GenerateVerifier()
	q := authParams(verifier)
	q.Set("authorization_details", `[{"type":"account_information","actions":["list_accounts"]},{"type":"payment_initiation"}]`)
	tok := exchange(t, srv, confidential, getCode(t, srv, q), verifier)
	wantStatus(t, tok, http.StatusOK)
	if got := detailsOf(t, tok); got != canonical(t, accountDetails) {
		t.Fatalf("the exchange answered %s, want what was granted, %s", got, accountDetails)
	}
	for i, want := range []string{"", canonical(t, paymentDetails), canonical(t, paymentDetails)} {
		a := refresh(t, srv, confidential, tok.RefreshToken)
		wantStatus(t, a, http.StatusOK)
		if got := detailsOf(t, a); got != want {
			t.Fatalf("refresh %d answered %q, want %q", i+1, got, want)
		}
	}
}
