package oauthflow

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
)

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

// GrantDevice is the OAuthWorkflowArgs.Grant that runs the device
// authorization grant; "" runs the authorization-code sign-in.
const GrantDevice = "device"

// ErrDeviceAuthUnsupported is StartDeviceSignIn's error for a provider that
// offers no device authorization grant (not a DeviceAuthorizer, or one
// whose SupportsDeviceAuth is false).
var ErrDeviceAuthUnsupported = fmt.Errorf("oauthflow: the provider offers no device authorization grant: %w", errors.ErrUnsupported)

// Device sign-in timings.
const (
	jobDevice             = "device"        // the worker's job that polls a device sign-in's token endpoint
	defaultDeviceInterval = 5 * time.Second // RFC 8628 §3.2: the interval when the server names none
	slowDownStep          = 5 * time.Second // RFC 8628 §3.5: what each slow_down adds to the interval
	maxDeviceInterval     = 5 * time.Minute // the most a server's interval is honoured to
	maxDeviceLifetime     = time.Hour       // the longest a device code is polled, whatever the server says
	maxUserCodeLen        = 64              // a user code longer than this is not one a person types
	maxVerificationURILen = 2048            // nor a URI longer than this one to show
	maxDeviceCodeLen      = 4096            // bounds what the run keeps of the server's device code
)

// deviceBackoff spaces the polls of a device sign-in whose token endpoint
// failed transiently (network, 5xx, 429): never sooner than the interval.
var deviceBackoff = Backoff{First: 5 * time.Second, Max: time.Minute, Jitter: 0.2}

// deviceRun is a device sign-in's poll state, kept in its run's data (so
// every instance reads it, and each poll's outcome is saved with the run
// under the run's lock). The device code and the DPoP key are secrets: they
// are sealed, bound to the run, when encryption is on.
type deviceRun struct {
	Code       string `json:"code"`
	Key        string `json:"key,omitempty"` // the key the grant will be bound to (DPoPProvider)
	Interval   int64  `json:"interval"`      // seconds between polls, raised by slow_down
	ExpiresAt  int64  `json:"expiresAt"`     // Unix ms: the code is dead then
	NextPollAt int64  `json:"nextPollAt"`    // Unix ms: no poll before it
	Failures   int    `json:"failures,omitempty"`
}

// deviceSecretName binds a device sign-in's sealed secrets to its run.
func deviceSecretName(runID string) string { return keyspace.Run(runID) + ":device" }

// deviceAuthorizer is p as a DeviceAuthorizer whose grant is on, else nil.
func deviceAuthorizer(p Provider) DeviceAuthorizer {
	if d, ok := p.(DeviceAuthorizer); ok && d.SupportsDeviceAuth() {
		return d
	}
	return nil
}

func callDeviceAuth(ctx context.Context, d DeviceAuthorizer, scopes []string) (a *DeviceAuthorization, err error) {
	defer errs.Recover(&err, "provider DeviceAuth")
	return d.DeviceAuth(ctx, scopes)
}

// checkDeviceAuth refuses an answer the user could not act on, or whose
// links are not web pages: the prompt shows them as they are.
func checkDeviceAuth(provider string, a *DeviceAuthorization) error {
	bad := func(what string) error {
		return &ProviderError{ProviderID: provider, Err: fmt.Errorf("the device authorization answer's %s is not valid", what)}
	}
	switch {
	case a == nil || a.DeviceCode == "" || len(a.DeviceCode) > maxDeviceCodeLen:
		return bad("device code")
	case a.UserCode == "" || len(a.UserCode) > maxUserCodeLen || strings.ContainsFunc(a.UserCode, unshowable):
		return bad("user code")
	case !webURL(a.VerificationURI):
		return bad("verification URI")
	case a.VerificationURIComplete != "" && !webURL(a.VerificationURIComplete):
		return bad("complete verification URI")
	}
	return nil
}

// webURL reports whether s is an absolute http(s) URL short enough to show,
// and shown as it reads.
func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && len(s) <= maxVerificationURILen && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" &&
		!strings.ContainsFunc(s, unshowable)
}

// errDeviceExpired ends a device sign-in whose code expired.
var errDeviceExpired = &FlowError{Message: "The sign-in code expired. Start the sign-in again.", Err: ErrSessionNotFound}
