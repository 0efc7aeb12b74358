package mcpauth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"testing"
)

// The client's KeyID names its key in the header of the assertions it signs
// for the client credentials grant, as for users' sign-ins; without one the
// header names none.
func TestClientAssertionKeyID(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: mustDER(t)(x509.MarshalPKCS8PrivateKey(key))}))
	p := &ccProvider{issuer: "https://as.example"}
	for _, kid := range []string{"app-key-1", ""} {
		s, err := p.signer(Client{ID: "app", AuthMethod: "private_key_jwt", PrivateKeyPEM: keyPEM, KeyID: kid})
		if err != nil {
			t.Fatal(err)
		}
		a, err := s.Assertion()
		if err != nil {
			t.Fatal(err)
		}
		header, _ := assertionParts(t, a)
		if got, named := header["kid"]; kid == "" && named || kid != "" && got != kid {
			t.Errorf("KeyID %q: the assertion's header is %v", kid, header)
		}
	}
}
