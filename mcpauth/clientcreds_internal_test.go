package mcpauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
)

// A client's PEM key signs its assertions with the shared private_key_jwt
// signer: a P-256 key ES256, an RSA key RS256 unless SigningAlg names
// another (PS256) as it always did here, and a SigningAlg the key cannot
// sign with is refused. The assertion is issued by and about the client,
// for the server's issuer.
func TestClientAssertionAlgorithms(t *testing.T) {
	t.Parallel()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: mustDER(t)(x509.MarshalECPrivateKey(ec))}))
	rsaPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rs)}))
	p := &ccProvider{issuer: "https://as.example"}
	for _, tt := range []struct {
		name, pem, alg, want string
		pub                  crypto.PublicKey
	}{
		{"P-256", ecPEM, "", "ES256", ec.Public()},
		{"RSA", rsaPEM, "", "RS256", rs.Public()},
		{"RSA PS256", rsaPEM, "PS256", "PS256", rs.Public()},
		{"P-256 RS256", ecPEM, "RS256", "", nil},
		{"no key", "garbage", "", "", nil},
	} {
		a, err := assertion(p, Client{ID: "app", AuthMethod: "private_key_jwt", PrivateKeyPEM: tt.pem, SigningAlg: tt.alg})
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s: signed", tt.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		header, claims := assertionParts(t, a)
		if header["alg"] != tt.want || claims["iss"] != "app" || claims["sub"] != "app" || claims["aud"] != "https://as.example" {
			t.Errorf("%s: header %v claims %v", tt.name, header, claims)
		}
		if !verifies(t, tt.pub, tt.want, a) {
			t.Errorf("%s: the %s signature does not verify", tt.name, tt.want)
		}
	}
}

// assertion is one client assertion of p's signer for cl.
func assertion(p *ccProvider, cl Client) (string, error) {
	s, err := p.signer(cl)
	if err != nil {
		return "", err
	}
	return s.Assertion()
}

func mustDER(t *testing.T) func([]byte, error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

func assertionParts(t *testing.T, a string) (header, claims map[string]any) {
	t.Helper()
	parts := strings.Split(a, ".")
	if len(parts) != 3 {
		t.Fatalf("%q is not a JWT", a)
	}
	for i, dst := range []*map[string]any{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(raw, dst) != nil {
			t.Fatalf("part %d of %q", i, a)
		}
	}
	return header, claims
}

// verifies checks the signature of the JWT a by pub with alg.
func verifies(t *testing.T, pub crypto.PublicKey, alg, a string) bool {
	t.Helper()
	i := strings.LastIndex(a, ".")
	sig, err := base64.RawURLEncoding.DecodeString(a[i+1:])
	if err != nil {
		return false
	}
	digest := sha256.Sum256([]byte(a[:i]))
	switch alg {
	case "ES256":
		return len(sig) == 64 && ecdsa.Verify(pub.(*ecdsa.PublicKey), digest[:], new(big.Int).SetBytes(sig[:32]), new(big.Int).SetBytes(sig[32:]))
	case "RS256":
		return rsa.VerifyPKCS1v15(pub.(*rsa.PublicKey), crypto.SHA256, digest[:], sig) == nil
	case "PS256":
		return rsa.VerifyPSS(pub.(*rsa.PublicKey), crypto.SHA256, digest[:], sig, nil) == nil
	}
	return false
}
