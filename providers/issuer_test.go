package providers_test

import (
	"testing"

	"github.com/oauthflow/oauthflow/providers"
)

// Config.Issuer alone means advertised (iss required), as before;
// IssOptional keeps the issuer for the mix-up check without requiring iss,
// and Issuer() then names none, for code that reads Issuer() alone.
func TestIssOptional(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		optional   bool
		issuer     string
		advertised bool
	}{{false, "https://as.example", true}, {true, "", false}} {
		p, err := providers.NewOAuth2(providers.Config{ID: "x", AuthURL: "https://as.example/authorize",
			TokenURL: "https://as.example/token", Issuer: "https://as.example", IssOptional: tc.optional},
			providers.Credentials{ClientID: "c", RedirectURL: "https://app.example/cb"})
		if err != nil {
			t.Fatal(err)
		}
		iss, advertised := p.AuthorizationIssuer()
		if iss != "https://as.example" || advertised != tc.advertised || p.Issuer() != tc.issuer {
			t.Errorf("IssOptional %v: AuthorizationIssuer %q, %v; Issuer %q", tc.optional, iss, advertised, p.Issuer())
		}
	}
}
