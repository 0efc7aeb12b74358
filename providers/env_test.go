package providers

import (
	"errors"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func githubEnv() map[string]string {
	return map[string]string{
		"GITHUB_CLIENT_ID":          "gh-id",
		"GITHUB_CLIENT_SECRET":      "gh-secret",
		"GITHUB_OAUTH_REDIRECT_URI": "https://app.example/api/v1/oauth/callback",
	}
}

func TestFromLookup(t *testing.T) {
	t.Parallel()
	p, err := FromLookup("github", envMap(githubEnv()))
	if err != nil {
		t.Fatal(err)
	}
	q := authQuery(t, p.BuildAuthURL(nil, "s"))
	if p.ProviderID() != "github" || q.Get("client_id") != "gh-id" || q.Get("redirect_uri") != "https://app.example/api/v1/oauth/callback" {
		t.Errorf("provider %q query %v", p.ProviderID(), q)
	}
	if p.token.ClientSecret != "gh-secret" {
		t.Error("secret not read")
	}
}

func TestFromLookupMissing(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		id      string
		env     func(map[string]string)
		missing string
	}{
		{"client id", "github", func(m map[string]string) { delete(m, "GITHUB_CLIENT_ID") }, "GITHUB_CLIENT_ID"},
		{"blank client id", "github", func(m map[string]string) { m["GITHUB_CLIENT_ID"] = " " }, "GITHUB_CLIENT_ID"},
		{"secret", "github", func(m map[string]string) { delete(m, "GITHUB_CLIENT_SECRET") }, "GITHUB_CLIENT_SECRET"},
		{"redirect", "github", func(m map[string]string) { delete(m, "GITHUB_OAUTH_REDIRECT_URI") }, "GITHUB_OAUTH_REDIRECT_URI"},
		{"template", "keycloak", func(m map[string]string) { m["KEYCLOAK_BASE_URL"] = "https://sso.example.com" }, "KEYCLOAK_REALM"},
		{"shop", "shopify", nil, "SHOPIFY_SHOP"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := map[string]string{}
			for k, v := range githubEnv() {
				env[strings.Replace(k, "GITHUB", EnvPrefix(tt.id), 1)] = v
			}
			if tt.env != nil {
				tt.env(env)
			}
			_, err := FromLookup(tt.id, envMap(env))
			if !errors.Is(err, ErrMissingEnv) || !strings.Contains(err.Error(), tt.missing) {
				t.Fatalf("err = %v, want ErrMissingEnv naming %s", err, tt.missing)
			}
		})
	}
}

// With nothing set, one error names every variable that is missing, once,
// and says what it is without the wrapped sentinels' text in the way.
func TestFromLookupNamesEveryMissingVariable(t *testing.T) {
	t.Parallel()
	_, err := FromLookup("keycloak", envMap(map[string]string{"KEYCLOAK_CLIENT_SECRET": ""}))
	if !errors.Is(err, ErrMissingEnv) || !errors.Is(err, oauthflow.ErrInvalidArgument) {
		t.Fatalf("err = %v, want ErrMissingEnv and ErrInvalidArgument", err)
	}
	want := "providers: missing environment variables: KEYCLOAK_CLIENT_ID, KEYCLOAK_OAUTH_REDIRECT_URI, " +
		"KEYCLOAK_BASE_URL (the server URL, e.g. https://sso.example.com (add /auth for Keycloak 16 and older)), " +
		"KEYCLOAK_REALM (the realm name)"
	if err.Error() != want {
		t.Fatalf("err = %q\nwant  %q", err, want)
	}
	var missing *MissingEnvError
	if !errors.As(err, &missing) || len(missing.Names) != 4 {
		t.Fatalf("err = %#v, want a *MissingEnvError with 4 names", err)
	}
}

func TestFromLookupParamsAndPublicClient(t *testing.T) {
	t.Parallel()
	env := map[string]string{
		"MICROSOFT_CLIENT_ID":          "ms-id",
		"MICROSOFT_CLIENT_SECRET":      "",
		"MICROSOFT_OAUTH_REDIRECT_URI": "https://app.example/cb",
		"MICROSOFT_TENANT":             "contoso.onmicrosoft.com",
	}
	p, err := FromLookup("microsoft", envMap(env))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(p.Config().TokenURL, "/contoso.onmicrosoft.com/") || p.token.ClientSecret != "" {
		t.Errorf("token URL %q secret %q", p.Config().TokenURL, p.token.ClientSecret)
	}
	delete(env, "MICROSOFT_TENANT")
	if p, err = FromLookup("microsoft", envMap(env)); err != nil || !strings.Contains(p.Config().TokenURL, "/common/") {
		t.Errorf("default tenant: %v", err)
	}
}

func TestFromLookupUnknown(t *testing.T) {
	t.Parallel()
	if _, err := FromLookup("nope", envMap(nil)); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v", err)
	}
}

func TestEnvPrefix(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{"github": "GITHUB", "auth0": "AUTH0", "x": "X", "my-idp.v2": "MY_IDP_V2"} {
		if got := EnvPrefix(in); got != want {
			t.Errorf("EnvPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// A mistyped catalog ID gets the nearest one in its error, from FromEnv, New
// and Lookup alike.
func TestCatalogSuggestsTheNearestID(t *testing.T) {
	none := func(string) (string, bool) { return "", false }
	for typo, want := range map[string]string{"githb": "github", "GitHub": "github", "slak": "slack"} {
		_, errEnv := FromLookup(typo, none)
		_, errNew := New(typo, testCreds)
		_, errLookup := Lookup(typo)
		for _, err := range []error{errEnv, errNew, errLookup} {
			if !errors.Is(err, oauthflow.ErrUnknownProvider) || !strings.Contains(err.Error(), `did you mean "`+want+`"`) {
				t.Errorf("%q: err = %v, want ErrUnknownProvider suggesting %q", typo, err, want)
			}
		}
	}
	if _, err := Lookup("no-such-provider-at-all"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("an ID near nothing: err = %v, want ErrUnknownProvider without a guess", err)
	}
}
