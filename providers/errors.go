package providers

import (
	"errors"
	"fmt"
	"strings"

	"github.com/oauthflow/oauthflow"
)

// Sentinel errors callers branch on with errors.Is.
var (
	// ErrMissingParam: a catalog template value (tenant, domain, shop, ...) is
	// neither in Credentials.Params nor defaulted. The message names it.
	ErrMissingParam = fmt.Errorf("providers: missing template parameter: %w", oauthflow.ErrInvalidArgument)
	// ErrMissingEnv: FromEnv found no value for required variables. The
	// error is a *MissingEnvError, which names every one of them.
	ErrMissingEnv = fmt.Errorf("providers: missing environment variable: %w", oauthflow.ErrInvalidArgument)
	// ErrInvalidConfig: a Config or Credentials value is unusable (empty ID,
	// relative URL, unknown auth style, ...).
	ErrInvalidConfig = fmt.Errorf("providers: invalid configuration: %w", oauthflow.ErrInvalidArgument)
	// ErrRevocationUnsupported: the provider has no RFC 7009 revocation
	// endpoint. It wraps errors.ErrUnsupported, so code that cannot import this
	// package (the root oauthflow package) can test for it too.
	ErrRevocationUnsupported = fmt.Errorf("providers: no revocation endpoint: %w", errors.ErrUnsupported)
	// ErrDeviceAuthUnsupported: the provider has no RFC 8628 device
	// authorization endpoint (Config.DeviceAuthURL); SupportsDeviceAuth tells
	// in advance. It wraps errors.ErrUnsupported.
	ErrDeviceAuthUnsupported = fmt.Errorf("providers: no device authorization endpoint: %w", oauthflow.ErrDeviceAuthUnsupported)
	// ErrPARUnsupported: the provider has no RFC 9126 pushed authorization
	// request endpoint (Config.PushedAuthURL); PushesAuthorization tells in
	// advance. It wraps errors.ErrUnsupported.
	ErrPARUnsupported = fmt.Errorf("providers: no pushed authorization request endpoint: %w", errors.ErrUnsupported)
	// ErrMalformedResponse: the token endpoint answered with a body that is
	// not a token response (not JSON or form data, or a wrong field type),
	// the device authorization endpoint with one that is not a device
	// authorization (no device_code, user_code or http(s) verification_uri),
	// or the pushed authorization request endpoint with one without a usable
	// request_uri.
	ErrMalformedResponse = errors.New("providers: malformed token response")
	// ErrNoAccessToken: a successful-looking token response carried no access_token.
	ErrNoAccessToken = errors.New("providers: token response without access_token")
	// ErrTokenType: the token response names a token_type this package cannot
	// use as a bearer token (for example "mac" or "DPoP").
	ErrTokenType = errors.New("providers: unsupported token_type")
	// ErrDiscovery: authorization server metadata could not be fetched or is unusable.
	ErrDiscovery = errors.New("providers: discovery failed")
	// ErrIssuerMismatch: the metadata names an issuer other than the one asked
	// for (RFC 8414 §3.3); the metadata is rejected.
	ErrIssuerMismatch = fmt.Errorf("%w: issuer mismatch", ErrDiscovery)
)

// MissingEnvError names every variable FromEnv needed and did not find, each
// with what it is for when the catalog says. It matches ErrMissingEnv and
// oauthflow.ErrInvalidArgument with errors.Is.
type MissingEnvError struct {
	Names []string // "GITHUB_CLIENT_ID", "KEYCLOAK_REALM (the realm name)", ...
}

func (e *MissingEnvError) Error() string {
	if len(e.Names) == 1 {
		return "providers: missing environment variable: " + e.Names[0]
	}
	return "providers: missing environment variables: " + strings.Join(e.Names, ", ")
}

// Is reports whether target is ErrMissingEnv or what it wraps.
func (e *MissingEnvError) Is(target error) bool {
	return target == ErrMissingEnv || target == oauthflow.ErrInvalidArgument
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...)
}
