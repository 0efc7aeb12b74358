package dpop

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrKeyEncoding is returned by ParseKey for bytes that are not a key
// MarshalBinary wrote.
var ErrKeyEncoding = errors.New("dpop: not an encoded DPoP key")

const (
	keyVersion = 1  // the first byte of MarshalBinary's encoding
	coordSize  = 32 // bytes in a P-256 scalar or coordinate
	keySize    = 1 + 3*coordSize
)

// b64 is base64url without padding, the encoding of every JOSE member.
var b64 = base64.RawURLEncoding

// Key is an ES256 (ECDSA P-256) key pair that signs DPoP proofs. Make one
// with NewKey or ParseKey. A Key never changes, so goroutines may share it.
type Key struct {
	priv       *ecdsa.PrivateKey
	jwk        JWK
	thumbprint string
	header     string // the proofs' JOSE header, encoded: the same for every proof
}

// JWK is an EC public key as a JSON Web Key (RFC 7517, RFC 7518 §6.2.1).
type JWK struct {
	Kty string `json:"kty"`
	Crv string `json:"crv"`
	X   string `json:"x"`
	Y   string `json:"y"`
}

// NewKey generates a key.
func NewKey() (*Key, error) {
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("dpop: generate key: %w", err)
	}
	return newKey(priv)
}

func newKey(priv *ecdsa.PrivateKey) (*Key, error) {
	point, err := priv.PublicKey.Bytes() // 0x04 || x || y
	if err != nil {
		return nil, fmt.Errorf("dpop: public key: %w", err)
	}
	k := &Key{priv: priv, jwk: jwkOf(point[1:1+coordSize], point[1+coordSize:])}
	k.thumbprint = thumbprint(k.jwk)
	header, err := json.Marshal(proofHeader{Typ: proofType, Alg: algorithm, JWK: &k.jwk})
	if err != nil {
		return nil, fmt.Errorf("dpop: proof header: %w", err)
	}
	k.header = b64.EncodeToString(header)
	return k, nil
}

func jwkOf(x, y []byte) JWK {
	return JWK{Kty: "EC", Crv: "P-256", X: b64.EncodeToString(x), Y: b64.EncodeToString(y)}
}

// thumbprint is j's RFC 7638 SHA-256 thumbprint: the hash of the required
// members in lexicographic order, without whitespace. The members are
// base64url or fixed names, so none needs escaping.
func thumbprint(j JWK) string {
	canonical := `{"crv":"` + j.Crv + `","kty":"` + j.Kty + `","x":"` + j.X + `","y":"` + j.Y + `"}`
	sum := sha256.Sum256([]byte(canonical))
	return b64.EncodeToString(sum[:])
}

// Thumbprint is k's RFC 7638 JWK SHA-256 thumbprint, base64url without
// padding: the dpop_jkt of an authorization request and the jkt a server
// binds a token to.
func (k *Key) Thumbprint() string { return k.thumbprint }

// PublicJWK is k's public key as a JWK; it never holds the private part.
func (k *Key) PublicJWK() JWK { return k.jwk }

// MarshalBinary encodes k for storage in 97 bytes: a version byte (1), the
// private scalar, and the public point's x and y, each 32 bytes big-endian.
// The public point lets ParseKey tell a damaged encoding from a key. The
// encoding holds the private key: seal it before it is stored.
func (k *Key) MarshalBinary() ([]byte, error) {
	d, err := k.priv.Bytes()
	if err != nil {
		return nil, fmt.Errorf("dpop: private key: %w", err)
	}
	point, err := k.priv.PublicKey.Bytes()
	if err != nil {
		return nil, fmt.Errorf("dpop: public key: %w", err)
	}
	out := make([]byte, 0, keySize)
	out = append(out, keyVersion)
	out = append(out, d...)
	return append(out, point[1:]...), nil
}

// ParseKey decodes what MarshalBinary wrote. Anything else, a damaged copy
// included, is refused with an error wrapping ErrKeyEncoding.
func ParseKey(b []byte) (*Key, error) {
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("%w: empty", ErrKeyEncoding)
	case b[0] != keyVersion:
		return nil, fmt.Errorf("%w: unknown version %d", ErrKeyEncoding, b[0])
	case len(b) != keySize:
		return nil, fmt.Errorf("%w: %d bytes, want %d", ErrKeyEncoding, len(b), keySize)
	}
	priv, err := ecdsa.ParseRawPrivateKey(elliptic.P256(), b[1:1+coordSize])
	if err != nil {
		return nil, fmt.Errorf("%w: the private scalar is out of range (%w)", ErrKeyEncoding, err)
	}
	point, err := priv.PublicKey.Bytes()
	if err != nil || !bytes.Equal(point[1:], b[1+coordSize:]) {
		return nil, fmt.Errorf("%w: the public point is not the private scalar's", ErrKeyEncoding)
	}
	return newKey(priv)
}
