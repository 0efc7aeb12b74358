package oauthflow_test

import (
	"errors"
	"fmt"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
)

// The host app registers each provider once, at setup, under the ID that
// token records and sign-ins name it by. A provider is plain data and the
// app's credentials; an ID can be registered only once.
func ExampleRegistry_Register() {
	reg := oauthflow.NewRegistry()
	acme, err := providers.NewOAuth2(providers.Config{
		ID:       "acme",
		AuthURL:  "https://auth.acme.example/authorize",
		TokenURL: "https://auth.acme.example/token",
		Scopes:   []string{"read"},
	}, providers.Credentials{
		ClientID:     "acme-client",
		ClientSecret: "acme-secret",
		RedirectURL:  "https://app.example/api/v1/oauth/callback",
	})
	if err != nil {
		panic(err)
	}
	if err := reg.Register(acme); err != nil {
		panic(err)
	}
	fmt.Println(reg.IDs())
	fmt.Println(reg.Register(acme))

	_, err = reg.Get("globex")
	fmt.Println("unknown:", errors.Is(err, oauthflow.ErrUnknownProvider))
	// Output:
	// [acme]
	// oauthflow: invalid argument: provider "acme" is already registered
	// unknown: true
}
