package mcpauth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
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
	// one under "*" serves every issuer that has none of its own.
	Clients map[string]Client
	// CrossApp is the enterprise identity provider the app's users sign in
	// with, for servers they reach through it (ConnectCrossApp).
	CrossApp *CrossApp
	// HTTPClient makes discovery and registration requests and every call
	// of the providers it builds (default: a client with a 30 s timeout).
	HTTPClient *http.Client
}

// Connector turns MCP server URLs into oauthflow providers. Make one per
// Module with New; it is safe for concurrent use.
type Connector struct {
	cfg  Config
	kv   oauthflow.KV
	http *http.Client
}

// idPrefix starts the provider ID of every MCP server.
const idPrefix = "mcp-"

// New makes a Connector and has cfg.Module's registry rebuild, from the
// store, the provider of any MCP server that another instance connected.
func New(cfg Config) (*Connector, error) {
	if cfg.Module == nil {
		return nil, fmt.Errorf("%w: mcpauth.Config.Module is nil", oauthflow.ErrInvalidArgument)
	}
	if u, err := url.Parse(cfg.RedirectURL); err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: mcpauth.Config.RedirectURL %q is not an absolute URL", oauthflow.ErrInvalidArgument, cfg.RedirectURL)
	}
	if cfg.ClientName == "" {
		cfg.ClientName = "oauthflow"
	}
	c := &Connector{cfg: cfg, kv: cfg.Module.KV, http: cfg.HTTPClient}
	if c.http == nil {
		c.http = &http.Client{Timeout: 30 * time.Second}
	}
	cfg.Module.Registry.AddResolver(idPrefix, c.resolve)
	return c, nil
}

// ProviderID is the provider ID of the MCP server at serverURL: "mcp-", its
// host, and a hash of its whole canonical URL.
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
	return idPrefix + host[:min(len(host), 40)] + "-" + hex.EncodeToString(sum[:6]), nil
}

// server is what the store keeps of an MCP server: enough to rebuild its
// provider on any instance.
type server struct {
	URL       string     `json:"url"`
	Discovery Discovered `json:"discovery"`
	Scopes    []string   `json:"scopes,omitempty"` // what a sign-in asks for by default
	Client    Client     `json:"client"`
	Saved     time.Time  `json:"saved"`
}

func serverKey(id string) string { return "oauth:mcp:server:" + id }

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
	cl, err := c.client(ctx, d.AS)
	if err != nil {
		return nil, err
	}
	return &server{URL: serverURL, Discovery: *d, Scopes: defaultScopes(d, ch), Client: cl, Saved: time.Now()}, nil
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

func (c *Connector) load(ctx context.Context, id string) (*server, bool, error) {
	b, err := c.kv.Get(ctx, serverKey(id))
	if errors.Is(err, oauthflow.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	var s server
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, false, nil // unreadable: discovered again
	}
	return &s, true, nil
}

func (c *Connector) save(ctx context.Context, id string, s *server) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return c.kv.Set(ctx, serverKey(id), b, 0)
}

// resolve rebuilds the provider of an MCP server another instance
// connected; the registry calls it for IDs under idPrefix.
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
	if strings.HasSuffix(id, ccSuffix) || strings.HasSuffix(id, xaaSuffix) {
		return c.clientProvider(id, s.Discovery, s.Scopes)
	}
	return c.build(id, s)
}

// build makes the provider of s.
func (c *Connector) build(id string, s *server) (oauthflow.Provider, error) {
	inner, err := c.oauth2(id, s)
	if err != nil {
		return nil, err
	}
	p := &serverProvider{c: c, id: id}
	p.inner.Store(inner)
	_, preset := c.preset(s.Discovery.AS)
	p.dynamic.Store(!preset)
	return p, nil
}

// oauth2 makes the oauth2 provider of s, for its current client.
func (c *Connector) oauth2(id string, s *server) (*providers.OAuth2, error) {
	d, cl := s.Discovery, s.Client
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
	cfg.Issuer, cfg.IssOptional = d.AS.Issuer, true // a callback naming another issuer is refused (mix-up)
	if d.AS.IssParameterSupported {
		cfg.IssOptional = false // advertised (RFC 9207): a callback must carry it
	}
	secret := cl.Secret
	if cl.authMethod() == "none" {
		secret = ""
	}
	return providers.NewOAuth2(cfg, providers.Credentials{ClientID: cl.ID, ClientSecret: secret, RedirectURL: c.cfg.RedirectURL},
		providers.WithHTTPClient(c.http))
}
