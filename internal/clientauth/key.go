package clientauth

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"slices"
)

// Algorithms a client assertion is signed with (RFC 7518 §3.1, RFC 8037).
// FAPI 2.0 allows ES256, PS256 and EdDSA; RS256 is signed only when named.
const (
	ES256 = "ES256" // ECDSA on P-256 with SHA-256
	PS256 = "PS256" // RSASSA-PSS with SHA-256
	EdDSA = "EdDSA" // Ed25519
	RS256 = "RS256" // RSASSA-PKCS1-v1_5 with SHA-256
)

// ErrKey means a private key cannot sign client assertions: it is not a
// PEM private key, not a kind of key an assertion is signed with, or not
// one the named algorithm signs with.
var ErrKey = errors.New("clientauth: the private key cannot sign client assertions")

// ParsePEM reads a PEM private key: PKCS#8, SEC 1 (an ECDSA key) or PKCS#1
// (an RSA key). The error wraps ErrKey and never holds the key.
func ParsePEM(text string) (crypto.Signer, error) {
	block, _ := pem.Decode([]byte(text))
	if block == nil {
		return nil, fmt.Errorf("%w: no PEM block", ErrKey)
	}
	key, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		if key, err = x509.ParseECPrivateKey(block.Bytes); err != nil {
			key, err = x509.ParsePKCS1PrivateKey(block.Bytes)
		}
	}
	if err != nil {
		return nil, fmt.Errorf("%w: the PEM block is no PKCS#8, SEC 1 or PKCS#1 private key", ErrKey)
	}
	signer, ok := key.(crypto.Signer)
	if !ok {
		return nil, fmt.Errorf("%w: a %T signs nothing", ErrKey, key)
	}
	return signer, nil
}

// Algorithm is the algorithm a client assertion is signed with by the
// private key whose public half is pub: named, when pub's kind of key signs
// with it, or when named is "" the key's own: ES256 for a P-256 ECDSA key,
// PS256 for an RSA key, EdDSA for an Ed25519 key. An RSA key signs RS256
// only when it is named. The error wraps ErrKey.
func Algorithm(pub crypto.PublicKey, named string) (string, error) {
	var algs []string // the first is the key's own
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return "", fmt.Errorf("%w: an ECDSA key on %s, want P-256 (ES256)", ErrKey, k.Curve.Params().Name)
		}
		algs = []string{ES256}
	case *rsa.PublicKey:
		algs = []string{PS256, RS256}
	case ed25519.PublicKey:
		algs = []string{EdDSA}
	default:
		return "", fmt.Errorf("%w: a %T key, want a P-256 ECDSA, RSA or Ed25519 key", ErrKey, pub)
	}
	switch {
	case named == "":
		return algs[0], nil
	case slices.Contains(algs, named):
		return named, nil
	}
	return "", fmt.Errorf("%w: a %T key does not sign %q (it signs %v)", ErrKey, pub, named, algs)
}

// sign is the JWS signature of input (RFC 7515 §5.1) by key with alg, which
// Algorithm chose for it.
func sign(key crypto.Signer, alg string, input []byte) ([]byte, error) {
	if alg == EdDSA {
		return key.Sign(rand.Reader, input, crypto.Hash(0)) // Ed25519 hashes the message itself
	}
	digest := sha256.Sum256(input)
	switch alg {
	case ES256:
		der, err := key.Sign(rand.Reader, digest[:], crypto.SHA256)
		if err != nil {
			return nil, err
		}
		return fixedECDSA(der)
	case PS256:
		return key.Sign(rand.Reader, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash, Hash: crypto.SHA256})
	}
	return key.Sign(rand.Reader, digest[:], crypto.SHA256) // RS256
}

// p256Size is the size in bytes of each half of an ES256 signature.
const p256Size = 32

// fixedECDSA is an ASN.1 ECDSA signature, as a crypto.Signer makes it, in
// the form a JWS carries (RFC 7518 §3.4): R and S, each 32 bytes.
func fixedECDSA(der []byte) ([]byte, error) {
	var sig struct{ R, S *big.Int }
	rest, err := asn1.Unmarshal(der, &sig)
	if err != nil || len(rest) > 0 || sig.R.Sign() <= 0 || sig.S.Sign() <= 0 ||
		sig.R.BitLen() > 8*p256Size || sig.S.BitLen() > 8*p256Size {
		return nil, fmt.Errorf("%w: the key's ECDSA signature is no P-256 signature", ErrKey)
	}
	out := make([]byte, 2*p256Size)
	sig.R.FillBytes(out[:p256Size])
	sig.S.FillBytes(out[p256Size:])
	return out, nil
}
