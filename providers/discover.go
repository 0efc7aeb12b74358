package providers

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

// metadata is the part of RFC 8414 / OpenID Connect Discovery metadata used here.
type metadata struct {
	Issuer                      string   `json:"issuer"`
	AuthorizationEndpoint       string   `json:"authorization_endpoint"`
	TokenEndpoint               string   `json:"token_endpoint"`
	RevocationEndpoint          string   `json:"revocation_endpoint"`
	DeviceAuthorizationEndpoint string   `json:"device_authorization_endpoint"` // RFC 8628 §4
	CodeChallengeMethods        []string `json:"code_challenge_methods_supported"`
	IssParameterSupported       bool     `json:"authorization_response_iss_parameter_supported"`
	DPoPSigningAlgs             []string `json:"dpop_signing_alg_values_supported"`
	TokenAuthMethods            []string `json:"token_endpoint_auth_methods_supported"`
	ScopesSupported             []string `json:"scopes_supported"`
	PAREndpoint                 string   `json:"pushed_authorization_request_endpoint"` // RFC 9126 §5
	RequirePAR                  bool     `json:"require_pushed_authorization_requests"` // RFC 9126 §5
}

// Discover builds a provider from the authorization server's metadata:
// RFC 8414 (/.well-known/oauth-authorization-server, inserted before the
// issuer's path) first, then OpenID Connect Discovery
// (/.well-known/openid-configuration, appended to it). Metadata whose
// "issuer" is not exactly issuer is rejected with ErrIssuerMismatch.
//
// From the metadata: the endpoints, revocation_endpoint,
// device_authorization_endpoint (Config.DeviceAuthURL),
// require_pushed_authorization_requests (Config.RequirePAR) with
// pushed_authorization_request_endpoint (Config.PushedAuthURL: every sign-in
// is then pushed; metadata that requires PAR and names no endpoint is
// refused). An endpoint the server offers without requiring it is left
// unused: a pushed request lives about a minute and a sign-in's link ten,
// so set Config.PushedAuthURL to push anyway; PKCE is
// supported only when code_challenge_methods_supported lists S256; Issuer()
// is the issuer only when authorization_response_iss_parameter_supported is
// true (RFC 9207); HTTP Basic unless the server lists only
// client_secret_post; default scopes ["openid"] when scopes_supported lists
// it (WithScopes overrides). Metadata that requires pushed authorization
// requests, sends iss, binds tokens with DPoP (ES256) and lists only the
// FAPI 2.0 client authentication methods describes a server that runs that
// profile: the provider is built under ProfileFAPI2, as under
// WithProfile(ProfileFAPI2), which also pushes to a PAR endpoint the server
// does not require. Pass WithHTTPClient: it serves the discovery request and
// every later token call.
func Discover(ctx context.Context, id, issuer string, c Credentials, opts ...Option) (*OAuth2, error) {
	o := collect(opts)
	if err := checkURL("issuer", issuer); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrDiscovery, err)
	}
	md, err := fetchMetadata(ctx, o.client, issuer)
	if err != nil {
		return nil, err
	}
	if o.profile == ProfileNone && md.advertisesFAPI2() {
		o.profile = ProfileFAPI2
		opts = append(opts, WithProfile(ProfileFAPI2))
	}
	cfg, err := md.config(id, issuer, o.profile)
	if err != nil {
		return nil, err
	}
	return NewOAuth2(cfg, c, append(opts, WithHTTPClient(o.client))...)
}

// wellKnown returns the metadata URLs to try, in order.
func wellKnown(issuer string) []string {
	u, _ := url.Parse(issuer) // checked by the caller
	path := strings.TrimSuffix(u.EscapedPath(), "/")
	origin := u.Scheme + "://" + u.Host
	return []string{
		origin + "/.well-known/oauth-authorization-server" + path,
		origin + path + "/.well-known/openid-configuration",
	}
}

func fetchMetadata(ctx context.Context, client *http.Client, issuer string) (*metadata, error) {
	var errs []error
	for _, u := range wellKnown(issuer) {
		md, err := getMetadata(ctx, client, u)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if md.Issuer != issuer {
			return nil, fmt.Errorf("%w: asked for %q, %s names %q", ErrIssuerMismatch, issuer, u, md.Issuer)
		}
		return md, nil
	}
	return nil, fmt.Errorf("%w: %w", ErrDiscovery, errors.Join(errs...))
}

func getMetadata(ctx context.Context, client *http.Client, u string) (*metadata, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	var md metadata
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxBody)).Decode(&md); err != nil {
		return nil, fmt.Errorf("%s: %w", u, err)
	}
	return &md, nil
}

func (md *metadata) config(id, issuer string, profile Profile) (Config, error) {
	cfg := Config{
		ID:            id,
		DisplayName:   id,
		AuthURL:       md.AuthorizationEndpoint,
		TokenURL:      md.TokenEndpoint,
		RevocationURL: md.RevocationEndpoint,
		DeviceAuthURL: md.DeviceAuthorizationEndpoint,
		RequirePAR:    md.RequirePAR,
		AuthStyle:     AuthStyleHeader,
		PKCE:          PKCEUnsupported,
	}
	if err := md.checkEndpoints(issuer); err != nil {
		return Config{}, err
	}
	if md.RequirePAR || profile == ProfileFAPI2 {
		cfg.PushedAuthURL = md.PAREndpoint
	}
	if slices.Contains(md.CodeChallengeMethods, "S256") {
		cfg.PKCE = PKCESupported
	}
	// The issuer is recorded with each sign-in whether or not the server
	// sends iss: a callback naming another issuer is refused either way
	// (RFC 9207, the MCP 2026-07-28 revision's SEP-2468).
	cfg.Issuer, cfg.IssOptional = issuer, !md.IssParameterSupported
	if slices.Contains(md.DPoPSigningAlgs, "ES256") {
		cfg.DPoP = true
	}
	if !slices.Contains(md.TokenAuthMethods, "client_secret_basic") && slices.Contains(md.TokenAuthMethods, "client_secret_post") {
		cfg.AuthStyle = AuthStyleParams
	}
	if slices.Contains(md.ScopesSupported, "openid") {
		cfg.Scopes = []string{"openid"}
	}
	return cfg, nil
}

// checkEndpoints: both required endpoints present; an https issuer's
// endpoints must all be https.
func (md *metadata) checkEndpoints(issuer string) error {
	if md.AuthorizationEndpoint == "" || md.TokenEndpoint == "" {
		return fmt.Errorf("%w: %s: metadata lacks authorization_endpoint or token_endpoint", ErrDiscovery, issuer)
	}
	if !strings.HasPrefix(issuer, "https://") {
		return nil
	}
	for _, e := range []string{md.AuthorizationEndpoint, md.TokenEndpoint, md.RevocationEndpoint, md.DeviceAuthorizationEndpoint, md.PAREndpoint} {
		if e != "" && !strings.HasPrefix(e, "https://") {
			return fmt.Errorf("%w: %s: endpoint %q is not https", ErrDiscovery, issuer, e)
		}
	}
	return nil
}
