package clientauth_test

import (
	"crypto"
	"crypto/ecdh"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/clientauth"
)

func pemOf(typ string, der []byte) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
}

// derOf returns a function that is its b, failing t on its err.
func derOf(t *testing.T) func(b []byte, err error) []byte {
	return func(b []byte, err error) []byte {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
}

// ParsePEM reads PKCS#8 (each kind of key), SEC 1 and PKCS#1, and refuses
// anything else with ErrKey, never echoing the key.
func TestParsePEM(t *testing.T) {
	t.Parallel()
	ks := keys(t)
	ec, rs := ks["ecdsa"].(*ecdsa.PrivateKey), ks["rsa"].(*rsa.PrivateKey)
	der := derOf(t)
	good := map[string]struct {
		pem string
		key crypto.Signer
	}{
		"PKCS#8 ECDSA":   {pemOf("PRIVATE KEY", der(x509.MarshalPKCS8PrivateKey(ec))), ec},
		"PKCS#8 RSA":     {pemOf("PRIVATE KEY", der(x509.MarshalPKCS8PrivateKey(rs))), rs},
		"PKCS#8 Ed25519": {pemOf("PRIVATE KEY", der(x509.MarshalPKCS8PrivateKey(ks["ed25519"]))), ks["ed25519"]},
		"SEC 1":          {pemOf("EC PRIVATE KEY", der(x509.MarshalECPrivateKey(ec))), ec},
		"PKCS#1":         {pemOf("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rs)), rs},
	}
	for name, tt := range good {
		got, err := clientauth.ParsePEM(tt.pem)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !reflect.DeepEqual(got.Public(), tt.key.Public()) {
			t.Errorf("%s: another key", name)
		}
	}
	x, err := ecdh.X25519().GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"no PEM":          "not a key",
		"a certificate":   pemOf("CERTIFICATE", []byte("garbage")),
		"an X25519 key":   pemOf("PRIVATE KEY", der(x509.MarshalPKCS8PrivateKey(x))),
		"a public key":    pemOf("PUBLIC KEY", der(x509.MarshalPKIXPublicKey(ec.Public()))),
		"a truncated key": pemOf("PRIVATE KEY", der(x509.MarshalPKCS8PrivateKey(ec)))[:60] + "\n-----END PRIVATE KEY-----\n",
	}
	for name, text := range bad {
		_, err := clientauth.ParsePEM(text)
		if !errors.Is(err, clientauth.ErrKey) {
			t.Errorf("%s: err = %v, want ErrKey", name, err)
		}
		if err != nil && len(text) > 40 && strings.Contains(err.Error(), text[30:40]) {
			t.Errorf("%s: the error echoes the key", name)
		}
	}
}

// Algorithm follows the key, takes a named algorithm the key signs with,
// and refuses any other, and any other kind of key or curve.
func TestAlgorithm(t *testing.T) {
	t.Parallel()
	ks := keys(t)
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		pub   crypto.PublicKey
		named string
		want  string // "" for a refusal
	}{
		{"P-256", ks["ecdsa"].Public(), "", "ES256"},
		{"P-256 ES256", ks["ecdsa"].Public(), "ES256", "ES256"},
		{"P-256 RS256", ks["ecdsa"].Public(), "RS256", ""},
		{"P-384", p384.Public(), "", ""},
		{"RSA", ks["rsa"].Public(), "", "PS256"},
		{"RSA PS256", ks["rsa"].Public(), "PS256", "PS256"},
		{"RSA RS256", ks["rsa"].Public(), "RS256", "RS256"},
		{"RSA ES256", ks["rsa"].Public(), "ES256", ""},
		{"RSA none", ks["rsa"].Public(), "none", ""},
		{"Ed25519", ks["ed25519"].Public(), "", "EdDSA"},
		{"Ed25519 PS256", ks["ed25519"].Public(), "PS256", ""},
		{"no key", nil, "", ""},
	} {
		got, err := clientauth.Algorithm(tt.pub, tt.named)
		if got != tt.want || (tt.want == "") != errors.Is(err, clientauth.ErrKey) {
			t.Errorf("%s: Algorithm = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}
