package main

import (
	"net/http"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

// The demo provider is the test kit's authorization server, mounted beside the
// app, so that the example runs offline and with no credentials.
const (
	demoID   = "demo"
	demoPath = "/demo" // where the demo server is mounted
)

// mountDemo mounts the demo server on mux for the app cfg describes and
// returns it with its provider, Demo Cloud. Its sign-ins come back to the API
// callback, or in terminal mode to the frontend page; it asks on a consent
// page unless cfg.AutoConsent, and offers sign-in with a code unless
// cfg.NoDeviceGrant.
func mountDemo(mux *http.ServeMux, cfg appConfig) (*oauthflowtest.Server, *providers.OAuth2, error) {
	srv := oauthflowtest.Mount(mux, cfg.Base+demoPath, oauthflowtest.Options{
		ConsentPage: !cfg.AutoConsent, NoDeviceGrant: cfg.NoDeviceGrant, RotateRefreshTokens: true})
	redirect := oauthflow.CallbackPath
	if cfg.Terminal {
		redirect = frontendCallbackPath
	}
	pc := srv.ProviderConfig(demoID)
	pc.DisplayName = "Demo Cloud"
	p, err := providers.NewOAuth2(pc, srv.Credentials(cfg.Base+redirect))
	return srv, p, err
}
