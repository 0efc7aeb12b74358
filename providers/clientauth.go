package providers

import (
	"net/http"

	"github.com/oauthflow/oauthflow/internal/clientauth"
)

// This file implements private_key_jwt client authentication (RFC 7523
// §2.2, RFC 7521 §4.2) for a client whose Credentials carry a SigningKey:
// every request in which the client authenticates (the code exchange, a
// refresh, a pushed authorization request, a revocation, a device
// authorization and a device token request) carries client_id and a client
// assertion, never a secret or a Basic header. The assertion is added by a
// transport closest to the network, under a grant's DPoP proofs, so that
// each request sent, the retry after a DPoP nonce challenge included, is
// signed anew with a jti of its own: a server that remembers jtis takes
// each assertion once.

// validateKey checks the private_key_jwt part of the credentials for cfg: a
// key goes without a secret, with the issuer its assertions are for, and
// with form token requests; KeyID and SigningAlg go with a key.
func (c Credentials) validateKey(cfg Config) error {
	switch {
	case c.SigningKey == nil && (c.KeyID != "" || c.SigningAlg != ""):
		return invalid("%s: KeyID and SigningAlg go with a SigningKey", cfg.ID)
	case c.SigningKey == nil:
		return nil
	case c.ClientSecret != "":
		return invalid("%s: a client authenticates with its secret or with its key (private_key_jwt), never both: set ClientSecret or SigningKey", cfg.ID)
	case cfg.Issuer == "":
		return invalid("%s: private_key_jwt needs the provider's Issuer, the assertion's audience", cfg.ID)
	case cfg.JSONTokenRequest:
		return invalid("%s: private_key_jwt sends its assertion in a form (RFC 7523 §2.2), and the provider takes JSON token requests", cfg.ID)
	}
	return nil
}

// signer is what signs the client's assertions for the provider cfg
// describes, or nil for a client without a SigningKey. validateKey has
// checked c.
func (c Credentials) signer(cfg Config) (*clientauth.Signer, error) {
	if c.SigningKey == nil {
		return nil, nil
	}
	s, err := clientauth.NewSigner(clientauth.Config{ClientID: c.ClientID, Audience: cfg.Issuer,
		Key: c.SigningKey, KeyID: c.KeyID, Alg: c.SigningAlg})
	if err != nil {
		return nil, invalid("%s: SigningKey: %w", cfg.ID, err)
	}
	return s, nil
}

// clientTransport is the transport of a request in which the client
// authenticates: the provider's, adding a fresh client assertion to each
// request when the client signs them.
func (p *OAuth2) clientTransport() http.RoundTripper { return p.asserting(transport(p.client)) }

// asserting is base adding a fresh client assertion to each request when
// the client signs them (Credentials.SigningKey), base itself otherwise.
func (p *OAuth2) asserting(base http.RoundTripper) http.RoundTripper {
	if p.signer == nil {
		return base
	}
	return &assertionTransport{base: base, signer: p.signer, cfg: &p.cfg}
}

// authenticating is the provider's client for a request in which the
// client authenticates (a revocation, a device authorization).
func (p *OAuth2) authenticating() *http.Client {
	if p.signer == nil {
		return p.client
	}
	return &http.Client{Transport: p.clientTransport(), Timeout: p.client.Timeout, Jar: p.client.Jar, CheckRedirect: p.client.CheckRedirect}
}

// assertionTransport sets the client's authentication in the form of each
// request it sends: client_id (renamed as the provider names it) and a new
// client assertion.
type assertionTransport struct {
	base   http.RoundTripper
	signer *clientauth.Signer
	cfg    *Config // its renamed client_id (Config.ClientIDParam)
}

func (t *assertionTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	form, err := readForm(req)
	if err != nil {
		return nil, err
	}
	if err := t.signer.Authenticate(form); err != nil {
		return nil, err
	}
	t.cfg.renameForm(form)
	return t.base.RoundTrip(withBody(req, []byte(form.Encode()), "application/x-www-form-urlencoded"))
}
