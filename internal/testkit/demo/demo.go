// Package demo mounts the "demo" provider the library's own browser tests
// use: the test kit's authorization server under /demo, beside the host app,
// as the examples mount theirs with oauthflowtest alone.
package demo

import (
	"net/http"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

// ProviderID is the demo provider's ID.
const ProviderID = "demo"

// PathPrefix is where the demo authorization server is mounted.
const PathPrefix = "/demo"

// Options configure the demo provider.
type Options struct {
	// AccessTokenTTL is the demo's access-token lifetime; the token store treats a
	// token as expired 60 s early, so 75 s means a refresh 15 s after sign-in.
	AccessTokenTTL time.Duration
	// RedirectPath is where the demo redirects after consent (default the API callback).
	RedirectPath string
	// AutoConsent skips the consent page.
	AutoConsent bool
	// NoDeviceGrant leaves the device authorization grant (RFC 8628) out of the
	// server and the provider, as a provider without it would: sign-in goes
	// through a link only.
	NoDeviceGrant bool
}

// Mount mounts the demo authorization server on mux under /demo, for a host app
// reachable at base (scheme://host:port), and returns it with the provider,
// Demo Cloud: refresh tokens that rotate, a consent page unless AutoConsent,
// and sign-in with a code unless NoDeviceGrant.
func Mount(mux *http.ServeMux, base string, o Options) (*oauthflowtest.Server, *providers.OAuth2, error) {
	if o.RedirectPath == "" {
		o.RedirectPath = oauthflow.CallbackPath
	}
	srv := oauthflowtest.Mount(mux, base+PathPrefix, oauthflowtest.Options{ConsentPage: !o.AutoConsent,
		AccessTokenTTL: o.AccessTokenTTL, RotateRefreshTokens: true, NoDeviceGrant: o.NoDeviceGrant})
	cfg := srv.ProviderConfig(ProviderID)
	cfg.DisplayName = "Demo Cloud"
	p, err := providers.NewOAuth2(cfg, srv.Credentials(base+o.RedirectPath))
	return srv, p, err
}
