package providers_test

import (
	"fmt"

	"github.com/oauthflow/oauthflow/providers"
)

func ExampleNew() {
	p, err := providers.New("microsoft", providers.Credentials{
		ClientID:    "app-1",
		RedirectURL: "https://app.example/api/v1/oauth/callback",
		Params:      map[string]string{"tenant": "contoso.onmicrosoft.com"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.DisplayName(), p.SupportsPKCE())
	fmt.Println(p.BuildAuthURL([]string{"User.Read"}, "state-1"))
	// Output:
	// Microsoft Entra ID true
	// https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize?client_id=app-1&redirect_uri=https%3A%2F%2Fapp.example%2Fapi%2Fv1%2Foauth%2Fcallback&response_type=code&scope=User.Read&state=state-1
}

func ExampleFromLookup() {
	env := map[string]string{"KEYCLOAK_CLIENT_ID": "app", "KEYCLOAK_CLIENT_SECRET": "s", "KEYCLOAK_OAUTH_REDIRECT_URI": "https://app.example/cb",
		"KEYCLOAK_BASE_URL": "https://sso.example.com"}
	_, err := providers.FromLookup("keycloak", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	fmt.Println(err)
	// Output:
	// providers: missing environment variable: KEYCLOAK_REALM (the realm name)
}
