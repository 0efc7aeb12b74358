package providers

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/oauthflow/oauthflow"
)

// The device authorization grant (RFC 8628): DeviceAuth asks the device
// authorization endpoint (Config.DeviceAuthURL) for a device code, and
// DeviceToken asks the token endpoint once for the tokens of that code.

// deviceGrantType is the grant_type of a device token request (RFC 8628 §3.4).
const deviceGrantType = "urn:ietf:params:oauth:grant-type:device_code"

// deviceParams are the TokenParams also sent to the device authorization
// endpoint: they name what the tokens will be for (RFC 8707's resource,
// Auth0's audience), which the user approves there.
var deviceParams = []string{"resource", "audience"}

// SupportsDeviceAuth reports whether the provider has a device authorization
// endpoint (Config.DeviceAuthURL).
func (p *OAuth2) SupportsDeviceAuth() bool { return p.cfg.DeviceAuthURL != "" }

// DeviceAuth asks the device authorization endpoint for a device code for
// scopes (RFC 8628 §3.1): empty scopes mean DefaultScopes, joined with the
// provider's separator. The client authenticates as it does in DeviceToken (a
// public client sends its client_id only), and the resource and audience of
// TokenParams go along. Google's verification_url stands for
// verification_uri. Every failure is a *oauthflow.ProviderError, with the
// provider's error code when it sent one; a provider without the endpoint
// fails with ErrDeviceAuthUnsupported.
func (p *OAuth2) DeviceAuth(ctx context.Context, scopes []string) (*oauthflow.DeviceAuthorization, error) {
	if !p.SupportsDeviceAuth() {
		return nil, fmt.Errorf("%s: %w", p.cfg.ID, ErrDeviceAuthUnsupported)
	}
	req, err := p.clientRequest(ctx, p.cfg.DeviceAuthURL, p.deviceForm(scopes), p.knownStyle())
	if err != nil {
		return nil, &oauthflow.ProviderError{ProviderID: p.cfg.ID, Err: err}
	}
	req.Header.Set("Accept", "application/json") // GitHub answers form-encoded without it
	a, err := p.send(req)
	if err != nil {
		return nil, err
	}
	return p.parseDeviceAuth(a)
}

// deviceForm is the device authorization request without client authentication.
func (p *OAuth2) deviceForm(scopes []string) url.Values {
	v := url.Values{}
	if len(scopes) == 0 {
		scopes = p.cfg.Scopes
	}
	if len(scopes) > 0 {
		v.Set("scope", strings.Join(scopes, p.cfg.separator()))
	}
	for _, k := range deviceParams {
		if val, ok := p.cfg.TokenParams[k]; ok {
			v.Set(k, val)
		}
	}
	return v
}

// DeviceToken asks the token endpoint once for the tokens of deviceCode (RFC
// 8628 §3.4). It goes through the recorder of the other token calls, so
// TokenParams, JSON token requests, DPoP proofs and the reading of the answer
// are theirs: a success is the TokenSet a code exchange makes, a refusal a
// *oauthflow.ProviderError whose Code is the provider's, an "error" in an
// HTTP 200 answer (GitHub) included. While the user has not acted the Code is
// authorization_pending or slow_down; access_denied and expired_token end the
// sign-in (Microsoft says authorization_declined for a refusal).
func (p *OAuth2) DeviceToken(ctx context.Context, deviceCode string) (*oauthflow.TokenSet, error) {
	if !p.SupportsDeviceAuth() {
		return nil, fmt.Errorf("%s: %w", p.cfg.ID, ErrDeviceAuthUnsupported)
	}
	if deviceCode == "" {
		return nil, fmt.Errorf("%w: empty device code", oauthflow.ErrInvalidArgument)
	}
	v := url.Values{"grant_type": {deviceGrantType}, "device_code": {deviceCode}}
	req, err := p.clientRequest(ctx, p.cfg.TokenURL, v, p.knownStyle())
	if err != nil {
		return nil, &oauthflow.ProviderError{ProviderID: p.cfg.ID, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	c, w := p.recording(ctx, p.clientTransport())
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close() // read already, into w.last
	}
	return p.result(w, err)
}

// deviceResponse is a device authorization answer (RFC 8628 §3.2), with
// Google's verification_url beside verification_uri.
type deviceResponse struct {
	DeviceCode              string  `json:"device_code"`
	UserCode                string  `json:"user_code"`
	VerificationURI         string  `json:"verification_uri"`
	VerificationURL         string  `json:"verification_url"`
	VerificationURIComplete string  `json:"verification_uri_complete"`
	ExpiresIn               flexInt `json:"expires_in"`
	Interval                flexInt `json:"interval"`
}

// parseDeviceAuth reads a device authorization answer. Its error fields are
// read as a token answer's, so a refusal is the ProviderError a token call
// would make of it.
func (p *OAuth2) parseDeviceAuth(a *answer) (*oauthflow.DeviceAuthorization, error) {
	tr, err := decodeTokenResponse(a)
	if err != nil {
		return nil, p.fail(a, nil, err)
	}
	p.cfg.ownError(a.status, tr)
	if failed(a.status, tr) {
		return nil, p.fail(a, tr, nil)
	}
	var dr deviceResponse
	if err := json.Unmarshal(a.body, &dr); err != nil {
		return nil, p.fail(a, nil, fmt.Errorf("%w: device authorization: %w", ErrMalformedResponse, err))
	}
	da, err := dr.authorization()
	if err != nil {
		return nil, p.fail(a, nil, err)
	}
	return da, nil
}

// authorization checks the answer: a device code, a user code and a web
// verification URI, which the user is shown.
func (dr *deviceResponse) authorization() (*oauthflow.DeviceAuthorization, error) {
	uri := cmp.Or(dr.VerificationURI, dr.VerificationURL)
	switch {
	case dr.DeviceCode == "" || dr.UserCode == "":
		return nil, fmt.Errorf("%w: device authorization without device_code or user_code", ErrMalformedResponse)
	case !isWebURL(uri):
		return nil, fmt.Errorf("%w: verification_uri %q is not an http(s) URL", ErrMalformedResponse, uri)
	case dr.VerificationURIComplete != "" && !isWebURL(dr.VerificationURIComplete):
		return nil, fmt.Errorf("%w: verification_uri_complete %q is not an http(s) URL", ErrMalformedResponse, dr.VerificationURIComplete)
	}
	return &oauthflow.DeviceAuthorization{
		DeviceCode:              dr.DeviceCode,
		UserCode:                dr.UserCode,
		VerificationURI:         uri,
		VerificationURIComplete: dr.VerificationURIComplete,
		ExpiresIn:               int64(dr.ExpiresIn),
		Interval:                int64(dr.Interval),
	}, nil
}

// isWebURL reports whether s is an absolute http or https URL.
func isWebURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != ""
}
