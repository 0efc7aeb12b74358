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
	"time"

	"github.com/oauthflow/oauthflow"
)

// Client registration, once per authorization server for every instance: the
// host app's pre-registered credentials for the issuer, else its Client ID
// Metadata Document where the server accepts one, else RFC 7591 dynamic
// registration. A dynamic registration is stored in the KV under the
// issuer (oauth:mcp:client:{hash}); the instance that registers holds a
// short lock, and the others wait for its record instead of registering
// again.

// Client is a client registration at an authorization server.
type Client struct {
	ID     string `json:"client_id"`
	Secret string `json:"client_secret,omitempty"`
	// AuthMethod is how the client authenticates at the token endpoint:
	// "none" (a public client), "client_secret_basic" or "client_secret_post".
	// "" means client_secret_basic with a secret, none without. A client
	// that reaches servers as itself (ConnectAsClient) may also use
	// "private_key_jwt".
	AuthMethod string `json:"token_endpoint_auth_method,omitempty"`
	// PrivateKeyPEM signs the client's assertions for private_key_jwt: a P-256
	// key (ES256) or an RSA key (RS256), PKCS#8, SEC 1 or PKCS#1. Never stored.
	PrivateKeyPEM string `json:"-"`
	SigningAlg    string `json:"-"` // "ES256" or "RS256"; "" follows the key
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
)

// issuerKey names a record of the authorization server issuer.
func issuerKey(kind, issuer string) string {
	sum := sha256.Sum256([]byte(issuer))
	return "oauth:mcp:" + kind + ":" + hex.EncodeToString(sum[:12])
}

// client returns the client to use at the authorization server md describes.
func (c *Connector) client(ctx context.Context, md ServerMetadata) (Client, error) {
	if cl, ok := c.preset(md); ok {
		return cl, nil
	}
	if md.RegistrationEndpoint == "" {
		return Client{}, fmt.Errorf("%w: %s offers no dynamic registration, and no client is configured for it (Config.Clients)", ErrRegistration, md.Issuer)
	}
	return c.registered(ctx, md)
}

// preset is the client the app gives for md's server: pre-registered for
// its issuer (or for every issuer, "*"), or the app's Client ID Metadata
// Document where the server accepts one. ok is false when a dynamic
// registration is needed.
func (c *Connector) preset(md ServerMetadata) (Client, bool) {
	if cl, ok := c.cfg.Clients[md.Issuer]; ok {
		return cl, true
	}
	if cl, ok := c.cfg.Clients["*"]; ok {
		return cl, true
	}
	if md.ClientIDMetadataDocumentSupported && c.cfg.ClientMetadataURL != "" {
		return Client{ID: c.cfg.ClientMetadataURL, AuthMethod: "none"}, true
	}
	return Client{}, false
}

// ErrRegistration means no client could be registered at an authorization server.
var ErrRegistration = errors.New("mcpauth: client registration failed")

// registered is the stored dynamic registration at md's server, made now
// if there is none: by this instance if it takes the lock, else by the one
// that holds it.
func (c *Connector) registered(ctx context.Context, md ServerMetadata) (Client, error) {
	key, lock := issuerKey("client", md.Issuer), issuerKey("reglock", md.Issuer)
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, time.Second) {
		if cl, ok, err := c.storedClient(ctx, key); err != nil || ok {
			return cl, err
		}
		owner := []byte(rand.Text()) // frees the lock only while it is still this instance's
		took, err := c.kv.SetNX(ctx, lock, owner, registrationLockTTL)
		if err != nil {
			return Client{}, err
		}
		if took {
			cl, err := c.register(ctx, md)
			if err == nil {
				err = c.storeClient(ctx, key, cl)
			}
			_, _ = c.kv.CompareAndDelete(ctx, lock, owner)
			return cl, err
		}
		select {
		case <-ctx.Done():
			return Client{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

func (c *Connector) storedClient(ctx context.Context, key string) (Client, bool, error) {
	b, err := c.kv.Get(ctx, key)
	if errors.Is(err, oauthflow.ErrNotFound) {
		return Client{}, false, nil
	}
	if err != nil {
		return Client{}, false, err
	}
	var cl Client
	if err := json.Unmarshal(b, &cl); err != nil || cl.ID == "" {
		return Client{}, false, nil // unreadable: registered again
	}
	return cl, true, nil
}

func (c *Connector) storeClient(ctx context.Context, key string, cl Client) error {
	b, _ := json.Marshal(cl)
	return c.kv.Set(ctx, key, b, 0)
}

// forgetClient drops the stored registration at issuer if it is still cl
// (the server answered invalid_client to it), so that the next sign-in
// registers again.
func (c *Connector) forgetClient(ctx context.Context, issuer string, cl Client) {
	b, _ := json.Marshal(cl)
	_, _ = c.kv.CompareAndDelete(ctx, issuerKey("client", issuer), b)
}

// register makes an RFC 7591 dynamic registration at md's server.
func (c *Connector) register(ctx context.Context, md ServerMetadata) (Client, error) {
	method := preferredAuthMethod(md.TokenEndpointAuthMethodsSupported)
	meta := map[string]any{
		"client_name":                c.cfg.ClientName,
		"redirect_uris":              []string{c.cfg.RedirectURL},
		"grant_types":                []string{"authorization_code", "refresh_token"},
		"response_types":             []string{"code"},
		"token_endpoint_auth_method": method,
	}
	if loopback(c.cfg.RedirectURL) {
		meta["application_type"] = "native" // RFC 8252 §7.3: an http loopback redirect is a native app's
	}
	body, _ := json.Marshal(meta)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, md.RegistrationEndpoint, bytes.NewReader(body))
	if err != nil {
		return Client{}, fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return Client{}, fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxRegistration))
	if err != nil {
		return Client{}, fmt.Errorf("%w: %w", ErrRegistration, err)
	}
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		return Client{}, fmt.Errorf("%w: %s answered HTTP %d", ErrRegistration, md.RegistrationEndpoint, resp.StatusCode)
	}
	var cl Client
	if err := json.Unmarshal(raw, &cl); err != nil || cl.ID == "" {
		return Client{}, fmt.Errorf("%w: %s answered no client_id", ErrRegistration, md.RegistrationEndpoint)
	}
	if cl.AuthMethod == "" {
		cl.AuthMethod = method
	}
	return cl, nil
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
	h := p.Hostname()
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
}
