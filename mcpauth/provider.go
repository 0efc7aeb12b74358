package mcpauth

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
	"golang.org/x/oauth2"
)

// serverProvider is an MCP server's provider: the oauth2 provider built for
// the client that serves now, rebuilt when that changes. The client is the
// app's own for the server's verified issuer, read from the Connector at
// each use (a rotated secret is used at once), else the stored dynamic
// registration. A registration the server refuses (invalid_client or
// unauthorized_client at its token endpoint, or at its authorization page)
// heals: the server is discovered again, the registration forgotten and a
// new one made, once across instances. The call that met the refusal still
// fails (a code or a refresh token belongs to the client it was issued to);
// the next sign-in uses the new client.
type serverProvider struct {
	c  *Connector
	id string

	mu     sync.Mutex
	s      *server           // the server record it was built from
	dyn    Client            // the dynamic registration in use; zero while the app's own client serves
	inner  *providers.OAuth2 // built for client
	client Client
}

// build makes the provider of s, registering a client if it needs one.
func (c *Connector) build(ctx context.Context, id string, s *server) (*serverProvider, error) {
	p := &serverProvider{c: c, id: id, s: s}
	if _, err := p.now(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// now is the oauth2 provider for the client that serves now.
func (p *serverProvider) now(ctx context.Context) (*providers.OAuth2, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cl, preset := p.c.preset(&p.s.Discovery)
	if !preset {
		if p.dyn.ID == "" {
			reg, err := p.c.registered(ctx, &p.s.Discovery)
			if err != nil {
				return nil, err
			}
			p.dyn = reg
		}
		cl = p.dyn
	}
	if p.inner == nil || cl != p.client {
		inner, err := p.c.oauth2(p.id, p.s, cl)
		if err != nil {
			return nil, err
		}
		p.inner, p.client = inner, cl
	}
	return p.inner, nil
}

// last is now for the methods that take no context; when the client cannot
// be had, the provider built last.
func (p *serverProvider) last() *providers.OAuth2 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if inner, err := p.now(ctx); err == nil {
		return inner
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inner
}

// dynamic reports whether a dynamic registration serves, not the app's own client.
func (p *serverProvider) dynamic() bool {
	p.mu.Lock()
	d := &p.s.Discovery
	p.mu.Unlock()
	_, preset := p.c.preset(d)
	return !preset
}

// DeadGrantCodes makes invalid_client a dead grant for a dynamically
// registered client: the server dropped it, and the refresh tokens it was
// given went with it, so the user signs in again (with the new client). The
// app's own client answering invalid_client is a configuration fault (a
// rotated secret), which must not end every user's grant.
func (p *serverProvider) DeadGrantCodes() []string {
	if p.dynamic() {
		return []string{"invalid_client"}
	}
	return nil
}

func (p *serverProvider) ProviderID() string      { return p.id }
func (p *serverProvider) DefaultScopes() []string { return p.last().DefaultScopes() }
func (p *serverProvider) DisplayName() string     { return p.last().DisplayName() }
func (p *serverProvider) SupportsPKCE() bool      { return p.last().SupportsPKCE() }
func (p *serverProvider) Issuer() string          { return p.last().Issuer() }

// AuthorizationIssuer: every sign-in records its authorization server's
// issuer, advertised or not (oauthflow.IssuerReporter, the mix-up defence).
func (p *serverProvider) AuthorizationIssuer() (string, bool) { return p.last().AuthorizationIssuer() }

func (p *serverProvider) BuildAuthURL(scopes []string, state string, opts ...oauth2.AuthCodeOption) string {
	return p.last().BuildAuthURL(scopes, state, opts...)
}

func (p *serverProvider) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	inner, err := p.now(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := inner.ExchangeCode(ctx, code, opts...)
	return ts, p.check(ctx, inner, err)
}

func (p *serverProvider) ExchangeCodeVerifier(ctx context.Context, code, verifier string) (*oauthflow.TokenSet, error) {
	inner, err := p.now(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := inner.ExchangeCodeVerifier(ctx, code, verifier)
	return ts, p.check(ctx, inner, err)
}

func (p *serverProvider) RefreshToken(ctx context.Context, refreshToken string) (*oauthflow.TokenSet, error) {
	inner, err := p.now(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := inner.RefreshToken(ctx, refreshToken)
	return ts, p.check(ctx, inner, err)
}

func (p *serverProvider) RevokeToken(ctx context.Context, token, hint string) error {
	inner, err := p.now(ctx)
	if err != nil {
		return err
	}
	return inner.RevokeToken(ctx, token, hint)
}

// check follows a token request made with inner: after tokens, it keeps
// the server's name and registration alive (a user's tokens live); after
// the server's refusal of the client, it heals. err is returned as it is.
func (p *serverProvider) check(ctx context.Context, inner *providers.OAuth2, err error) error {
	if err == nil {
		p.keep(ctx)
		return nil
	}
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || !clientRefused(pe.Code) {
		return err
	}
	if herr := p.heal(ctx, inner.ClientID()); herr != nil {
		return errors.Join(err, herr)
	}
	return err
}

// clientRefused reports whether a token endpoint's error code refuses the
// client rather than the user's grant.
func clientRefused(code string) bool {
	return code == "invalid_client" || code == "unauthorized_client"
}

// keep resets the time to live of the server's name record and of its
// dynamic registration.
func (p *serverProvider) keep(ctx context.Context) {
	p.mu.Lock()
	s := p.s
	p.mu.Unlock()
	_ = p.c.keepName(ctx, p.id, s.URL)
	if p.dynamic() {
		p.c.keepRegistration(ctx, &s.Discovery)
	}
}

// SignInRefused hears a sign-in the authorization server refused at its
// authorization page (the callback's error redirect): a refusal of the
// client (invalid_client, unauthorized_client, or invalid_request about the
// client or the redirect URI) heals the registration, as at the token
// endpoint. Many servers show such errors to the user instead of
// redirecting; for those, the registration's provenance and expiry are
// what retire it.
func (p *serverProvider) SignInRefused(ctx context.Context, e *oauthflow.ProviderError) {
	if e == nil || !refusedAtAuthorize(e.Code, e.Description) {
		return
	}
	p.mu.Lock()
	refused, d := p.client.ID, p.s.Discovery
	p.mu.Unlock()
	// The browser brings this refusal, so anyone with a sign-in can claim
	// one, and a heal replaces the client every user's grant belongs to:
	// claims heal once per authorization server per interval, across
	// instances. The token endpoint's invalid_client is not rationed.
	if took, err := p.c.kv.SetNX(ctx, issuerKey("healed", verifiedIssuer(&d)), []byte("1"), refusalHealInterval); err != nil || !took {
		return
	}
	_ = p.heal(ctx, refused)
}

// refusalHealInterval is how often a refusal at the authorization page may
// replace an authorization server's client registration.
const refusalHealInterval = 15 * time.Minute

// refusedAtAuthorize reports whether an authorization error redirect
// refuses the client.
func refusedAtAuthorize(code, description string) bool {
	if clientRefused(code) {
		return true
	}
	d := strings.ToLower(description)
	return code == "invalid_request" && (strings.Contains(d, "client") || strings.Contains(d, "redirect"))
}

// heal replaces the dynamic registration refused (its client ID): the
// server discovered again, the registration forgotten if it is still the
// refused one, and a new one made (or, when another instance made it first,
// taken). The app's own client is not healed: its refusal is a
// configuration fault.
func (p *serverProvider) heal(ctx context.Context, refused string) error {
	p.mu.Lock()
	old := p.s
	p.mu.Unlock()
	if _, preset := p.c.preset(&old.Discovery); preset {
		return nil
	}
	fresh, err := p.c.rediscover(ctx, p.id, old.URL, old.Scopes)
	if err != nil {
		return err
	}
	if err := p.c.forgetRegistration(ctx, &old.Discovery, refused); err != nil {
		return err
	}
	cl, err := p.c.registered(ctx, &fresh.Discovery)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s, p.dyn = fresh, cl
	return nil
}
