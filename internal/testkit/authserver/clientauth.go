package authserver

import (
	"crypto/subtle"
	"net/http"
	"net/url"
)

// authenticateClient identifies the client of a token, revocation, introspection,
// device authorization or pushed authorization request by client_secret_basic,
// client_secret_post, private_key_jwt (a client with a PublicKey, and only such a
// client), or, for a public client, its client_id alone.
func (s *Server) authenticateClient(r *http.Request, form url.Values) (*Client, *oauthError) {
	if form.Has("client_assertion") || form.Has("client_assertion_type") {
		return s.assertedClient(r, form)
	}
	id, secret, err := clientCredentials(r, form)
	if err != nil {
		return nil, err
	}
	client := s.clients[id]
	if client == nil || client.PublicKey != nil { // a client with a key authenticates with it alone
		return nil, errInvalidClient("client authentication failed")
	}
	if client.Public {
		if secret != "" {
			return nil, errInvalidClient("client authentication failed")
		}
		return client, nil
	}
	if subtle.ConstantTimeCompare([]byte(secret), []byte(client.Secret)) != 1 {
		return nil, errInvalidClient("client authentication failed")
	}
	return client, nil
}

// clientCredentials reads the client ID and secret from the Authorization header or
// the form; using both ways at once is an error (RFC 6749 §2.3).
func clientCredentials(r *http.Request, form url.Values) (id, secret string, err *oauthError) {
	if r.Header.Get("Authorization") == "" {
		if form.Get("client_id") == "" {
			return "", "", errInvalidClient("client authentication failed")
		}
		return form.Get("client_id"), form.Get("client_secret"), nil
	}
	id, secret, err = basicCredentials(r)
	if err != nil {
		return "", "", err
	}
	if form.Has("client_secret") {
		return "", "", errInvalidRequest("more than one client authentication method")
	}
	if formID := form.Get("client_id"); formID != "" && formID != id {
		return "", "", errInvalidRequest("client_id does not match the authenticated client")
	}
	return id, secret, nil
}

// basicCredentials decodes client_secret_basic: both parts are form-urlencoded
// before they are joined and base64-encoded (RFC 6749 §2.3.1).
func basicCredentials(r *http.Request) (id, secret string, err *oauthError) {
	rawID, rawSecret, ok := r.BasicAuth()
	if !ok {
		return "", "", errInvalidClient("unsupported Authorization header")
	}
	id, e1 := url.QueryUnescape(rawID)
	secret, e2 := url.QueryUnescape(rawSecret)
	if e1 != nil || e2 != nil || id == "" {
		return "", "", errInvalidClient("malformed client credentials")
	}
	return id, secret, nil
}
