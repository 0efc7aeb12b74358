package dpop_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"testing"
)

var enc = base64.RawURLEncoding

// signer signs JWSs with ES256 on its own, so that the tests check the
// package's proofs and its verifier against code that is not the package's.
type signer struct {
	priv *ecdsa.PrivateKey
	jwk  map[string]any // public members only
}

func newSigner(t testing.TB) *signer {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	point, err := priv.PublicKey.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	return &signer{priv: priv, jwk: map[string]any{
		"kty": "EC", "crv": "P-256", "x": enc.EncodeToString(point[1:33]), "y": enc.EncodeToString(point[33:]),
	}}
}

// header is a valid proof header for s's key; callers change their copy.
func (s *signer) header() map[string]any {
	jwk := map[string]any{}
	for k, v := range s.jwk {
		jwk[k] = v
	}
	return map[string]any{"typ": "dpop+jwt", "alg": "ES256", "jwk": jwk}
}

// sign is the compact JWS of header and claims, marshalled as JSON.
func (s *signer) sign(t testing.TB, header, claims map[string]any) string {
	t.Helper()
	return s.signSegments(t, segment(t, header), segment(t, claims))
}

// signSegments signs two already encoded segments.
func (s *signer) signSegments(t testing.TB, header, payload string) string {
	t.Helper()
	digest := sha256.Sum256([]byte(header + "." + payload))
	r, sv, err := ecdsa.Sign(rand.Reader, s.priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, 64)
	r.FillBytes(sig[:32])
	sv.FillBytes(sig[32:])
	return header + "." + payload + "." + enc.EncodeToString(sig)
}

func segment(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return enc.EncodeToString(b)
}

// hashOf is base64url SHA-256, the form of ath and of a thumbprint.
func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return enc.EncodeToString(sum[:])
}

// decodeProof is a proof's header and claims, read without the package.
func decodeProof(t testing.TB, proof string) (header, claims map[string]any, sig []byte) {
	t.Helper()
	var parts [3][]byte
	n := 0
	for i, start := 0, 0; i <= len(proof); i++ {
		if i == len(proof) || proof[i] == '.' {
			if n == 3 {
				t.Fatalf("proof %q has more than three segments", proof)
			}
			b, err := enc.DecodeString(proof[start:i])
			if err != nil {
				t.Fatalf("segment %d: %v", n, err)
			}
			parts[n], n, start = b, n+1, i+1
		}
	}
	if n != 3 {
		t.Fatalf("proof %q has %d segments", proof, n)
	}
	if err := json.Unmarshal(parts[0], &header); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(parts[1], &claims); err != nil {
		t.Fatal(err)
	}
	return header, claims, parts[2]
}
