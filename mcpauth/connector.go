package mcpauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/seal"
	"github.com/oauthflow/oauthflow/providers"
)

// Config wires a Connector.
type Config struct {
	// Module is the oauthflow module whose store, registry and sign-ins the
	// MCP servers' providers join. Required.
	Module *oauthflow.Module
	// RedirectURL is the module's callback URL as the authorization servers
	// see it ("https://api.example.com/api/v1/oauth/callback"). Required.
	RedirectURL string
	// ClientName is the name a dynamic registration gives (default "oauthflow").
	ClientName string
	// ClientMetadataURL is the https URL where the app serves its Client ID
	// Metadata Document; it is the client ID at servers that accept one.
	ClientMetadataURL string
	// Clients are pre-registered clients, by authorization server issuer; the
	// one under "*" serves every issuer that has none of its own, so it may
	// carry no secret (a public client, or private_key_jwt): any server may
	// name any authorization server, and New refuses a secret there. They
	// are read at each use and never stored; SetClients replaces them (a
	// rotated secret).
	Clients map[string]Client
	// CrossApp is the enterprise identity provider the app's users sign in
	// with, for servers they reach through it (ConnectCrossApp).
	CrossApp *CrossApp
	// Workload is the platform identity the app runs as (its JWT), for
	// servers an agent reaches as that workload with the JWT bearer grant
	// (ConnectAsWorkload, workload identity federation).
	Workload *Workload
	// HTTPClient makes discovery and registration requests and every call
	// of the providers it builds (default: a client with a 30 s timeout),
	// under the outbound policy ([ErrOutbound]): https only (plain http to
	// loopback hosts only, for local development), no redirects, no
	// private, link-local or other non-public address, a deadline on each
	// call. Its *http.Transport is cloned with its TLS and proxy settings;
	// another RoundTripper gets the URL rules only.
	HTTPClient *http.Client
	// AllowPrivateNetworks lets outbound calls reach private (RFC 1918,
	// unique local, shared) and loopback addresses under any name, for MCP
	// servers and authorization servers inside an internal network.
	// Link-local (cloud metadata), multicast and reserved addresses stay
	// refused.
	AllowPrivateNetworks bool
}

// Connector turns MCP server URLs into oauthflow providers. Make one per
// Module with New; it is safe for concurrent use.
type Connector struct {
	cfg     Config
	kv      oauthflow.KV
	ring    *seal.Ring // the module's: seals dynamic registrations; nil: plain
	http    *http.Client
	clients atomic.Pointer[map[string]Client] // Config.Clients, or what SetClients gave since
	nonces  dpop.Nonces                       // the last DPoP nonce of each authorization server, for first grants without a sign-in
}

// idPrefix starts the provider ID of every MCP server.
const idPrefix = "mcp-"

// maxIDHost bounds the host in a provider ID: with the prefix, the hash and
// the longest suffix ("-xaa") it fills a provider ID's 64 characters.
const maxIDHost = 64 - len(idPrefix) - 1 - 32 - len(xaaSuffix)

// New makes a Connector and has cfg.Module's registry rebuild, from the
// store, the provider of any MCP server that another instance connected.
func New(cfg Config) (*Connector, error) {
	if cfg.Module == nil {
		return nil, fmt.Errorf("%w: mcpauth.Config.Module is nil", oauthflow.ErrInvalidArgument)
	}
	if u, err := url.Parse(cfg.RedirectURL); err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: mcpauth.Config.RedirectURL %q is not an absolute URL", oauthflow.ErrInvalidArgument, cfg.RedirectURL)
	}
	if err := checkAnyIssuer(cfg.Clients); err != nil {
		return nil, err
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "oauthflow"
	}
	c := &Connector{cfg: cfg, kv: cfg.Module.KV, ring: seal.OfModule(cfg.Module), http: outboundClient(cfg)}
	c.SetClients(cfg.Clients)
	cfg.Module.Registry.AddResolver(idPrefix, c.resolve)
	return c, nil
}

// ProviderID is the provider ID of the MCP server at serverURL: "mcp-", its
// host (at most 23 characters of it), and 128 bits of a SHA-256 of its whole
// canonical URL, so that no server can be given another's ID. It is at most
// 60 characters, room for the "-cc" and "-xaa" suffixes within a provider
// ID's 64.
func ProviderID(serverURL string) (string, error) {
	resource, err := canonicalResource(serverURL)
	if err != nil {
		return "", err
	}
	u, _ := url.Parse(resource)
	host := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
			return r
		}
		return '-'
	}, u.Hostname())
	sum := sha256.Sum256([]byte(resource))
	return idPrefix + host[:min(len(host), maxIDHost)] + "-" + hex.EncodeToString(sum[:16]), nil
}

