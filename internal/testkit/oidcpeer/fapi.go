package oidcpeer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/oauthflow/oauthflow/internal/clientauth"
)

// FAPI20 is Options.FAPI for the FAPI 2.0 Security Profile.
const FAPI20 = "2.0"

// The clients of a FAPI peer (Options.FAPI), which has no other. Both may use
// the redirect URIs of the peer's other clients.
const (
	// FAPIClient authenticates with private_key_jwt (RFC 7523): a client
	// assertion signed ES256 or PS256 with a key of Options.ClientJWKS, whose
	// aud is the issuer itself, never a list. Its pushed requests name it in
	// client_id too. Every token it gets is bound with DPoP: a token request
	// without a proof is refused invalid_grant. It may use the authorization
	// code, refresh token and device code grants.
	FAPIClient = "fapi-client"
	// FAPISecretClient is registered with client_secret_basic, a method a
	// FAPI peer does not take: every request naming it is answered 400
	// invalid_client_metadata, whatever secret it sends.
	FAPISecretClient = "fapi-secret-client"
	FAPISecret       = "fapi-secret"
)

// PaymentInitiation is the one type of authorization details (RFC 9396) a
// FAPI peer takes; any object of it is valid. The peer's consent grants the
// details requested, and the token response carries them.
const PaymentInitiation = "payment_initiation"

// ClientKey is an ES256 (ECDSA P-256) key FAPIClient signs its client
// assertions with.
type ClientKey struct {
	Private *ecdsa.PrivateKey
	KID     string // the key's kid, which its assertions name
}

// NewClientKey generates a ClientKey with a random kid.
func NewClientKey(t testing.TB) ClientKey {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("oidcpeer: generating a client key: %v", err)
	}
	return ClientKey{Private: priv, KID: rand.Text()}
}

// JWKS returns a JWKS (RFC 7517) of k's public key, for Options.ClientJWKS.
func (k ClientKey) JWKS(t testing.TB) string {
	t.Helper()
	point, err := k.Private.PublicKey.Bytes() // 0x04 || x || y
	if err != nil {
		t.Fatalf("oidcpeer: client key: %v", err)
	}
	b64 := base64.RawURLEncoding
	jwk := map[string]string{
		"kty": "EC", "crv": "P-256", "alg": "ES256", "use": "sig", "kid": k.KID,
		"x": b64.EncodeToString(point[1:33]), "y": b64.EncodeToString(point[33:]),
	}
	out, err := json.Marshal(map[string]any{"keys": []any{jwk}})
	if err != nil {
		t.Fatalf("oidcpeer: client JWKS: %v", err)
	}
	return string(out)
}

// PushedRequestURL returns the peer's pushed authorization request endpoint
// (RFC 9126).
func (p *Peer) PushedRequestURL() string { return p.issuer + "/request" }

// ExpirePushedRequest ends the lifetime of the pushed request requestURI
// now, as if its 60 seconds had passed (oidc-provider fixes a pushed
// request's lifetime): the authorization endpoint refuses it from then on,
// by the peer's own expiry check. It fails the test when the peer holds no
// such request.
func (p *Peer) ExpirePushedRequest(t testing.TB, requestURI string) {
	t.Helper()
	u := p.issuer + "/__control/expire-request?request_uri=" + url.QueryEscape(requestURI)
	resp, err := (&http.Client{Timeout: requestTimeout}).Post(u, "text/plain", nil)
	if err != nil {
		t.Fatalf("oidcpeer: expire-request: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("oidcpeer: expire-request: HTTP %d: %s", resp.StatusCode, body)
	}
}

// IntrospectWithKey asks the peer's RFC 7662 endpoint whether token is
// active, authenticating as FAPIClient with a client assertion signed with
// key (private_key_jwt, the one method a FAPI peer takes; Introspect's
// secrets are refused there).
func (p *Peer) IntrospectWithKey(t testing.TB, token string, key ClientKey) (active bool) {
	t.Helper()
	return p.introspectWithKey(t, token, key).Active
}

// BoundToWithKey is BoundTo for a FAPI peer: it authenticates as
// IntrospectWithKey does.
func (p *Peer) BoundToWithKey(t testing.TB, token string, key ClientKey) (jkt string) {
	t.Helper()
	answer := p.introspectWithKey(t, token, key)
	if !answer.Active {
		return ""
	}
	return answer.Cnf.JKT
}

func (p *Peer) introspectWithKey(t testing.TB, token string, key ClientKey) introspection {
	t.Helper()
	signer, err := clientauth.NewSigner(clientauth.Config{ClientID: FAPIClient, Audience: p.issuer, Key: key.Private, KeyID: key.KID})
	if err != nil {
		t.Fatalf("oidcpeer: client assertion signer: %v", err)
	}
	form := url.Values{"token": {token}}
	if err := signer.Authenticate(form); err != nil {
		t.Fatalf("oidcpeer: client assertion: %v", err)
	}
	return p.postIntrospection(t, form, FAPIClient, func(*http.Request) {})
}
