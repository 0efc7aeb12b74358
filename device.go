package oauthflow

import "context"

// The device authorization grant (RFC 8628): a sign-in for an agent where no
// browser is. The agent shows a short user code and a verification URI; the
// user approves on any device; the token endpoint is polled with the device
// code until the user acts or the code expires.

// DeviceAuthorizer is a Provider that offers the device authorization grant.
type DeviceAuthorizer interface {
	// SupportsDeviceAuth reports whether the provider has a device
	// authorization endpoint.
	SupportsDeviceAuth() bool
	// DeviceAuth asks the device authorization endpoint for a device code
	// for scopes (RFC 8628 §3.1, §3.2).
	DeviceAuth(ctx context.Context, scopes []string) (*DeviceAuthorization, error)
	// DeviceToken asks the token endpoint once for the tokens of deviceCode
	// (RFC 8628 §3.4). While the user has not acted it fails with a
	// *ProviderError whose Code is "authorization_pending" or "slow_down";
	// "access_denied" and "expired_token" end the sign-in (§3.5).
	DeviceToken(ctx context.Context, deviceCode string) (*TokenSet, error)
}

// DeviceAuthorization is a device authorization endpoint's answer (RFC 8628
// §3.2). ExpiresIn and Interval are in seconds; an Interval of 0 means the
// server named none (poll every 5 seconds).
type DeviceAuthorization struct {
	DeviceCode              string `json:"deviceCode"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete,omitempty"`
	ExpiresIn               int64  `json:"expiresIn"`
	Interval                int64  `json:"interval,omitempty"`
}
