package providers

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

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
	a, err := p.send(req)
	if err != nil {
		return err
	}
	if a.status >= 200 && a.status <= 299 {
		return nil
	}
	return p.revokeError(a)
}

func (p *OAuth2) revokeRequest(ctx context.Context, token, hint string) (*http.Request, error) {
	form := url.Values{"token": {token}}
	if hint != "" {
		form.Set("token_type_hint", hint)
	}
	req, err := p.clientRequest(ctx, p.cfg.RevocationURL, form, p.knownStyle())
	if err != nil {
		return nil, fmt.Errorf("providers: %s: revocation request: %w", p.cfg.ID, err)
	}
	req.Header.Set("Accept", "application/json")
	return req, nil
}

func (p *OAuth2) revokeError(a *answer) error {
	tr, err := decodeTokenResponse(a)
	if err != nil {
		return &oauthflow.ProviderError{ProviderID: p.cfg.ID, StatusCode: a.status}
	}
	return p.fail(a, tr, nil)
}
