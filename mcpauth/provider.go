package mcpauth

import (
	"context"
	"crypto/rand"
	"errors"
	"slices"
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
// unauthorized_client at its token endpoint; a refusal at its authorization
// page only once the token endpoint confirms it) heals: the server is
// discovered again, the registration forgotten and a new one made, once
// across instances. The call that met the refusal still
// fails (a code or a refresh token belongs to the client it was issued to);
// the next sign-in uses the new client. A server record that names another
// authorization server than the one the provider serves (the server moved:
// see Connector.recheck) is followed at the next use: a new client,
// registered there.
type serverProvider struct {
	c  *Connector
	id string

	mu     sync.Mutex
	s      *server           // the server record it serves
	dyn    registration      // the dynamic registration in use; zero while the app's own client serves
	inner  *providers.OAuth2 // built for client, from the record from; a zero client has it built anew
	client Client
	from   *server

	keptName, keptReg keepMemo         // this provider's last keeps of the server's records (see keep)
	clock             func() time.Time // when the records are kept; nil: time.Now
}

// build makes the provider of s, registering a client if it needs one.
func (c *Connector) build(ctx context.Context, id string, s *server) (*serverProvider, error) {
	p := &serverProvider{c: c, id: id, s: s}
	if _, _, err := p.now(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// now is the oauth2 provider for the client that serves now, and the
// server record it was built from (whose issuer it sends to).
func (p *serverProvider) now(ctx context.Context) (*providers.OAuth2, *server, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.follow(ctx)
	cl, preset := p.c.preset(&p.s.Discovery)
	if !preset {
		if p.dyn.Client.ID == "" {
			reg, err := p.c.registered(ctx, &p.s.Discovery)
			if err != nil {
				return nil, nil, err
			}
			p.dyn = reg
		}
		cl = p.dyn.Client
	}
	if p.inner == nil || cl != p.client {
		inner, err := p.c.oauth2(p.id, p.s, cl)
		if err != nil {
			return nil, nil, err
		}
		p.inner, p.client, p.from = inner, cl, p.s
	}
	return p.inner, p.from, nil
}

// follow takes the stored server record when it names another verified
// issuer than the one the provider serves: the server moved, and the move
// was seen here or on another instance. The dynamic registration goes with
// the old issuer. A record that cannot be read leaves the provider as it
// is. p.mu is held.
func (p *serverProvider) follow(ctx context.Context) {
	s, _, err := p.c.readServer(ctx, p.id)
	if err != nil || s == nil || verifiedIssuer(&s.Discovery) == verifiedIssuer(&p.s.Discovery) {
		return
	}
	p.s, p.dyn, p.client = s, registration{}, Client{} // no client: inner is built anew
}

// last is now for the methods that take no context; when the client cannot
// be had, the provider built last, and the record it was built from.
func (p *serverProvider) last() (*providers.OAuth2, *server) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if inner, from, err := p.now(ctx); err == nil {
		return inner, from
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.inner, p.from
}

// lastInner is last's oauth2 provider.
func (p *serverProvider) lastInner() *providers.OAuth2 {
	inner, _ := p.last()
	return inner
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
func (p *serverProvider) DefaultScopes() []string { return p.lastInner().DefaultScopes() }
func (p *serverProvider) DisplayName() string     { return p.lastInner().DisplayName() }
func (p *serverProvider) SupportsPKCE() bool      { return p.lastInner().SupportsPKCE() }
func (p *serverProvider) UsesDPoP() bool          { return p.lastInner().UsesDPoP() }
func (p *serverProvider) Issuer() string          { return p.lastInner().Issuer() }

// AuthorizationIssuer: every sign-in records its authorization server's
// issuer, advertised or not (see [oauthflow.Provider]; the mix-up defence).
func (p *serverProvider) AuthorizationIssuer() (string, bool) {
	return p.lastInner().AuthorizationIssuer()
}

// BuildAuthURL binds the sign-in, by its PKCE challenge, to the issuer it
// is sent to: its code is exchanged there or nowhere.
func (p *serverProvider) BuildAuthURL(scopes []string, state string, opts ...oauth2.AuthCodeOption) string {
	inner, from := p.last()
	u := inner.BuildAuthURL(scopes, state, opts...)
	p.c.bindSignIn(u, from)
	return u
}

// ExchangeCode cannot see the sign-in's verifier among opts, so it cannot
// check where the sign-in went; the module calls ExchangeCodeVerifier.
func (p *serverProvider) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	inner, from, err := p.now(ctx)
	if err != nil {
		return nil, err
	}
	ts, err := inner.ExchangeCode(ctx, code, opts...)
	return ts, p.check(ctx, inner, from, ts, "", err)
}

// ExchangeCodeVerifier exchanges the code only at the issuer its sign-in
// was sent to.
func (p *serverProvider) ExchangeCodeVerifier(ctx context.Context, code, verifier string) (*oauthflow.TokenSet, error) {
	inner, from, err := p.now(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.c.signInHere(ctx, verifier, from); err != nil {
		return nil, err
	}
	ts, err := inner.ExchangeCodeVerifier(ctx, code, verifier)
	if err == nil {
		p.c.signedIn(ctx, verifier)
	}
	return ts, p.check(ctx, inner, from, ts, "", err)
}

// RefreshToken sends a refresh token only to the issuer it is bound to;
// another's is a dead grant, and no request is made.
func (p *serverProvider) RefreshToken(ctx context.Context, refreshToken string) (*oauthflow.TokenSet, error) {
	inner, from, err := p.now(ctx)
	if err != nil {
		return nil, err
	}
	if err := p.c.issuedHere(ctx, refreshToken, from); err != nil {
		return nil, p.deadGrant(ctx, refreshToken, err)
	}
	ts, err := inner.RefreshToken(ctx, refreshToken)
	return ts, p.check(ctx, inner, from, ts, refreshToken, err)
}

// deadGrant is the error of a refresh token RefreshToken did not send:
// invalid_grant for one of another issuer (the store deletes it, and its
// binding goes); the store's error as it is.
func (p *serverProvider) deadGrant(ctx context.Context, refreshToken string, err error) error {
	if !errors.Is(err, ErrIssuerChanged) {
		return err
	}
	p.c.unbind(ctx, refreshToken)
	return &oauthflow.ProviderError{ProviderID: p.id, Code: "invalid_grant",
		Description: "the grant was issued by another authorization server", Err: err}
}

// RevokeToken revokes a token only at the issuer it is bound to; another's
// is left alone, as a provider without revocation does. The store revokes
// the tokens of a record it deleted: their binding goes too.
func (p *serverProvider) RevokeToken(ctx context.Context, token, hint string) error {
	inner, from, err := p.now(ctx)
	if err != nil {
		return err
	}
	err = p.c.issuedHere(ctx, token, from)
	if err == nil {
		err = inner.RevokeToken(ctx, token, hint)
	} else if errors.Is(err, ErrIssuerChanged) {
		err = errors.Join(errors.ErrUnsupported, err)
	}
	p.c.unbind(ctx, token) // the store deletes the record either way
	return err
}

// check follows a token request made with inner, built from the record
// from: tokens (ts) are bound to its issuer (refreshedWith: the refresh
// token sent, which ts may keep), and keep the server's name and
// registration alive (a user's tokens live); the server's refusal of the
// client heals. err is returned as it is.
func (p *serverProvider) check(ctx context.Context, inner *providers.OAuth2, from *server, ts *oauthflow.TokenSet, refreshedWith string, err error) error {
	if err == nil {
		p.c.bindGrant(ctx, ts, refreshedWith, from)
		p.keep(ctx)
		return nil
	}
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) {
		return err
	}
	if refreshedWith != "" && (pe.Code == "invalid_grant" || slices.Contains(p.DeadGrantCodes(), pe.Code)) {
		p.c.unbind(ctx, refreshedWith) // a dead grant: the store deletes the record
	}
	if !clientRefused(pe.Code) {
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

// keep keeps the server's name record and its dynamic registration alive
// after a grant was issued through the provider: each lives nameTTL from
// its keep. A provider keeps a record at most once per keepInterval while
// it holds the same value (the same URL; the same registration and client),
// so the refreshes of a connection cost no store command besides their own;
// each instance keeps on its own, and a new one (a restart) keeps at its
// first grant. A record that cannot be kept (the store failed) is kept
// again at the next grant.
func (p *serverProvider) keep(ctx context.Context) {
	p.mu.Lock()
	s, reg, now := p.s, p.dyn, p.keepTime()
	lastName, nameDue := p.keptName.claim(s.URL, now)
	regWhat := registrationKey(&s.Discovery) + " " + reg.Client.ID
	var lastReg time.Time
	regDue := false
	if _, preset := p.c.preset(&s.Discovery); !preset {
		lastReg, regDue = p.keptReg.claim(regWhat, now)
	}
	p.mu.Unlock()
	if nameDue && p.c.keepName(ctx, p.id, s.URL) != nil {
		p.release(&p.keptName, s.URL, lastName)
	}
	if !regDue {
		return
	}
	// Kept here less than nameTTL ago and absent now: deleted (a heal forgot
	// it), not expired.
	restore := lastReg.IsZero() || !now.Before(lastReg.Add(nameTTL))
	if p.c.keepRegistration(ctx, &s.Discovery, reg, restore) != nil {
		p.release(&p.keptReg, regWhat, lastReg)
	}
}

// keepInterval is how long a provider leaves its server's records unkept
// after keeping them: each keep gives them nameTTL, so a kept record has at
// least nameTTL less keepInterval left.
const keepInterval = time.Hour

// keepMemo is a provider's last keep of one of its server's records.
type keepMemo struct {
	what string    // the record and the value kept: another value is kept at once
	at   time.Time // when the keep was sent; zero: never
}

// claim reports whether the record holding what is due a keep at now, and
// when it was last kept (zero: not by this provider). A due keep is
// claimed at once, so that the grants issued meanwhile do not keep it too.
// p.mu is held.
func (m *keepMemo) claim(what string, now time.Time) (last time.Time, due bool) {
	if m.what == what {
		if now.Sub(m.at) < keepInterval {
			return m.at, false
		}
		last = m.at
	}
	*m = keepMemo{what: what, at: now}
	return last, true
}

// release gives back the claim on m of a keep that failed: the next grant
// keeps the record holding what.
func (p *serverProvider) release(m *keepMemo, what string, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m.what == what {
		m.at = last
	}
}

// keepTime is the time by the provider's clock. p.mu is held.
func (p *serverProvider) keepTime() time.Time {
	if p.clock != nil {
		return p.clock()
	}
	return time.Now()
}

// SignInRefused hears a sign-in the authorization server refused at its
// authorization page (the callback's error redirect). The browser brings
// that refusal, so anyone with a sign-in of their own can claim one, and a
// heal replaces the client every user's grant was issued to: an honest
// server then refuses their refresh tokens (a grant belongs to its client).
// So a claim that refuses the client (invalid_client, unauthorized_client,
// or invalid_request about the client or the redirect URI) heals only when
// the server says so itself, at its token endpoint (refusalConfirmed).
// Servers that show such errors to the user instead of redirecting are
// left to the registration's provenance and expiry.
func (p *serverProvider) SignInRefused(ctx context.Context, e *oauthflow.ProviderError) {
	if e == nil || !refusedAtAuthorize(e.Code, e.Description) {
		return
	}
	inner, from, err := p.now(ctx)
	if err != nil || !p.refusalConfirmed(ctx, inner, from) {
		return
	}
	_ = p.heal(ctx, inner.ClientID())
}

// refusalConfirmed asks the token endpoint of from whether it refuses the
// client of inner: a refresh with a token no one was issued, which a server
// that knows the client answers invalid_grant, and one that does not,
// invalid_client. A claimed refusal costs the server one such request per
// authorization server per refusalCheckInterval, across instances; a claim
// within it confirms nothing. The app's own client is never checked (its
// refusal is a configuration fault, not healed).
func (p *serverProvider) refusalConfirmed(ctx context.Context, inner *providers.OAuth2, from *server) bool {
	if _, preset := p.c.preset(&from.Discovery); preset {
		return false
	}
	took, err := p.c.kv.SetNX(ctx, issuerKey("refusalcheck", verifiedIssuer(&from.Discovery)), []byte("1"), refusalCheckInterval)
	if err != nil || !took {
		return false
	}
	_, err = inner.RefreshToken(ctx, "oauthflow-refusal-check-"+rand.Text())
	var pe *oauthflow.ProviderError
	return errors.As(err, &pe) && clientRefused(pe.Code)
}

// refusalCheckInterval is how often a refusal claimed at the authorization
// page may have an authorization server's token endpoint asked about its
// client.
const refusalCheckInterval = time.Minute

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
	fresh, err := p.c.rediscover(ctx, p.id, old, Challenge{})
	if err != nil {
		return err
	}
	if err := p.c.forgetRegistration(ctx, &old.Discovery, refused); err != nil {
		return err
	}
	reg, err := p.c.registered(ctx, &fresh.Discovery)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.s, p.dyn = fresh, reg
	return nil
}
