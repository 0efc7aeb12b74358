package oauthflowtest_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// SignIn runs the whole sign-in: the tokens it returns are the stored ones,
// the server exchanged one code, and the library read who signed in.
func TestSignIn(t *testing.T) {
	t.Parallel()
	idp := newServer(t, oauthflowtest.Options{User: "octocat"})
	a := newApp(t, idp, oauthflow.Config{})

	tok := oauthflowtest.SignIn(t, a.mod, "alice", "local")
	stored, err := a.mod.Tokens.GetTokens(t.Context(), "alice", "local")
	if err != nil || stored.AccessToken != tok.AccessToken || tok.RefreshToken == "" || tok.Scope != "read" {
		t.Fatalf("SignIn returned %+v; the store holds %+v, %v", tok, stored, err)
	}
	if !idp.Active(tok.AccessToken) || !idp.Active(tok.RefreshToken) {
		t.Fatal("the server does not honour the tokens it issued")
	}
	conns, err := a.mod.Tokens.Connections(t.Context(), "alice")
	if err != nil || len(conns) != 1 || conns[0].Account != "octocat" {
		t.Fatalf("connections %+v, %v; want one, as octocat", conns, err)
	}
	st := idp.Stats()
	if st.Authorizations != 1 || st.CodesExchanged != 1 || st.UserinfoCalls != 1 {
		t.Fatalf("stats %+v; want one authorization, one code exchanged, one user-info call", st)
	}
}

// With a consent page the browser clicks Allow; the scopes asked for are granted.
func TestBrowserAllowsOnTheConsentPage(t *testing.T) {
	t.Parallel()
	idp := newServer(t, oauthflowtest.Options{ConsentPage: true})
	a := newApp(t, idp, oauthflow.Config{})
	_, prompt, err := a.mod.StartSignIn(t.Context(), "alice", "local", "read", "write")
	if err != nil {
		t.Fatal(err)
	}
	page, err := oauthflowtest.NewBrowser().SignIn(t.Context(), prompt.AuthURL)
	if err != nil {
		t.Fatal(err)
	}
	if page.StatusCode != http.StatusOK || page.URL.Path != oauthflow.CallbackPath || !strings.Contains(page.Body, "account connected") {
		t.Fatalf("the browser ended at %s with %d: %s", page.URL, page.StatusCode, page.Body)
	}
	var me struct{ User, Scope string }
	a.getJSON(t, "alice", idp.APIURL(), &me)
	if me.User != oauthflowtest.DefaultUser || me.Scope != "read write" {
		t.Fatalf("the API answered %+v", me)
	}
}

// A denial reaches the app's callback page, which says so; the same link
// then signs in, as a user who changed their mind would.
func TestDenyNextThenRetry(t *testing.T) {
	t.Parallel()
	for _, consentPage := range []bool{false, true} {
		idp := newServer(t, oauthflowtest.Options{ConsentPage: consentPage})
		a := newApp(t, idp, oauthflow.Config{})
		_, prompt, err := a.mod.StartSignIn(t.Context(), "alice", "local")
		if err != nil {
			t.Fatal(err)
		}
		b := oauthflowtest.NewBrowser()
		idp.DenyNext()
		page, err := b.SignIn(t.Context(), prompt.AuthURL)
		if err != nil || page.StatusCode != http.StatusBadRequest || !strings.Contains(page.Body, "Sign-in not completed") {
			t.Fatalf("consent page %v: a denial ended with %v, %+v", consentPage, err, page)
		}
		if page, err = b.SignIn(t.Context(), prompt.AuthURL); err != nil || page.StatusCode != http.StatusOK {
			t.Fatalf("consent page %v: the retry ended with %v, %+v", consentPage, err, page)
		}
		if st := idp.Stats(); st.Denials != 1 || st.CodesExchanged != 1 {
			t.Fatalf("consent page %v: stats %+v", consentPage, st)
		}
	}
}

// SignIn fails its test, saying where the browser ended and what the page
// said, when the sign-in does not complete.
func TestSignInFailsItsTest(t *testing.T) {
	t.Parallel()
	idp := newServer(t, oauthflowtest.Options{})
	a := newApp(t, idp, oauthflow.Config{})
	tests := []struct {
		name, provider string
		before         func()
		want           []string
	}{
		{"denied", "local", idp.DenyNext, []string{"HTTP 400", a.url + oauthflow.CallbackPath, "Sign-in not completed"}},
		{"code refused", "local", func() { idp.FailNext(oauthflowtest.Failure{Error: "invalid_grant"}) }, []string{"HTTP 400"}},
		{"unknown provider", "nope", func() {}, []string{`start a sign-in of "alice" with "nope"`}},
	}
	for _, tt := range tests {
		tt.before()
		f := &failures{TB: t}
		fatals := f.run(t, func(tb testing.TB) { oauthflowtest.SignIn(tb, a.mod, "alice", tt.provider) })
		if len(fatals) != 1 {
			t.Fatalf("%s: SignIn failed its test %d times: %q", tt.name, len(fatals), fatals)
		}
		for _, w := range tt.want {
			if !strings.Contains(fatals[0], w) {
				t.Errorf("%s: %q does not say %q", tt.name, fatals[0], w)
			}
		}
		if strings.Contains(fatals[0], "code=") || strings.Contains(fatals[0], "<") {
			t.Errorf("%s: %q shows a code or markup", tt.name, fatals[0])
		}
	}
}
