package providers

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
)

// ExchangeCodeVerifier, which a sign-in's completion calls, answers exactly as
// ExchangeCode with oauth2.VerifierOption does, for every kind of answer and
// every way a provider authenticates: the same request reaches the token
// endpoint, and the same tokens or the same error come back.
func TestExchangeCodeVerifierIsExchangeCode(t *testing.T) {
	t.Parallel()
	form := "application/x-www-form-urlencoded"
	replies := map[string]reply{
		"token":             jsonReply(200, `{"access_token":"at","token_type":"Bearer","refresh_token":"rt","expires_in":3600,"scope":"a b"}`),
		"expires_in string": jsonReply(200, `{"access_token":"at","expires_in":"7200","scope":["a","b"]}`),
		"form token":        reply{200, form, "access_token=at&token_type=bearer&scope=a%2Cb&expires_in=60"},
		"invalid_grant":     jsonReply(400, `{"error":"invalid_grant","error_description":"code used","error_uri":"https://p.example/e"}`),
		"200 with error":    jsonReply(200, `{"error":"bad_verification_code","error_description":"expired"}`),
		"form error":        reply{200, form, "error=bad_verification_code&error_description=x"},
		"error object":      jsonReply(400, `{"error":{"message":"nope"}}`),
		"no access_token":   jsonReply(200, `{"token_type":"bearer"}`),
		"mac token":         jsonReply(200, `{"access_token":"at","token_type":"mac"}`),
		"not JSON":          reply{200, "text/html", "<html>hi</html>"},
		"bad expires_in":    jsonReply(200, `{"access_token":"at","expires_in":"soon"}`),
		"bad gateway":       reply{502, "text/html", "<html>bad gateway</html>"},
		"rate limited":      jsonReply(429, `{}`),
		"slack ok false":    jsonReply(200, `{"ok":false,"error":"invalid_code"}`),
		"slack user token":  jsonReply(200, `{"ok":true,"access_token":"xoxb","authed_user":{"access_token":"xoxp","scope":"a,b"}}`),
		"hubspot error":     jsonReply(400, `{"status":"BAD_AUTH_CODE","message":"expired"}`),
		"token and error":   jsonReply(200, `{"access_token":"at","error":"consent_required"}`),
		"token on 400":      jsonReply(400, `{"access_token":"at"}`),
	}
	providers := map[string]func(f *fake) *OAuth2{
		"params": func(f *fake) *OAuth2 { return f.generic(t, nil) },
		"header": func(f *fake) *OAuth2 { return f.generic(t, func(c *Config) { c.AuthStyle = AuthStyleHeader }) },
		"auto":   func(f *fake) *OAuth2 { return f.generic(t, func(c *Config) { c.AuthStyle = AuthStyleAuto }) },
		"public": func(f *fake) *OAuth2 {
			return f.catalog(t, "github", Credentials{ClientID: "client-1", RedirectURL: "https://app.example/cb"})
		},
		"slack":   func(f *fake) *OAuth2 { return f.catalog(t, "slack", testCreds) },
		"hubspot": func(f *fake) *OAuth2 { return f.catalog(t, "hubspot", testCreds) },
		"notion":  func(f *fake) *OAuth2 { return f.catalog(t, "notion", testCreds) },
	}
	for pname, mk := range providers {
		for rname, r := range replies {
			for _, verifier := range []string{"", "ver-1"} {
				t.Run(pname+"/"+rname+"/"+verifier, func(t *testing.T) {
					t.Parallel()
					var opts []oauth2.AuthCodeOption
					if verifier != "" {
						opts = append(opts, oauth2.VerifierOption(verifier))
					}
					f1, f2 := newFake(t, r), newFake(t, r)
					want, wantErr := mk(f1).ExchangeCode(context.Background(), "code-1", opts...)
					got, gotErr := mk(f2).ExchangeCodeVerifier(context.Background(), "code-1", verifier)
					sameAnswer(t, got, gotErr, want, wantErr)
					if s1, s2 := f1.last(t), f2.last(t); s1.body != s2.body || s1.auth != s2.auth || s1.ctype != s2.ctype || s1.path != s2.path || f1.calls() != f2.calls() {
						t.Errorf("request %+v (%d calls), want %+v (%d calls)", s2, f2.calls(), s1, f1.calls())
					}
				})
			}
		}
	}
}

// Without a whole answer (nothing listening, the caller gone, no code, a body
// cut short) the two fail alike too.
func TestExchangeCodeVerifierWithoutAnswer(t *testing.T) {
	t.Parallel()
	closed := newFake(t, jsonReply(200, `{"access_token":"at"}`))
	p := closed.generic(t, nil)
	closed.srv.Close()
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	live := newFake(t, jsonReply(200, `{"access_token":"at"}`)).generic(t, nil)
	cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Length", "100")
		_, _ = io.WriteString(w, `{"access_token":"at"}`)
	}))
	t.Cleanup(cut.Close)
	short, err := NewOAuth2(Config{ID: "fake", AuthURL: cut.URL + "/authorize", TokenURL: cut.URL + "/token", AuthStyle: AuthStyleParams},
		testCreds, WithHTTPClient(cut.Client()))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		p    *OAuth2
		ctx  context.Context
		code string
	}{
		{"closed", p, context.Background(), "c"},
		{"canceled", live, canceled, "c"},
		{"no code", live, context.Background(), ""},
		{"cut short", short, context.Background(), "c"},
	} {
		want, wantErr := tc.p.ExchangeCode(tc.ctx, tc.code, oauth2.VerifierOption("v"))
		got, gotErr := tc.p.ExchangeCodeVerifier(tc.ctx, tc.code, "v")
		t.Run(tc.name, func(t *testing.T) { sameAnswer(t, got, gotErr, want, wantErr) })
	}
}

func sameAnswer(t *testing.T, got *oauthflow.TokenSet, gotErr error, want *oauthflow.TokenSet, wantErr error) {
	t.Helper()
	if (got == nil) != (want == nil) || got != nil && !reflect.DeepEqual(*got, *want) {
		t.Errorf("tokens %+v, want %+v", got, want)
	}
	if (gotErr == nil) != (wantErr == nil) || gotErr != nil && gotErr.Error() != wantErr.Error() {
		t.Fatalf("error %v, want %v", gotErr, wantErr)
	}
	if gotErr == nil {
		return
	}
	var gpe, wpe *oauthflow.ProviderError
	if errors.As(gotErr, &gpe) != errors.As(wantErr, &wpe) || gpe != nil &&
		(gpe.ProviderID != wpe.ProviderID || gpe.StatusCode != wpe.StatusCode || gpe.Code != wpe.Code || gpe.Description != wpe.Description || gpe.URI != wpe.URI) {
		t.Errorf("provider error %+v, want %+v", gpe, wpe)
	}
	var gre, wre *oauth2.RetrieveError
	if errors.As(gotErr, &gre) != errors.As(wantErr, &wre) || gre != nil &&
		(gre.ErrorCode != wre.ErrorCode || string(gre.Body) != string(wre.Body) || gre.Response.StatusCode != wre.Response.StatusCode) {
		t.Errorf("retrieve error %+v, want %+v", gre, wre)
	}
	if oauthflow.IsGrantDead(gotErr) != oauthflow.IsGrantDead(wantErr) || oauthflow.IsTransient(gotErr) != oauthflow.IsTransient(wantErr) {
		t.Errorf("dead %v transient %v, want %v %v", oauthflow.IsGrantDead(gotErr), oauthflow.IsTransient(gotErr),
			oauthflow.IsGrantDead(wantErr), oauthflow.IsTransient(wantErr))
	}
}
