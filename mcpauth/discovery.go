package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// Discovery: from an MCP server's URL (and the challenge of its 401, when
// there is one) to its protected resource metadata (RFC 9728) and its
// authorization server's metadata (RFC 8414, then OpenID Connect Discovery),
// in the order the MCP authorization spec gives. A server without resource
// metadata is taken the 2025-03-26 way: its origin is its authorization
// server, with the default endpoints when that has no metadata either.

// maxMetadata bounds a metadata document.
const maxMetadata = 1 << 20

// ErrDiscovery means the server's authorization could not be discovered, or
// what was discovered cannot be used safely (an issuer or a resource that is
// not the one asked for, no PKCE S256).
var ErrDiscovery = errors.New("mcpauth: discovery failed")

// ResourceMetadata is an MCP server's protected resource metadata (RFC 9728).
type ResourceMetadata struct {
	Resource             string   `json:"resource"`
	AuthorizationServers []string `json:"authorization_servers,omitempty"`
	ScopesSupported      []string `json:"scopes_supported,omitempty"`
}

// ServerMetadata is an authorization server's metadata (RFC 8414; the parts used here).
type ServerMetadata struct {
	Issuer                            string   `json:"issuer"`
	AuthorizationEndpoint             string   `json:"authorization_endpoint"`
	TokenEndpoint                     string   `json:"token_endpoint"`
	RegistrationEndpoint              string   `json:"registration_endpoint,omitempty"`
	RevocationEndpoint                string   `json:"revocation_endpoint,omitempty"`
	ScopesSupported                   []string `json:"scopes_supported,omitempty"`
	GrantTypesSupported               []string `json:"grant_types_supported,omitempty"`
	CodeChallengeMethodsSupported     []string `json:"code_challenge_methods_supported,omitempty"`
	TokenEndpointAuthMethodsSupported []string `json:"token_endpoint_auth_methods_supported,omitempty"`
	TokenEndpointAuthSigningAlgs      []string `json:"token_endpoint_auth_signing_alg_values_supported,omitempty"`
	ClientIDMetadataDocumentSupported bool     `json:"client_id_metadata_document_supported,omitempty"`
	IssParameterSupported             bool     `json:"authorization_response_iss_parameter_supported,omitempty"`
	DPoPSigningAlgValuesSupported     []string `json:"dpop_signing_alg_values_supported,omitempty"`
}

// Challenge is what a 401 or 403's WWW-Authenticate: Bearer says.
type Challenge struct {
	ResourceMetadata string   // resource_metadata: where the resource metadata is
	Scopes           []string // scope: what the request needs
	Error            string   // error: invalid_token, insufficient_scope, ...
}

// ParseChallenge reads the Bearer challenge of h's WWW-Authenticate; ok is
// false when there is none.
func ParseChallenge(h http.Header) (c Challenge, ok bool) {
	for _, v := range h.Values("WWW-Authenticate") {
		params, found := challengeParams(v, "bearer")
		if !found {
			params, found = challengeParams(v, "dpop") // a server that takes DPoP-bound tokens (RFC 9449 §7.1)
		}
		if !found {
			continue
		}
		c.ResourceMetadata, c.Error = params["resource_metadata"], params["error"]
		if scope := strings.Fields(params["scope"]); len(scope) > 0 {
			c.Scopes = scope
		}
		return c, true
	}
	return Challenge{}, false
}

// challengeParams parses the auth-params of the challenge of scheme
// (lowercase) in v (RFC 9110 §11.6.1): name=token or name="quoted string",
// comma separated.
func challengeParams(v, scheme string) (map[string]string, bool) {
	i, n := indexFold(v, scheme), len(scheme) // in v's own bytes: lowercasing can change a string's length
	if i < 0 || (i > 0 && v[i-1] != ' ' && v[i-1] != ',') || (len(v) > i+n && v[i+n] != ' ' && v[i+n] != ',') {
		return nil, false
	}
	rest, params := v[i+n:], map[string]string{}
	for {
		rest = strings.TrimLeft(rest, " ,")
		eq := strings.IndexByte(rest, '=')
		if eq <= 0 {
			return params, true
		}
		name := strings.ToLower(strings.TrimSpace(rest[:eq]))
		if strings.ContainsAny(name, " ,") {
			return params, true // the next challenge's scheme
		}
		rest = strings.TrimLeft(rest[eq+1:], " ")
		var val string
		if strings.HasPrefix(rest, `"`) {
			var b strings.Builder
			j := 1
			for ; j < len(rest) && rest[j] != '"'; j++ {
				if rest[j] == '\\' && j+1 < len(rest) {
					j++
				}
				b.WriteByte(rest[j])
			}
			val, rest = b.String(), rest[min(j+1, len(rest)):]
		} else {
			end := strings.IndexByte(rest, ',')
			if end < 0 {
				end = len(rest)
			}
			val, rest = strings.TrimSpace(rest[:end]), rest[end:]
		}
		params[name] = val
	}
}

