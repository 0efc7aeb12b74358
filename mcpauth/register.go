package mcpauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"
)

// Client registration, once per authorization server for every instance: the
// host app's pre-registered credentials for the issuer (read from the
// Connector at each use, never stored), else its Client ID Metadata Document
// where the server accepts one, else RFC 7591 dynamic registration.
//
// A dynamic registration is stored under the issuer discovery verified
// (oauth:mcp:client:{hash}), never under one a server's metadata only
// claims, sealed with the module's key ring, with its provenance: the
// issuer, the registration endpoint and the server whose discovery made it,
// and when. It is used only while that provenance matches the current
// discovery and until the expiry the server gave its secret; else it is
// replaced. The instance that registers holds a short lock (an owner token,
// freed by compare-and-delete), and the others wait for its record instead
// of registering again.

// Client is a client registration at an authorization server.
type Client struct {
	ID     string `json:"client_id"`
	Secret string `json:"client_secret,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint:
	// "none" (a public client), "client_secret_basic" or "client_secret_post".
	// "" means client_secret_basic with a secret, none without. A client
	// that reaches servers as itself (ConnectAsClient) or signs users in may
	// also use "private_key_jwt"; a user's sign-in with it needs an issuer
	// discovery proved (its assertions are for that issuer).
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"`
	// PrivateKeyPEM signs the client's assertions for private_key_jwt: a P-256
	// key (ES256), an RSA key (RS256, or PS256 when named) or an Ed25519 key
	// (EdDSA), PKCS#8, SEC 1 or PKCS#1. Never stored.
	PrivateKeyPEM string `json:"-"`
	SigningAlg    string `json:"-"` // "ES256", "RS256", "PS256" or "EdDSA"; "" follows the key (RS256 for RSA)
	// KeyID is the kid in the header of the client's assertions: the ID of
	// PrivateKeyPEM's public half among the keys registered for the client
	// (its JWKS); "" sends none. Never stored.
	KeyID string `json:"-"`
}

// authMethod is c's token endpoint authentication, defaults applied.
func (c Client) authMethod() string {
	switch {
	case c.AuthMethod != "":
		return c.AuthMethod
	case c.Secret != "":
		return "client_secret_basic"
	}
	return "none"
}

const (
	registrationLockTTL = 30 * time.Second
	maxRegistration     = 64 << 10
	// expiryMargin retires a registration this long before its secret expires.
	expiryMargin = time.Minute
)

// issuerKey names a record of the authorization server issuer.
func issuerKey(kind, issuer string) string {
	sum := sha256.Sum256([]byte(issuer))
	return "oauth:mcp:" + kind + ":" + hex.EncodeToString(sum[:16])
}

// verifiedIssuer is the issuer discovery proved for d: the authorization
// server the resource metadata names (whose own metadata named itself), or
// for a 2025-03-26 server without resource metadata its origin, whatever
// issuer its metadata claims. Registrations and the app's clients are
// chosen by it.
func verifiedIssuer(d *Discovered) string {
	if d.PRM != nil {
		return strings.TrimSuffix(d.AS.Issuer, "/")
	}
	u, err := url.Parse(d.Resource)
	if err != nil {
		return d.Resource
	}
	return u.Scheme + "://" + u.Host
}

func registrationKey(d *Discovered) string  { return issuerKey("client", verifiedIssuer(d)) }
func registrationLock(d *Discovered) string { return issuerKey("reglock", verifiedIssuer(d)) }

// client returns the client to use at the authorization server of d.
func (c *Connector) client(ctx context.Context, d *Discovered) (Client, error) {
	if cl, ok := c.preset(d); ok {
		return cl, nil
	}
	if d.AS.RegistrationEndpoint == "" {
		return Client{}, fmt.Errorf("%w: %s offers no dynamic registration, and no client is configured for it (Config.Clients)", ErrRegistration, verifiedIssuer(d))
	}
	reg, err := c.registered(ctx, d)
	return reg.Client, err
}

// preset is the client the app gives for d's server: pre-registered for
// its verified issuer (or for every issuer, "*"), as the Connector holds
// them now, or the app's Client ID Metadata Document where the server
// accepts one. ok is false when a dynamic registration is needed.
func (c *Connector) preset(d *Discovered) (Client, bool) {
	if cl, ok := c.presetClient(verifiedIssuer(d)); ok {
		return cl, true
	}
	if d.AS.ClientIDMetadataDocumentSupported && c.cfg.ClientMetadataURL != "" {
		return Client{ID: c.cfg.ClientMetadataURL, AuthMethod: "none"}, true
	}
	return Client{}, false
}

