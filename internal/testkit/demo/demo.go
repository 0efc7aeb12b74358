// Package demo sets up what the examples share: the local demo authorization
// server mounted beside the host app (so the examples work offline, with no
// credentials), the "demo" provider that talks to it, and any real catalog
// provider whose variables are set (GITHUB_CLIENT_ID...).
package demo

import (
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
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
	// AutoConsent skips the consent page (for terminal use and tests).
	AutoConsent bool
	// NoDeviceGrant leaves the device authorization grant (RFC 8628) out of the
	// server and the provider, as a provider without it would: sign-in goes
	// through a link only.
	NoDeviceGrant bool
}

// Mount mounts the demo authorization server on mux under /demo, for a host app
// reachable at base (scheme://host:port), and returns it with the provider. The
// provider offers sign-in with a code (the device grant) unless NoDeviceGrant is
// set; its verification page is the server's /demo/device.
func Mount(mux *http.ServeMux, base string, o Options) (*authserver.Server, *providers.OAuth2, error) {
	if o.RedirectPath == "" {
		o.RedirectPath = oauthflow.CallbackPath
	}
	issuer := base + PathPrefix
	as := authserver.New(authserver.Options{Issuer: issuer, ConsentPage: !o.AutoConsent, IssParameter: true,
		AccessTokenTTL: o.AccessTokenTTL, RotateRefreshTokens: true, NoDeviceGrant: o.NoDeviceGrant})
	mux.Handle(PathPrefix+"/", http.StripPrefix(PathPrefix, as))
	cfg := providers.Config{ID: ProviderID, DisplayName: "Demo Cloud",
		AuthURL: as.AuthURL(), TokenURL: as.TokenURL(), RevocationURL: as.RevokeURL(), Issuer: issuer,
		Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader}
	if !o.NoDeviceGrant {
		cfg.DeviceAuthURL = as.DeviceAuthorizationURL()
	}
	p, err := providers.NewOAuth2(cfg,
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret", RedirectURL: base + o.RedirectPath})
	return as, p, err
}

// RegisterFromEnv registers every catalog provider whose <ID>_CLIENT_ID is set,
// and logs the ones whose other variables are missing.
func RegisterFromEnv(reg *oauthflow.Registry, log *slog.Logger) []string {
	var added []string
	for _, id := range providers.Known() {
		if os.Getenv(providers.EnvPrefix(id)+"_CLIENT_ID") == "" {
			continue
		}
		p, err := providers.FromEnv(id)
		if err == nil {
			err = reg.Register(p)
		}
		if err != nil {
			log.Warn("provider not registered", "provider", id, "error", err.Error())
			continue
		}
		added = append(added, id)
	}
	return added
}
