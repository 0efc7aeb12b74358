package providers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"unicode"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
)

// This file implements pushed authorization requests (RFC 9126): the
// parameters of a sign-in's authorization request go to the provider's PAR
// endpoint in a POST that authenticates the client, and the browser is sent
// to the authorization endpoint with client_id and the request_uri that
// stands for them, nothing else. What the request asks for (scopes, redirect
// URI, state, PKCE challenge, dpop_jkt) never travels in a URL, where a
// browser extension, a proxy log or a referrer could read or change it.

// maxRequestURILen bounds a request_uri taken from a PAR answer: it goes
// into the URL the browser is sent to.
const maxRequestURILen = 2048

// PushesAuthorization reports whether the provider's sign-ins are pushed:
// it has a pushed authorization request endpoint (Config.PushedAuthURL).
func (p *OAuth2) PushesAuthorization() bool { return p.cfg.PushedAuthURL != "" }

// PushAuthorization pushes the authorization request of a sign-in (RFC 9126
// §2) and returns the URL the browser is sent to, which carries client_id
// and the answer's request_uri only. The pushed request holds every
// parameter BuildAuthURL(scopes, state, opts...) would put in the URL
// (response_type, client_id, redirect_uri, scope, state, the PKCE challenge,
// dpop_jkt, AuthParams), and the client authenticates as at the token
// endpoint. When ctx is that of a grant bound to a key
// (oauthflow.DPoPTransport), the request carries a proof of it, which binds
// the code to the key (RFC 9449 §10.1). Every failure is a
// *oauthflow.ProviderError, with the provider's error code when it sent
// one; a provider without the endpoint fails with ErrPARUnsupported.
func (p *OAuth2) PushAuthorization(ctx context.Context, scopes []string, state string, opts ...oauth2.AuthCodeOption) (string, error) {
	if !p.PushesAuthorization() {
		return "", fmt.Errorf("%s: %w", p.cfg.ID, ErrPARUnsupported)
	}
	form, err := p.pushedForm(p.BuildAuthURL(scopes, state, opts...))
	if err != nil {
		return "", err
	}
	req, err := p.clientRequest(ctx, p.cfg.PushedAuthURL, form, p.knownStyle())
	if err != nil {
		return "", &oauthflow.ProviderError{ProviderID: p.cfg.ID, Err: err}
	}
	req.Header.Set("Accept", "application/json")
	a, err := p.sendWith(p.proving(ctx), req)
	if err != nil {
		return "", err
	}
	uri, err := p.parsePushed(a)
	if err != nil {
		return "", err
	}
	return p.pushedURL(uri), nil
}

// pushedForm is the authorization request of the URL BuildAuthURL built, as
// a form: its parameters, less those of the authorization endpoint's own
// address (Config.AuthURL's query), which the browser still carries.
func (p *OAuth2) pushedForm(built string) (url.Values, error) {
	if built == "" {
		return nil, fmt.Errorf("%w: %s has no redirect URL to sign in with", oauthflow.ErrInvalidArgument, p.cfg.ID)
	}
	u, err := url.Parse(built)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: authorization URL: %w", ErrInvalidConfig, p.cfg.ID, err)
	}
	form := u.Query()
	for k := range p.authEndpoint().Query() {
		form.Del(k)
	}
	return form, nil
}

// authEndpoint is Config.AuthURL, parsed (validate checked it).
func (p *OAuth2) authEndpoint() *url.URL {
	u, _ := url.Parse(p.cfg.AuthURL)
	return u
}

// pushedURL is the authorization endpoint with client_id and requestURI
// added to its own query, and nothing else (RFC 9126 §4).
func (p *OAuth2) pushedURL(requestURI string) string {
	u := p.authEndpoint()
	q := u.Query()
	q.Set("client_id", p.token.ClientID)
	q.Set("request_uri", requestURI)
	p.cfg.renameForm(q)
	u.RawQuery = q.Encode()
	return u.String()
}

// pushedAnswer is the part of a PAR endpoint's answer (RFC 9126 §2.2) the
// library uses: the request_uri. Its expires_in is the server's to enforce.
type pushedAnswer struct {
	RequestURI string `json:"request_uri"`
}

// parsePushed reads a PAR endpoint's answer and returns its request_uri. Its
// error fields are read as a token answer's (RFC 9126 §2.3), so a refusal is
// the ProviderError a token call would make of it.
func (p *OAuth2) parsePushed(a *answer) (string, error) {
	tr, err := decodeTokenResponse(a)
	if err != nil {
		return "", p.fail(a, nil, err)
	}
	p.cfg.ownError(a.status, tr)
	if failed(a.status, tr) {
		return "", p.fail(a, tr, nil)
	}
	var pa pushedAnswer
	if err := json.Unmarshal(a.body, &pa); err != nil {
		return "", p.fail(a, nil, fmt.Errorf("%w: pushed authorization: %w", ErrMalformedResponse, err))
	}
	if pa.RequestURI == "" || len(pa.RequestURI) > maxRequestURILen || strings.ContainsFunc(pa.RequestURI, unicode.IsControl) {
		return "", p.fail(a, nil, fmt.Errorf("%w: pushed authorization answer without a usable request_uri", ErrMalformedResponse))
	}
	return pa.RequestURI, nil
}