// indexFold is the index of the first ASCII-case-insensitive match of word
// (lowercase ASCII) in s, or -1.
func indexFold(s, word string) int {
	for i := 0; i+len(word) <= len(s); i++ {
		match := true
		for j := range len(word) {
			c := s[i+j]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			if c != word[j] {
				match = false
				break
			}
		}
		if match {
			return i
		}
	}
	return -1
}

// Discovered is what discovery found for one MCP server. What the server
// and its metadata say is input: AS.Issuer is proven only when the resource
// metadata names the authorization server and that server's own metadata
// names the same issuer (RFC 8414 §3.3). For a 2025-03-26 server (PRM nil)
// the metadata comes from the server's origin, which is the only identity
// proven, whatever issuer it claims: credentials (Config.Clients), stored
// registrations and a client assertion's audience are chosen by that
// origin, never by a claim.
type Discovered struct {
	Resource string            // the resource indicator to send (RFC 8707): the server's canonical URL
	PRM      *ResourceMetadata // nil for a 2025-03-26 server without resource metadata
	AS       ServerMetadata
}

// issuerProven reports whether d.AS.Issuer is the issuer discovery proved:
// named by the resource metadata, or, for a 2025-03-26 server, its origin.
func (d *Discovered) issuerProven() bool {
	return d.PRM != nil || strings.TrimSuffix(d.AS.Issuer, "/") == originOf(d.Resource)
}

// originOf is u's scheme://host[:port], lowercase and without the
// scheme's default port, or "" when u is not an absolute URL.
func originOf(u string) string {
	p, err := url.Parse(u)
	if err != nil || p.Host == "" {
		return ""
	}
	scheme, host := strings.ToLower(p.Scheme), strings.ToLower(p.Host)
	if port := p.Port(); (scheme == "https" && port == "443") || (scheme == "http" && port == "80") {
		host = strings.TrimSuffix(host, ":"+port)
	}
	return scheme + "://" + host
}

// canonicalResource is the server's URL as a resource indicator: scheme and
// host lowercased, no fragment; the path kept (no trailing slash added).
func canonicalResource(server string) (string, error) {
	u, err := url.Parse(server)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return "", fmt.Errorf("%w: %q is not an http(s) URL", ErrDiscovery, server)
	}
	u.Scheme, u.Host, u.Fragment, u.RawFragment = strings.ToLower(u.Scheme), strings.ToLower(u.Host), "", ""
	return u.String(), nil
}

// discover finds server's resource and authorization server metadata; ch is
// the challenge of the server's 401, when there was one.
func discover(ctx context.Context, client *http.Client, server string, ch Challenge) (*Discovered, error) {
	resource, err := canonicalResource(server)
	if err != nil {
		return nil, err
	}
	if err := namedURL(resource, resource); err != nil {
		return nil, err
	}
	prm, err := fetchResourceMetadata(ctx, client, resource, ch.ResourceMetadata)
	if errors.Is(err, errNoMetadata) {
		return discoverLegacy(ctx, client, resource)
	}
	if err != nil {
		return nil, err
	}
	declared, ok := covering(prm.Resource, resource)
	if !ok {
		return nil, fmt.Errorf("%w: the resource metadata names %q, which is not %q or a parent of it", ErrDiscovery, prm.Resource, resource)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("%w: the resource metadata of %s names no authorization server", ErrDiscovery, resource)
	}
	if err := namedURL(prm.AuthorizationServers[0], resource); err != nil {
		return nil, err
	}
	as, err := fetchServerMetadata(ctx, client, prm.AuthorizationServers[0])
	if err != nil {
		return nil, err
	}
	if err := as.endpointsFit(resource); err != nil {
		return nil, err
	}
	return &Discovered{Resource: declared, PRM: prm, AS: *as}, nil
}

