package oauthflowtest

import (
	"fmt"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
)

// defaultScope is what the server's provider asks for by default.
const defaultScope = "read"

// Provider returns a provider for the server, with the ID id, whose sign-ins
// come back to redirectURL (the app's callback, such as
// app.URL+oauthflow.CallbackPath): [Server.ProviderConfig] and
// [Server.Credentials] built with [providers.NewOAuth2], ready to register.
// It panics when id is empty or redirectURL is not a plain http URL on a
// loopback host, the only callbacks the server sends users to.
func (s *Server) Provider(id, redirectURL string) *providers.OAuth2 {
	if !authserver.IsLoopbackURI(redirectURL) {
		panic(fmt.Sprintf("oauthflowtest: redirect URL %q is not a plain http URL on a loopback host", redirectURL))
	}
	p, err := providers.NewOAuth2(s.ProviderConfig(id), s.Credentials(redirectURL))
	if err != nil {
		panic("oauthflowtest: " + err.Error())
	}
	return p
}

// ProviderConfig describes the server as the provider id: its endpoints
// (device, revocation and user info included), the scope "read", the iss
// check (RFC 9207), and DPoP when the server does it. Change what a test
// needs (DisplayName, Scopes...) and build the provider with
// [providers.NewOAuth2] and [Server.Credentials].
func (s *Server) ProviderConfig(id string) providers.Config {
	cfg := providers.Config{
		ID:            id,
		AuthURL:       s.as.AuthURL(),
		TokenURL:      s.as.TokenURL(),
		RevocationURL: s.as.RevokeURL(),
		Issuer:        s.URL,
		Scopes:        []string{defaultScope},
		AuthStyle:     providers.AuthStyleHeader,
		UserinfoURL:   s.UserinfoURL(),
		AccountField:  "sub",
		DPoP:          s.opts.DPoP,
	}
	if !s.opts.NoDeviceGrant {
		cfg.DeviceAuthURL = s.as.DeviceAuthorizationURL()
	}
	return cfg
}

// Credentials are the app the server has registered, a confidential client
// with a secret made for this server, with redirectURL as its callback. The
// server accepts any plain http URL on a loopback host (127.0.0.1, [::1],
// localhost; any port and path).
func (s *Server) Credentials(redirectURL string) providers.Credentials {
	return providers.Credentials{ClientID: clientID, ClientSecret: s.secret, RedirectURL: redirectURL}
}
