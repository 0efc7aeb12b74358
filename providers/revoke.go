package providers

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/oauthflow/oauthflow"
)

// CanRevoke reports whether the provider has an RFC 7009 revocation endpoint.
// Without one RevokeToken returns ErrRevocationUnsupported, which also
// matches errors.Is(err, errors.ErrUnsupported).
func (p *OAuth2) CanRevoke() bool { return p.cfg.RevocationURL != "" }

// RevokeToken revokes token (RFC 7009); hint is "refresh_token",
// "access_token" or "". The client authenticates as at the token endpoint; a
// public client sends only client_id. A provider's refusal is a
// *oauthflow.ProviderError; RFC 7009 servers answer 200 for unknown tokens.
func (p *OAuth2) RevokeToken(ctx context.Context, token, hint string) error {
	if !p.CanRevoke() {
		return fmt.Errorf("%s: %w", p.cfg.ID, ErrRevocationUnsupported)
	}
	if token == "" {
		return fmt.Errorf("%w: empty token", oauthflow.ErrInvalidArgument)
	}
	req, err := p.revokeRequest(ctx, token, hint)
	if err != nil {
		return err
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return &oauthflow.ProviderError{ProviderID: p.cfg.ID, Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return &oauthflow.ProviderError{ProviderID: p.cfg.ID, StatusCode: resp.StatusCode, Err: err}
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return nil
	}
	return p.revokeError(&answer{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: body})
}

func (p *OAuth2) revokeRequest(ctx context.Context, token, hint string) (*http.Request, error) {
	form := url.Values{"token": {token}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	id, secret := p.token.ClientID, p.token.ClientSecret
	basic := secret != "" && p.cfg.AuthStyle != AuthStyleParams
	if !basic {
		form.Set("client_id", id)
		if secret != "" {
			form.Set("client_secret", secret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.cfg.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, fmt.Errorf("providers: %s: revocation request: %w", p.cfg.ID, err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret)) // RFC 6749 §2.3.1
	}
	return req, nil
}

func (p *OAuth2) revokeError(a *answer) error {
	tr, err := decodeTokenResponse(a)
	if err != nil {
		return &oauthflow.ProviderError{ProviderID: p.cfg.ID, StatusCode: a.status}
	}
	return p.fail(a, tr, nil)
}