// covering returns the metadata's resource, canonical, when it is the
// server's resource or a parent of it (same origin, a path prefix at a
// segment boundary): a server at /mcp may be protected as its whole origin.
// That resource is the one sign-ins name.
func covering(declared, resource string) (string, bool) {
	d, err := canonicalResource(declared)
	if err != nil {
		return "", false
	}
	du, _ := url.Parse(d)
	ru, _ := url.Parse(resource)
	if du.Scheme != ru.Scheme || du.Host != ru.Host || du.RawQuery != "" {
		return "", false
	}
	parent, path := strings.TrimSuffix(du.EscapedPath(), "/"), strings.TrimSuffix(ru.EscapedPath(), "/")
	if path != parent && !strings.HasPrefix(path, parent+"/") {
		return "", false
	}
	return d, true
}

// errNoMetadata means no well-known URL served resource metadata.
var errNoMetadata = errors.New("mcpauth: no resource metadata")

// fetchResourceMetadata gets the resource metadata from the challenge's URL,
// else from the well-known URLs: the path-aware one, then the root.
func fetchResourceMetadata(ctx context.Context, client *http.Client, resource, fromChallenge string) (*ResourceMetadata, error) {
	if fromChallenge != "" {
		if originOf(fromChallenge) != originOf(resource) {
			return nil, fmt.Errorf("%w: the challenge names resource metadata at %q, off the server's origin %s", ErrDiscovery, fromChallenge, originOf(resource))
		}
		var prm ResourceMetadata
		if err := getJSON(ctx, client, fromChallenge, &prm); err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDiscovery, err)
		}
		return &prm, nil
	}
	u, _ := url.Parse(resource) // canonical already
	origin, path := u.Scheme+"://"+u.Host, strings.TrimSuffix(u.EscapedPath(), "/")
	urls := []string{origin + "/.well-known/oauth-protected-resource"}
	if path != "" {
		urls = append([]string{origin + "/.well-known/oauth-protected-resource" + path}, urls...)
	}
	for _, wk := range urls {
		var prm ResourceMetadata
		err := getJSON(ctx, client, wk, &prm)
		if err == nil {
			return &prm, nil
		}
		if !errors.Is(err, errNotThere) {
			return nil, fmt.Errorf("%w: %w", ErrDiscovery, err)
		}
	}
	return nil, errNoMetadata
}

// serverMetadataURLs are the URLs of issuer's metadata, in the MCP spec's
// order: RFC 8414 and OpenID Connect with the path inserted after the
// well-known prefix, then OpenID Connect with it appended.
func serverMetadataURLs(issuer string) ([]string, error) {
	u, err := url.Parse(issuer)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%w: issuer %q is not a URL", ErrDiscovery, issuer)
	}
	origin, path := u.Scheme+"://"+u.Host, strings.TrimSuffix(u.EscapedPath(), "/")
	if path == "" {
		return []string{origin + "/.well-known/oauth-authorization-server", origin + "/.well-known/openid-configuration"}, nil
	}
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + "/.well-known/openid-configuration" + path,
		origin + path + "/.well-known/openid-configuration",
	}, nil
}

// fetchServerMetadata gets issuer's metadata and checks it: the issuer it
// names is issuer, and it offers PKCE with S256.
func fetchServerMetadata(ctx context.Context, client *http.Client, issuer string) (*ServerMetadata, error) {
	urls, err := serverMetadataURLs(issuer)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, u := range urls {
		var md ServerMetadata
		err := getJSON(ctx, client, u, &md)
		if errors.Is(err, errNotThere) {
			errs = append(errs, err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrDiscovery, err)
		}
		if strings.TrimSuffix(md.Issuer, "/") != strings.TrimSuffix(issuer, "/") {
			return nil, fmt.Errorf("%w: %s names the issuer %q, not %q", ErrDiscovery, u, md.Issuer, issuer)
		}
		if err := md.usable(); err != nil {
			return nil, err
		}
		return &md, nil
	}
	return nil, fmt.Errorf("%w: no metadata for the authorization server %s: %w", ErrDiscovery, issuer, errors.Join(errs...))
}

