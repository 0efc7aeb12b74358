package dpop

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

const (
	proofType = "dpop+jwt"
	algorithm = "ES256"
)

// proofHeader is a proof's JOSE header (RFC 9449 §4.2).
type proofHeader struct {
	Typ string `json:"typ"`
	Alg string `json:"alg"`
	JWK *JWK   `json:"jwk"`
}

// claims is a proof's payload (RFC 9449 §4.2). IAT is a float so that Verify
// reads any NumericDate; Proof always writes whole seconds.
type claims struct {
	JTI   string  `json:"jti"`
	HTM   string  `json:"htm"`
	HTU   string  `json:"htu"`
	IAT   float64 `json:"iat"`
	ATH   string  `json:"ath,omitempty"`
	Nonce string  `json:"nonce,omitempty"`
}

// Proof is a DPoP proof JWT for one request: method and target as sent,
// signed now. The target's query and fragment are left out of htu (RFC 9449
// §4.2), and so are its user info and its scheme's default port. A non-empty
// accessToken is bound by its hash (ath), for a resource request; a
// non-empty nonce is the DPoP-Nonce the server last sent.
func (k *Key) Proof(method, target string, now time.Time, accessToken, nonce string) (string, error) {
	if k == nil || k.priv == nil {
		return "", errors.New("dpop: proof without a key")
	}
	if method == "" {
		return "", errors.New("dpop: proof without a method")
	}
	htu, err := htuOf(target)
	if err != nil {
		return "", err
	}
	jti := make([]byte, 16)
	rand.Read(jti) // never fails (crypto/rand)
	c := claims{JTI: b64.EncodeToString(jti), HTM: method, HTU: htu, IAT: float64(now.Unix()), Nonce: nonce}
	if accessToken != "" {
		c.ATH = tokenHash(accessToken)
	}
	payload, err := json.Marshal(c)
	if err != nil {
		return "", fmt.Errorf("dpop: proof claims: %w", err)
	}
	return k.sign(k.header + "." + b64.EncodeToString(payload))
}

// sign appends the JWS signature of signingInput: r || s, 32 bytes each
// (RFC 7518 §3.4).
func (k *Key) sign(signingInput string) (string, error) {
	digest := sha256.Sum256([]byte(signingInput))
	r, s, err := ecdsa.Sign(rand.Reader, k.priv, digest[:])
	if err != nil {
		return "", fmt.Errorf("dpop: sign proof: %w", err)
	}
	sig := make([]byte, 2*coordSize)
	r.FillBytes(sig[:coordSize])
	s.FillBytes(sig[coordSize:])
	return signingInput + "." + b64.EncodeToString(sig), nil
}

// tokenHash is a proof's ath for accessToken: base64url SHA-256 of its ASCII.
func tokenHash(accessToken string) string {
	sum := sha256.Sum256([]byte(accessToken))
	return b64.EncodeToString(sum[:])
}