// ErrRegistration means no client could be registered at an authorization server.
var ErrRegistration = errors.New("mcpauth: client registration failed")

// registered is the stored dynamic registration at d's server, made now
// if there is none that fits d: by this instance if it takes the lock, else
// by the one that holds it.
func (c *Connector) registered(ctx context.Context, d *Discovered) (registration, error) {
	key, lock := registrationKey(d), registrationLock(d)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if reg, _, ok, err := c.storedRegistration(ctx, key); err != nil || ok && reg.fits(d, time.Now()) {
			return reg, err
		}
		owner := []byte(rand.Text()) // frees the lock only while it is still this instance's
		took, err := c.kv.SetNX(ctx, lock, owner, registrationLockTTL)
		if err != nil {
			return registration{}, err
		}
		if took {
			reg, err := c.registerLocked(ctx, d, key)
			_, _ = c.kv.CompareAndDelete(ctx, lock, owner)
			return reg, err
		}
		select {
		case <-ctx.Done():
			return registration{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// registerLocked registers at d's server, under the registration lock,
// unless another instance stored a fitting registration since it was read.
func (c *Connector) registerLocked(ctx context.Context, d *Discovered, key string) (registration, error) {
	if reg, _, ok, err := c.storedRegistration(ctx, key); err != nil || ok && reg.fits(d, time.Now()) {
		return reg, err
	}
	reg, err := c.register(ctx, d)
	if err != nil {
		return registration{}, err
	}
	return reg, c.storeRegistration(ctx, key, reg)
}

// register makes an RFC 7591 dynamic registration at d's server.
func (c *Connector) register(ctx context.Context, d *Discovered) (registration, error) {
	md := d.AS
	method := preferredAuthMethod(md.TokenEndpointAuthMethodsSupported)
	meta := map[string]any{
		"client_name":                c.cfg.ClientName,
		"redirect_uris":              []string{c.cfg.RedirectURL},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
		// Named always, as the MCP 2026-07-28 revision requires (SEP-837):
		// an http loopback redirect is a native app's (RFC 8252 §7.3).
		"application_type": "web",
	}
	if loopback(c.cfg.RedirectURL) {
		meta["application_type"] = "native"
	}
	body, _ := json.Marshal(meta)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return registration{}, fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return registration{}, fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistration))
	if err != nil {
		return registration{}, fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return registration{}, fmt.Errorf("%w: %s answered HTTP %d", ErrRegistration, md.RegistrationEndpoint, resp.StatusCode)
	}
	return newRegistration(d, raw, method, time.Now())
}

// newRegistration reads a registration answer (raw) into a registration
// with its provenance: d's verified issuer and registration endpoint, the
// server, now, and the expiry the server gave the secret.
func newRegistration(d *Discovered, raw []byte, method string, now time.Time) (registration, error) {
	var answer struct {
		Client
		SecretExpiresAt int64 `json:"client_secret_expires_at"`
	}
	if err := json.Unmarshal(raw, &answer); err != nil || answer.ID == "" {
		return registration{}, fmt.Errorf("%w: %s answered no client_id", ErrRegistration, d.AS.RegistrationEndpoint)
	}
	if answer.AuthMethod == "" {
		answer.AuthMethod = method
	}
	reg := registration{Client: answer.Client, Issuer: verifiedIssuer(d), Endpoint: d.AS.RegistrationEndpoint,
		Server: d.Resource, At: now}
	if answer.SecretExpiresAt > 0 { // 0: never (RFC 7591 §3.2.1)
		reg.Expires = time.Unix(answer.SecretExpiresAt, 0)
	}
	return reg, nil
}

// preferredAuthMethod is the token endpoint authentication asked for at
// registration: none where the server offers it (PKCE protects the code),
// else a secret in the Basic header, else in the form; RFC 7591's default
// when the server lists none.
func preferredAuthMethod(supported []string) string {
	for _, m := range []string{"none", "client_secret_basic", "client_secret_post"} {
		if slices.Contains(supported, m) {
			return m
		}
	}
	return "client_secret_basic"
}

// loopback reports whether u is an http URL on a loopback host.
func loopback(u string) bool {
	p, err := url.Parse(u)
	if err != nil || p.Scheme != "http" {
		return false
	}
	return loopbackHost(p.Hostname())
}