// Connect makes the MCP server at serverURL a provider of the module and
// returns its ID: discovery (with ch, the challenge of the server's 401 or
// 403, when there is one), the client registration, the provider
// registered. A server already connected, by any instance, is taken from the
// store as it is: the scopes a later challenge asks for reach the sign-in
// through the transport's ScopeError, not the provider's defaults.
func (c *Connector) Connect(ctx context.Context, serverURL string, ch Challenge) (string, error) {
	id, err := ProviderID(serverURL)
	if err != nil {
		return "", err
	}
	s, ok, err := c.load(ctx, id)
	if err != nil {
		return "", err
	}
	if !ok {
		if s, err = c.discoverServer(ctx, serverURL, ch); err != nil {
			return "", err
		}
		if err := c.save(ctx, id, s); err != nil {
			return "", err
		}
	}
	if _, err := c.cfg.Module.Registry.Get(id); err != nil {
		return "", err
	}
	return id, nil
}

// discoverServer discovers serverURL and registers a client for it.
func (c *Connector) discoverServer(ctx context.Context, serverURL string, ch Challenge) (*server, error) {
	d, err := discover(ctx, c.http, serverURL, ch)
	if err != nil {
		return nil, err
	}
	if _, err := c.client(ctx, d); err != nil {
		return nil, err
	}
	return &server{URL: serverURL, Discovery: *d, Scopes: defaultScopes(d, ch), Saved: time.Now()}, nil
}

// defaultScopes are the scopes a sign-in asks for: the challenge's, else the
// resource metadata's scopes_supported, else none (the server's default);
// offline_access besides where the authorization server offers it, for a
// refresh token.
func defaultScopes(d *Discovered, ch Challenge) []string {
	scopes := slices.Clone(ch.Scopes)
	if len(scopes) == 0 && d.PRM != nil {
		scopes = slices.Clone(d.PRM.ScopesSupported)
	}
	if slices.Contains(d.AS.ScopesSupported, "offline_access") && !slices.Contains(scopes, "offline_access") {
		scopes = append(scopes, "offline_access")
	}
	return scopes
}

// resolve rebuilds the provider of an MCP server another instance
// connected (or this one, since the registry let it go); the registry
// calls it for IDs under idPrefix.
func (c *Connector) resolve(id string) (oauthflow.Provider, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, ok, err := c.load(ctx, id)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: no MCP server is connected as %q", oauthflow.ErrUnknownProvider, id)
	}
	if grantID(id) {
		return c.clientProvider(id, s.Discovery, s.Scopes)
	}
	return c.build(ctx, id, s)
}

// oauth2 makes the oauth2 provider of s for the client cl.
func (c *Connector) oauth2(id string, s *server, cl Client) (*providers.OAuth2, error) {
	d := s.Discovery
	style := providers.AuthStyleHeader
	if m := cl.authMethod(); m == "client_secret_post" || m == "none" {
		style = providers.AuthStyleParams
	}
	u, _ := url.Parse(d.Resource)
	cfg := providers.Config{
		ID: id, DisplayName: u.Host,
		AuthURL: d.AS.AuthorizationEndpoint, TokenURL: d.AS.TokenEndpoint, RevocationURL: d.AS.RevocationEndpoint,
		Scopes: s.Scopes, AuthStyle: style, PKCE: providers.PKCERequired,
		AuthParams: map[string]string{"resource": d.Resource}, TokenParams: map[string]string{"resource": d.Resource},
	}
	cfg.Issuer, cfg.IssOptional = d.AS.Issuer, true                         // a callback naming another issuer is refused (mix-up)
	cfg.DPoP = slices.Contains(d.AS.DPoPSigningAlgValuesSupported, "ES256") // grants bound to a key (RFC 9449)
	if d.AS.IssParameterSupported {
		cfg.IssOptional = false // advertised (RFC 9207): a callback must carry it
	}
	creds, err := c.credentials(&d, cl)
	if err != nil {
		return nil, err
	}
	return providers.NewOAuth2(cfg, creds, providers.WithHTTPClient(c.http))
}

// credentials are cl's credentials for user sign-ins at d's authorization
// server: its secret, none for a public client, or its key for
// private_key_jwt. The provider's Issuer is both the audience of the
// client's assertions and the issuer a callback must name, so a key signs
// only for an issuer discovery proved: an assertion for an issuer a
// 2025-03-26 server merely claims would be good at the server it claims to
// be.
func (c *Connector) credentials(d *Discovered, cl Client) (providers.Credentials, error) {
	creds := providers.Credentials{ClientID: cl.ID, ClientSecret: cl.Secret, RedirectURL: c.cfg.RedirectURL}
	switch cl.authMethod() {
	case "none":
		creds.ClientSecret = ""
	case "private_key_jwt":
		if !d.issuerProven() {
			return providers.Credentials{}, fmt.Errorf("%w: %s claims the issuer %s, which no resource metadata proves; the app's private_key_jwt client signs users in only for a proven issuer",
				ErrRegistration, verifiedIssuer(d), d.AS.Issuer)
		}
		key, alg, err := signingKey(cl)
		if err != nil {
			return providers.Credentials{}, err
		}
		creds.ClientSecret, creds.SigningKey, creds.SigningAlg, creds.KeyID = "", key, alg, cl.KeyID
	}
	return creds, nil
}
