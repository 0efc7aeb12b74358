package providers

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"

	"github.com/oauthflow/oauthflow/internal/clientauth"
)

// Profile names a security profile a provider keeps to: a set of rules its
// configuration and credentials must meet, checked once when the provider is
// built.
type Profile string

const (
	// ProfileNone (the zero value) is OAuth 2.0 as the provider's other
	// fields describe it.
	ProfileNone Profile = ""
	// ProfileFAPI2 is the OpenID Foundation's FAPI 2.0 Security Profile for
	// the authorization code flow: every sign-in is pushed (PAR, RFC 9126)
	// with a PKCE S256 challenge, the callback must carry the server's iss
	// (RFC 9207), every token is bound to a DPoP key (RFC 9449), the client
	// authenticates with a signed assertion (private_key_jwt, RFC 7523) and
	// never a secret, the redirect URI is one exact https address (or a
	// loopback one), and the response type is code alone. Its assertions are
	// signed PS256, ES256 or EdDSA, with an RSA key of 2048 bits at least. A
	// provider that breaks a rule is refused when built, with ErrProfile and
	// the rule's name.
	ProfileFAPI2 Profile = "fapi2"
)

// ErrProfile: a provider's configuration or credentials break a rule of its
// security profile (Config.Profile). The message names the rule.
var ErrProfile = fmt.Errorf("%w: breaks its security profile", ErrInvalidConfig)

// profileRule is one rule of a profile: its name, as the profile's text
// says it, and the check of a provider's configuration and credentials.
type profileRule struct {
	name  string
	check func(*Config, Credentials) error
}

// fapi2Rules are the client requirements of the FAPI 2.0 Security Profile
// (§5.3.3.1, §5.3.3.2 and §5.4.1 of the final text) that a configuration
// can break.
var fapi2Rules = []profileRule{
	{"FAPI 2.0 §5.3.3.2: shall use pushed authorization requests", func(c *Config, _ Credentials) error {
		if c.PushedAuthURL == "" {
			return errors.New("the provider has no PushedAuthURL")
		}
		return nil
	}},
	{"FAPI 2.0 §5.3.3.2: shall use PKCE with S256", func(c *Config, _ Credentials) error {
		if c.PKCE == PKCEUnsupported {
			return errors.New("the provider's PKCE is unsupported")
		}
		return nil
	}},
	{"FAPI 2.0 §5.3.3.2: shall check the iss parameter (RFC 9207)", func(c *Config, _ Credentials) error {
		if c.Issuer == "" || c.IssOptional {
			return errors.New("the provider has no Issuer whose iss every callback must carry")
		}
		return nil
	}},
	{"FAPI 2.0 §5.3.3.1: shall use sender-constrained access tokens (DPoP)", func(c *Config, _ Credentials) error {
		if !c.DPoP {
			return errors.New("the provider does not bind its tokens to a DPoP key")
		}
		return nil
	}},
	{"FAPI 2.0 §5.3.2.2: response_type shall be code", func(c *Config, _ Credentials) error {
		for k, v := range c.AuthParams {
			switch strings.ToLower(k) {
			case "response_type":
				if v != "code" {
					return fmt.Errorf("AuthParams sets response_type %q", v)
				}
			case "response_mode", "request", "request_uri":
				return fmt.Errorf("AuthParams sets %s", k)
			}
		}
		return nil
	}},
	{"FAPI 2.0 §5.3.3.1: shall authenticate with private_key_jwt", func(_ *Config, cr Credentials) error {
		if cr.SigningKey == nil || cr.ClientSecret != "" {
			return errors.New("the credentials have no SigningKey, or a ClientSecret")
		}
		return nil
	}},
	{"FAPI 2.0 §5.4.1: shall sign with PS256, ES256 or EdDSA, an RSA key of 2048 bits at least", func(_ *Config, cr Credentials) error {
		alg, err := clientauth.Algorithm(cr.SigningKey.Public(), cr.SigningAlg)
		if err != nil {
			return err
		}
		if alg == clientauth.RS256 {
			return errors.New("the assertions would be signed RS256")
		}
		if k, ok := cr.SigningKey.Public().(*rsa.PublicKey); ok && k.N.BitLen() < 2048 {
			return fmt.Errorf("an RSA key of %d bits", k.N.BitLen())
		}
		return nil
	}},
	{"FAPI 2.0 §5.3.3.2: one exact https redirect URI (http only for loopback, RFC 8252 §7.3)", func(_ *Config, cr Credentials) error {
		return checkProfileRedirect(cr.RedirectURL)
	}},
}

// checkProfile checks cfg and c against cfg.Profile's rules, and reports the
// first one broken, by name.
func checkProfile(cfg *Config, c Credentials) error {
	var rules []profileRule
	switch cfg.Profile {
	case ProfileNone:
		return nil
	case ProfileFAPI2:
		rules = fapi2Rules
	default:
		return invalid("%s: unknown profile %q", cfg.ID, cfg.Profile)
	}
	for _, r := range rules {
		if err := r.check(cfg, c); err != nil {
			return fmt.Errorf("%w: %s: %s: %s", ErrProfile, cfg.ID, r.name, err)
		}
	}
	return nil
}

// applyProfile sets what cfg's profile makes of the fields it leaves open:
// under FAPI 2.0 PKCE is required. (A provider with a PushedAuthURL pushes
// every sign-in already; the profile's rule is that it has one.)
func applyProfile(cfg *Config) {
	if cfg.Profile == ProfileFAPI2 && (cfg.PKCE == PKCEDefault || cfg.PKCE == PKCESupported) {
		cfg.PKCE = PKCERequired
	}
}

// checkProfileRedirect accepts an https redirect URI, or an http one whose
// host is a loopback address (a native app's, RFC 8252 §7.3), without
// anything that would make it less than one exact address.
func checkProfileRedirect(raw string) error {
	if raw == "" {
		return errors.New("the credentials have no RedirectURL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && loopbackHost(u.Hostname()):
	default:
		return fmt.Errorf("redirect URI %q is neither https nor http on a loopback address", raw)
	}
	if strings.Contains(raw, "*") {
		return fmt.Errorf("redirect URI %q has a wildcard", raw)
	}
	return nil
}

// loopbackHost reports whether host is localhost or a loopback IP address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// fapiAuthMethods are the client authentication methods the FAPI 2.0
// profile allows (§5.3.2.1): a server that lists only these, requires
// pushed authorization requests and binds tokens with DPoP runs the profile.
var fapiAuthMethods = []string{"private_key_jwt", "tls_client_auth", "self_signed_tls_client_auth"}

// advertisesFAPI2 reports whether md describes a server that runs the FAPI
// 2.0 profile for every client: it requires pushed authorization requests,
// sends iss, offers DPoP with ES256 and authenticates clients only in the
// profile's ways. No metadata field names the profile itself.
func (md *metadata) advertisesFAPI2() bool {
	if !md.RequirePAR || !md.IssParameterSupported || !slices.Contains(md.DPoPSigningAlgs, "ES256") || len(md.TokenAuthMethods) == 0 {
		return false
	}
	for _, m := range md.TokenAuthMethods {
		if !slices.Contains(fapiAuthMethods, m) {
			return false
		}
	}
	return true
}
