package mcpauth_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// clientAssertionType is the client_assertion_type of a JWT client
// assertion (RFC 7523 §2.2).
const clientAssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// jwtClient is a private_key_jwt client with a fresh P-256 key, and the
// public key that verifies its assertions.
func jwtClient(t *testing.T) (mcpauth.Client, *ecdsa.PublicKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	return mcpauth.Client{ID: "agent-client", AuthMethod: "private_key_jwt", PrivateKeyPEM: pemKey}, &k.PublicKey
}

// authenticateClient reports whether r's client authenticated: with its
// Basic credentials, or, for a jwtClient, with a client assertion it
// verifies and whose jti it spends on the spot, as a server does that
// authenticates the client before it reads the DPoP proof: a jti is taken
// once (RFC 7523 §3 item 7), whatever the request's answer. It notes the
// assertion's jti in req.
func (f *dpopAS) authenticateClient(r *http.Request, req *grantRequest) bool {
	if f.clientKey == nil {
		id, secret, ok := r.BasicAuth()
		return ok && id == "agent-client" && secret == "agent-secret"
	}
	form := r.PostForm
	if form.Get("client_assertion_type") != clientAssertionType || form.Has("client_id") && form.Get("client_id") != f.client.ID {
		return false
	}
	jti, ok := f.verifyAssertion(form.Get("client_assertion"))
	req.clientJTI = jti
	if !ok {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.spent[jti] {
		return false
	}
	f.spent[jti] = true
	return true
}

// verifyAssertion checks a client assertion: ES256 by the client's key,
// issued by and about the client, for the fake's issuer, unexpired, with a
// jti, which it returns.
func (f *dpopAS) verifyAssertion(assertion string) (string, bool) {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return "", false
	}
	var header struct {
		Alg string `json:"alg"`
	}
	var claims struct {
		Iss, Sub, Aud, Jti string
		Exp                int64
	}
	for i, v := range []any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(raw, v) != nil {
			return "", false
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil || len(sig) != 64 || header.Alg != "ES256" {
		return claims.Jti, false
	}
	digest := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	signed := ecdsa.Verify(f.clientKey, digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	return claims.Jti, signed && claims.Iss == f.client.ID && claims.Sub == f.client.ID && claims.Aud == f.srv.URL &&
		claims.Exp > time.Now().Unix() && claims.Jti != ""
}

// A private_key_jwt client signs a new assertion for each transmission of
// a grant's token request: the retry after a use_dpop_nonce answer carries
// a jti of its own, so a server that takes each jti once grants it, at the
// first grant and when the token is fetched again on expiry (here by an
// instance that has not learned the nonce).
func TestGrantRetrySignsANewAssertion(t *testing.T) {
	t.Parallel()
	f := newDPoPAS(t, dpopOptions{dpop: true, nonces: true, jwtClient: true, expiresIn: 30}) // inside the store's skew: every read fetches a new token
	kv := oauthflow.NewMemoryKV()
	a, b := newDPoPInstance(t, kv, f, nil), newDPoPInstance(t, kv, f, nil)
	ctx := context.Background()
	id, err := a.conn.ConnectAsClient(ctx, f.srv.URL+"/mcp", "agent", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.mod.Tokens.GetValidAccessToken(ctx, "agent", id); err != nil {
		t.Fatal(err)
	}
	reqs, _ := f.seen()
	if len(reqs) != 4 {
		t.Fatalf("%d token requests, want a first grant and a refresh, each retried once with the nonce", len(reqs))
	}
	seen := map[string]bool{}
	for i, r := range reqs {
		if challenged := i%2 == 0; r.challenged != challenged || !challenged && r.jkt == "" {
			t.Errorf("request %d: challenged %t, proof taken %t; want a challenge, then a retry granted", i, r.challenged, r.jkt != "")
		}
		if r.clientJTI == "" || seen[r.clientJTI] {
			t.Errorf("request %d carried the client assertion jti %q, empty or sent before", i, r.clientJTI)
		}
		seen[r.clientJTI] = true
	}
}