// usable checks what a sign-in needs of the metadata.
func (md *ServerMetadata) usable() error {
	if md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" {
		return fmt.Errorf("%w: the metadata of %s lacks an authorization or token endpoint", ErrDiscovery, md.Issuer)
	}
	if !slices.Contains(md.CodeChallengeMethodsSupported, "S256") {
		return fmt.Errorf("%w: the authorization server %s does not advertise PKCE S256", ErrDiscovery, md.Issuer)
	}
	return nil
}

// discoverLegacy is discovery for a 2025-03-26 server: its origin is the
// authorization server, whose metadata is at the root well-known URL or,
// failing that, whose endpoints are /authorize, /token and /register.
func discoverLegacy(ctx context.Context, client *http.Client, resource string) (*Discovered, error) {
	u, _ := url.Parse(resource)
	origin := u.Scheme + "://" + u.Host
	var md ServerMetadata
	err := getJSON(ctx, client, origin+"/.well-known/oauth-authorization-server", &md)
	switch {
	case errors.Is(err, errNotThere):
		md = ServerMetadata{Issuer: origin, AuthorizationEndpoint: origin + "/authorize", TokenEndpoint: origin + "/token",
			RegistrationEndpoint: origin + "/register", CodeChallengeMethodsSupported: []string{"S256"}}
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrDiscovery, err)
	default:
		if err := md.usable(); err != nil {
			return nil, err
		}
		if err := md.endpointsFit(resource); err != nil {
			return nil, err
		}
	}
	return &Discovered{Resource: resource, AS: md}, nil
}

// errNotThere is a metadata URL that answered 404 (or another 4xx).
var errNotThere = errors.New("mcpauth: not found")

// getJSON GETs u and decodes its JSON into v. A 4xx is errNotThere.
func getJSON(ctx context.Context, client *http.Client, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode >= 400 && resp.StatusCode < 500:
		return fmt.Errorf("%w: %s: HTTP %d", errNotThere, u, resp.StatusCode)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxMetadata)).Decode(v); err != nil {
		return fmt.Errorf("%s: %w", u, err)
	}
	return nil
}

// namedURL checks a URL that the MCP server at server (its canonical URL),
// or its metadata, names: https, or plain http to a loopback host for a
// server that is itself plain http on a loopback host (local development);
// and a loopback host only for a server on one, so that a public server's
// metadata cannot point this backend at the machine it runs on. An https
// server never downgrades: plain http would carry codes, verifiers and
// secrets in the clear, even to a loopback port (another local process may
// listen there). The outbound policy checks the addresses when it dials.
func namedURL(raw, server string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || u.User != nil {
		return fmt.Errorf("%w: %q is not an absolute URL", ErrDiscovery, raw)
	}
	s, _ := url.Parse(server) // canonical already
	lb, local := loopbackHost(u.Hostname()), loopbackHost(s.Hostname())
	switch {
	case lb && !local:
		return fmt.Errorf("%w: %s is on a loopback host, named for a server that is not", ErrDiscovery, u.Redacted())
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && lb && s.Scheme == "http":
		return nil
	case u.Scheme == "http" && lb:
		return fmt.Errorf("%w: %s is plain http, named for the https server %s (an https server's endpoints are https)", ErrDiscovery, u.Redacted(), server)
	}
	return fmt.Errorf("%w: %s is not https (plain http is for loopback hosts only)", ErrDiscovery, u.Redacted())
}

// endpointsFit checks each endpoint the metadata names with namedURL, for
// the MCP server at server: an https server's metadata naming an http
// endpoint would send codes, verifiers and secrets in the clear.
func (md *ServerMetadata) endpointsFit(server string) error {
	for _, e := range []string{md.AuthorizationEndpoint, md.TokenEndpoint, md.RegistrationEndpoint, md.RevocationEndpoint} {
		if e == "" {
			continue
		}
		if err := namedURL(e, server); err != nil {
			return fmt.Errorf("%w (in the metadata of %s)", err, md.Issuer)
		}
	}
	return nil
}
