package providers

import (
	"context"
	"net/url"
	"testing"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
)

// Rich Authorization Requests (RFC 9396): the details a sign-in asks for
// travel as the authorization request's authorization_details, and the
// details granted come back in the token answer.

const askedDetails = `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},"creditorName":"Merchant A & Co"}]`

// The authorization_details parameter the library adds to a sign-in reaches
// the server as it was given: in the URL, or in the push and never in the
// URL when the provider pushes.
func TestAuthorizationDetailsInTheRequest(t *testing.T) {
	t.Parallel()
	opt := oauth2.SetAuthURLParam("authorization_details", askedDetails)
	f := newFake(t, jsonReply(201, parAnswer))
	front := authQuery(t, f.generic(t, nil).BuildAuthURL([]string{"read"}, "state-1", opt))
	if front.Get("authorization_details") != askedDetails {
		t.Errorf("the URL's authorization_details %q, want %q", front.Get("authorization_details"), askedDetails)
	}
	pushedURL, err := f.parProvider(t, AuthStyleHeader, "secret-1", nil).PushAuthorization(context.Background(), []string{"read"}, "state-1", opt)
	if err != nil {
		t.Fatal(err)
	}
	if got := f.last(t).form.Get("authorization_details"); got != askedDetails {
		t.Errorf("the push's authorization_details %q, want %q", got, askedDetails)
	}
	u, err := url.Parse(pushedURL)
	if err != nil || u.Query().Has("authorization_details") {
		t.Errorf("the pushed request's URL %q carries authorization_details (%v)", pushedURL, err)
	}
}

// A token answer's authorization_details (RFC 9396 §7) are the TokenSet's,
// from an exchange or a refresh, whichever decode reads the answer; an
// answer that names none, or names something other than an array, has
// none. A nested token answer's are read from the token object, else from
// the whole answer.
func TestTokenAnswerAuthorizationDetails(t *testing.T) {
	t.Parallel()
	const granted = `[{"type":"account_information","actions":["list_accounts"]}]`
	for _, tt := range []struct {
		name, body, catalog, want string
	}{
		{name: "plain", body: `{"access_token":"a","token_type":"Bearer","authorization_details":` + granted + `}`, want: granted},
		{name: "flex", body: `{"access_token":"a","expires_in":"3600","authorization_details": ` + granted + ` }`, want: granted},
		{name: "absent", body: `{"access_token":"a"}`},
		{name: "null", body: `{"access_token":"a","authorization_details":null}`},
		{name: "a string", body: `{"access_token":"a","authorization_details":"[]"}`},
		{name: "an object", body: `{"access_token":"a","authorization_details":{"type":"x"}}`},
		{name: "nested", catalog: "withings", want: granted,
			body: `{"status":0,"body":{"access_token":"a","authorization_details":` + granted + `}}`},
		{name: "beside the nested token", catalog: "withings", want: granted,
			body: `{"status":0,"authorization_details":` + granted + `,"body":{"access_token":"a"}}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(200, tt.body))
			p := f.generic(t, nil)
			if tt.catalog != "" {
				p = f.catalog(t, tt.catalog, testCreds)
			}
			for name, call := range map[string]func() (*oauthflow.TokenSet, error){
				"exchange": func() (*oauthflow.TokenSet, error) { return p.ExchangeCode(context.Background(), "c") },
				"refresh":  func() (*oauthflow.TokenSet, error) { return p.RefreshToken(context.Background(), "r") },
			} {
				ts, err := call()
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if string(ts.AuthorizationDetails) != tt.want {
					t.Errorf("%s: details %q, want %q", name, ts.AuthorizationDetails, tt.want)
				}
			}
		})
	}
}
