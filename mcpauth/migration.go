package mcpauth

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/outbound"
	"golang.org/x/oauth2"
)

// Authorization server migration (MCP 2026-07-28, SEP-2352): credentials are
// bound to the authorization server that issued them. When an MCP server's
// resource metadata names another authorization server, the client registers
// there and the user signs in there, and nothing of the old one (its client,
// a secret, a code or verifier, a token) is sent to the new one.
//
// A 401 to a request that carried the user's token has the server's resource
// metadata read again (recheck), from the challenge's resource_metadata, at
// most once per server per recheckInterval across instances; a 401 to a
// request without it changes nothing. When the metadata names another
// issuer, the server record is saved with it and marked Moved, which the
// provider of every instance follows at its next use (it reads the record:
// serverProvider.follow), and the user's tokens are deleted, so that the next
// request asks for a sign-in, which registers at the new issuer (a
// registration is kept per issuer and serves no other).
//
// Every other user's tokens for the server are the old issuer's too. They
// are not looked for: a store need not list its keys, and a scan of every
// user, on a request an untrusted server can cause at will, would be a lever
// against the store. Each is refused where it would be sent instead, on
// every instance and whenever the move was seen: every token the provider
// gets and every sign-in it starts (by its PKCE challenge) is bound to the
// issuer it came from or went to (a record under a hash of it), and a refresh
// token bound to another issuer is a dead grant (invalid_grant, with no
// request made: the store deletes the record and the user signs in again),
// is not revoked at the new server, and a code whose sign-in went to another
// issuer is not exchanged. A credential without a binding (from before
// bindings were kept, or one whose binding could not be written) is sent
// only while the server record has never moved.

const (
	// recheckInterval is how often a 401 may have a server's resource
	// metadata read again.
	recheckInterval = 30 * time.Second
	// signInBindingTTL bounds a sign-in's binding: far beyond a sign-in's life.
	signInBindingTTL = 24 * time.Hour
)

// ErrIssuerChanged means a credential belongs to another authorization
// server than the one the MCP server's metadata names now.
var ErrIssuerChanged = errors.New("mcpauth: the credential was issued by another authorization server")

func recheckKey(id string) string { return "oauth:mcp:recheck:" + id }

// bindingKey names the record of the issuer a credential is bound to.
func bindingKey(credential string) string { return issuerKey("issued", credential) }

// recheck answers a 401 from the MCP server id to userID's token, with its
// challenge ch: unless another 401 did within recheckInterval, the server is
// discovered again, and when it moved to another authorization server its
// record says so (which every instance's provider follows at its next use)
// and userID's tokens for it are deleted.
func (c *Connector) recheck(ctx context.Context, userID, id string, ch Challenge) error {
	took, err := c.kv.SetNX(ctx, recheckKey(id), []byte("1"), recheckInterval)
	if err != nil || !took {
		return err
	}
	old, _, err := c.readServer(ctx, id)
	if err != nil || old == nil {
		return err // not connected: the next Connect discovers it afresh
	}
	fresh, err := c.rediscover(ctx, id, old, ch)
	if err != nil || verifiedIssuer(&fresh.Discovery) == verifiedIssuer(&old.Discovery) {
		return err
	}
	return c.cfg.Module.Tokens.DeleteTokens(ctx, userID, id)
}

// carriesToken reports whether req, to the server at serverURL, carried a
// bearer token: the user's, since only the token store gives one (through
// Tokens.Transport, or the SDK's token source, OAuthHandler.TokenSource).
func carriesToken(req *http.Request, serverURL string) bool {
	s, err := url.Parse(serverURL)
	return req != nil && err == nil && outbound.SameOrigin(req.URL, s) &&
		(strings.HasPrefix(req.Header.Get("Authorization"), "Bearer ") || strings.HasPrefix(req.Header.Get("Authorization"), "DPoP "))
}

// bindGrant binds the credential of ts that the store revokes on a
// disconnect and refreshes with (its refresh token, else the one it was
// refreshed with, which it keeps, else its access token) to the verified
// issuer of s, which issued it. A connection keeps one binding: a rotated
// refresh token's replaces the one it was refreshed with, and one of an
// access token alone lives as long as the token. A write that fails leaves
// the grant unbound: refused once the server moves.
func (c *Connector) bindGrant(ctx context.Context, ts *oauthflow.TokenSet, refreshedWith string, s *server) {
	if ts == nil {
		return
	}
	credential, ttl := cmp.Or(ts.RefreshToken, refreshedWith), nameTTL
	if credential == "" {
		credential = ts.AccessToken
		if ts.ExpiresIn > 0 {
			ttl = time.Duration(ts.ExpiresIn)*time.Second + time.Minute
		}
	}
	_ = c.kv.Set(ctx, bindingKey(credential), []byte(verifiedIssuer(&s.Discovery)), ttl)
	if credential != refreshedWith {
		c.unbind(ctx, refreshedWith)
	}
}

// unbind deletes the binding of a credential the store no longer holds:
// rotated away, refused as a dead grant, or revoked on a disconnect.
func (c *Connector) unbind(ctx context.Context, credential string) {
	if credential != "" {
		_ = c.kv.Del(ctx, bindingKey(credential))
	}
}

// issuedHere checks that credential may be sent to the authorization server
// of s: bound to its verified issuer, or bound to none while s never moved.
// It wraps ErrIssuerChanged when it may not.
func (c *Connector) issuedHere(ctx context.Context, credential string, s *server) error {
	b, err := c.kv.Get(ctx, bindingKey(credential))
	switch {
	case errors.Is(err, oauthflow.ErrNotFound):
		if s.Moved.IsZero() {
			return nil
		}
		return fmt.Errorf("%w: %s is the server's issuer since %s, and the credential is not bound to it",
			ErrIssuerChanged, verifiedIssuer(&s.Discovery), s.Moved.Format(time.RFC3339))
	case err != nil:
		return err
	case string(b) != verifiedIssuer(&s.Discovery):
		return fmt.Errorf("%w: it is %s's, and the server's issuer is %s", ErrIssuerChanged, b, verifiedIssuer(&s.Discovery))
	}
	return nil
}

// bindSignIn binds the sign-in behind authURL, by its PKCE challenge, to
// the issuer of s it is sent to. The first URL of a sign-in binds it: one
// built again (oauthflow's /start does) after the server moved is bound to
// the old issuer still, and its code is exchanged nowhere.
func (c *Connector) bindSignIn(authURL string, s *server) {
	u, err := url.Parse(authURL)
	if err != nil || u.Query().Get("code_challenge") == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = c.kv.SetNX(ctx, bindingKey(u.Query().Get("code_challenge")), []byte(verifiedIssuer(&s.Discovery)), signInBindingTTL)
}

// signInHere checks that the sign-in whose PKCE verifier is verifier went to
// the authorization server of s.
func (c *Connector) signInHere(ctx context.Context, verifier string, s *server) error {
	if verifier == "" {
		return nil
	}
	return c.issuedHere(ctx, oauth2.S256ChallengeFromVerifier(verifier), s)
}

// signedIn deletes the binding of the sign-in whose verifier is verifier:
// its code was exchanged, and is spent.
func (c *Connector) signedIn(ctx context.Context, verifier string) {
	if verifier != "" {
		c.unbind(ctx, oauth2.S256ChallengeFromVerifier(verifier))
	}
}
