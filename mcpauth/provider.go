package mcpauth

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
	"golang.org/x/oauth2"
)

// serverProvider is an MCP server's provider: the oauth2 provider built for
// its current client registration, replaced when the authorization server
// answers invalid_client (a dynamic registration it dropped or expired).
// Then the stored registration is forgotten and a new one made, once
// across instances; the call that met it still fails (a code or a refresh
// token belongs to the client it was issued to), and the next sign-in
// uses the new client.
type serverProvider struct {
	c       *Connector
	id      string
	inner   atomic.Pointer[providers.OAuth2]
	dynamic atomic.Bool // the client is a dynamic registration, not the app's own
}

// DeadGrantCodes makes invalid_client a dead grant for a dynamically
// registered client: the server dropped it, and the refresh tokens it was
// given went with it, so the user signs in again (with the new client). The
// app's own client answering invalid_client is a configuration fault (a
// rotated secret), which must not end every user's grant.
func (p *serverProvider) DeadGrantCodes() []string {
	if p.dynamic.Load() {
		return []string{"invalid_client"}
	}
	return nil
}

func (p *serverProvider) now() *providers.OAuth2 { return p.inner.Load() }

func (p *serverProvider) ProviderID() string      { return p.id }
func (p *serverProvider) DefaultScopes() []string { return p.now().DefaultScopes() }
func (p *serverProvider) DisplayName() string     { return p.now().DisplayName() }
func (p *serverProvider) SupportsPKCE() bool      { return p.now().SupportsPKCE() }
func (p *serverProvider) Issuer() string          { return p.now().Issuer() }

// AuthorizationIssuer: every sign-in records its authorization server's
// issuer, advertised or not (oauthflow.IssuerReporter, the mix-up defence).
func (p *serverProvider) AuthorizationIssuer() (string, bool) { return p.now().AuthorizationIssuer() }

func (p *serverProvider) BuildAuthURL(scopes []string, state string, opts ...oauth2.AuthCodeOption) string {
	return p.now().BuildAuthURL(scopes, state, opts...)
}

func (p *serverProvider) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	inner := p.now()
	ts, err := inner.ExchangeCode(ctx, code, opts...)
	return ts, p.check(ctx, inner, err)
}

func (p *serverProvider) ExchangeCodeVerifier(ctx context.Context, code, verifier string) (*oauthflow.TokenSet, error) {
	inner := p.now()
	ts, err := inner.ExchangeCodeVerifier(ctx, code, verifier)
	return ts, p.check(ctx, inner, err)
}

func (p *serverProvider) RefreshToken(ctx context.Context, refreshToken string) (*oauthflow.TokenSet, error) {
	inner := p.now()
	ts, err := inner.RefreshToken(ctx, refreshToken)
	return ts, p.check(ctx, inner, err)
}

func (p *serverProvider) RevokeToken(ctx context.Context, token, hint string) error {
	return p.now().RevokeToken(ctx, token, hint)
}

// check registers a new client when err is the server's invalid_client to
// the client inner was built with; err is returned as it is.
func (p *serverProvider) check(ctx context.Context, inner *providers.OAuth2, err error) error {
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.Code != "invalid_client" || p.now() != inner {
		return err
	}
	if rerr := p.c.reregister(ctx, p); rerr != nil {
		return errors.Join(err, rerr)
	}
	return err
}

// reregister forgets p's dynamic registration and makes (or, when another
// instance made it first, takes) a new one, and rebuilds p with it.
func (c *Connector) reregister(ctx context.Context, p *serverProvider) error {
	s, ok, err := c.load(ctx, p.id)
	if err != nil || !ok {
		return err
	}
	if _, preset := c.preset(s.Discovery.AS); preset {
		return nil // the app's own credentials: nothing to register
	}
	if s.Client.ID == p.now().ClientID() { // the record still names the client refused: register anew
		c.forgetClient(ctx, s.Discovery.AS.Issuer, s.Client)
		cl, err := c.client(ctx, s.Discovery.AS)
		if err != nil {
			return err
		}
		s.Client = cl
		if err := c.save(ctx, p.id, s); err != nil {
			return err
		}
	}
	inner, err := c.oauth2(p.id, s)
	if err != nil {
		return err
	}
	p.inner.Store(inner)
	_, preset := c.preset(s.Discovery.AS)
	p.dynamic.Store(!preset)
	return nil
}
