package oauthflow_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
)

// The catalog's providers bring their documented limits to refresh ahead:
// Amazon Cognito's 120 token requests a second, Okta's 35 at once. A
// provider that documents none gets the default, and the app's
// Config.RefreshLimits replaces a provider's own.
func TestRefreshAheadLimitsFromTheCatalog(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	creds := providers.Credentials{ClientID: "c", ClientSecret: "s", RedirectURL: "https://app.example/cb"}
	for id, params := range map[string]map[string]string{
		"cognito": {"domain": "my-app.auth.us-east-1.amazoncognito.com"},
		"okta":    {"domain": "dev-1.okta.com"},
		"github":  nil,
	} {
		c := creds
		c.Params = params
		p, err := providers.New(id, c)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range []struct {
		name, provider      string
		app                 map[string]oauthflow.RefreshLimit
		inFlight, perSecond int
	}{
		{"cognito's quota", "cognito", nil, 100, 120},
		{"okta's requests at once", "okta", nil, 35, 0},
		{"github documents none", "github", nil, 100, 0},
		{"the app's own for cognito", "cognito", map[string]oauthflow.RefreshLimit{"cognito": {Concurrency: 10}}, 10, 0},
	} {
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg, RefreshLimits: tt.app,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		inFlight, perSecond := oauthflow.RefreshAheadLimit(m, tt.provider)
		if inFlight != tt.inFlight || perSecond != tt.perSecond {
			t.Errorf("%s: %d in flight, %d a second; want %d, %d", tt.name, inFlight, perSecond, tt.inFlight, tt.perSecond)
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
