package main

import (
	"net/http"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

// The demo provider is the test kit's authorization server, mounted beside the
// app, so that the quickstart runs offline and with no credentials.
const (
	demoID   = "demo"
	demoPath = "/demo" // where the demo server is mounted
)

// mountDemo mounts the demo server on mux for an app reachable at base
// (scheme://host:port) and returns it with its provider, Demo Cloud: a
// consent page, a sign-in with a code too, refresh tokens that rotate, access
// tokens that last ttl, and a user-info endpoint, so that the page shows who
// connected.
func mountDemo(mux *http.ServeMux, base string, ttl time.Duration) (*oauthflowtest.Server, *providers.OAuth2, error) {
	srv := oauthflowtest.Mount(mux, base+demoPath,
		oauthflowtest.Options{ConsentPage: true, RotateRefreshTokens: true, AccessTokenTTL: ttl})
	cfg := srv.ProviderConfig(demoID)
	cfg.DisplayName = "Demo Cloud"
	p, err := providers.NewOAuth2(cfg, srv.Credentials(base+oauthflow.CallbackPath))
	return srv, p, err
}
