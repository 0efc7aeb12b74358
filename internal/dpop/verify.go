package dpop

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

var (
	// ErrInvalidProof is wrapped by every refusal of Verify but a nonce's:
	// the server answers it with invalid_dpop_proof (RFC 9449 §5, §7.1).
	ErrInvalidProof = errors.New("dpop: invalid proof")
	// ErrUseNonce is Verify's refusal of a proof that is valid but for a
	// missing or stale nonce: the server answers it with use_dpop_nonce and a
	// fresh DPoP-Nonce (RFC 9449 §8, §9).
	ErrUseNonce = errors.New("dpop: proof lacks the server's current nonce")
)

// DefaultMaxAge is how far Verify lets a proof's iat stray from now, either
// way, when its maxAge is zero or less.
const DefaultMaxAge = time.Minute

// privateMembers are the JWK members that hold a private key (RFC 7518 §6).
var privateMembers = []string{"d", "p", "q", "dp", "dq", "qi", "oth", "k"}

var strictB64 = b64.Strict()

// Verify checks proof, the value of a request's DPoP header (the caller
// refuses a request with none or more than one), the way RFC 9449 §4.3 asks
// a server to: typ dpop+jwt, alg ES256, a public P-256 jwk and no private
// part, a valid signature, a jti, htm equal to method, htu equal to target
// (the absolute URL the request was sent to; query and fragment ignored,
// both sides normalized), and iat within maxAge of now either way
// (DefaultMaxAge when maxAge <= 0). A non-empty accessToken must be bound by
// the proof's ath; a non-empty nonce must be its nonce claim. It returns the
// thumbprint of the proof's key, for the server to bind a token to or to
// compare with a token's binding (cnf.jkt).
//
// Verify keeps no state, so it does not refuse a replayed proof: a server
// that must (RFC 9449 §11.1) keeps the jti of each proof it accepted for
// maxAge and refuses a proof whose jti it has seen.
func Verify(proof, method, target string, now time.Time, maxAge time.Duration, accessToken, nonce string) (jkt string, err error) {
	c, jkt, err := verifySigned(proof)
	if err != nil {
		return "", err
	}
	if err := checkRequest(c, method, target); err != nil {
		return "", err
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	if age := float64(now.UnixNano())/1e9 - c.IAT; math.Abs(age) > maxAge.Seconds() {
		return "", fmt.Errorf("%w: iat outside the accepted window", ErrInvalidProof)
	}
	if accessToken != "" && c.ATH != tokenHash(accessToken) {
		return "", fmt.Errorf("%w: ath does not match the access token", ErrInvalidProof)
	}
	if nonce != "" && c.Nonce != nonce {
		return "", ErrUseNonce
	}
	return jkt, nil
}

// verifySigned parses proof, checks its header and signature, and returns
// its claims and its key's thumbprint.
func verifySigned(proof string) (claims, string, error) {
	var c claims
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return c, "", fmt.Errorf("%w: not a compact JWS", ErrInvalidProof)
	}
	pub, jwk, err := parseHeader(parts[0])
	if err != nil {
		return c, "", err
	}
	if err := checkSignature(pub, parts[0]+"."+parts[1], parts[2]); err != nil {
		return c, "", err
	}
	if err := decodeJSON(parts[1], &c); err != nil {
		return c, "", fmt.Errorf("%w: payload: %w", ErrInvalidProof, err)
	}
	return c, thumbprint(jwk), nil
}

// rawHeader is a proof's header as received: jwk kept raw to look for
// private members, crit to refuse extensions this package does not know.
type rawHeader struct {
	Typ  string                     `json:"typ"`
	Alg  string                     `json:"alg"`
	JWK  map[string]json.RawMessage `json:"jwk"`
	Crit json.RawMessage            `json:"crit"`
}

func parseHeader(segment string) (*ecdsa.PublicKey, JWK, error) {
	var h rawHeader
	if err := decodeJSON(segment, &h); err != nil {
		return nil, JWK{}, fmt.Errorf("%w: header: %w", ErrInvalidProof, err)
	}
	switch {
	case !strings.EqualFold(h.Typ, proofType) && !strings.EqualFold(h.Typ, "application/"+proofType):
		return nil, JWK{}, fmt.Errorf("%w: typ is not %s", ErrInvalidProof, proofType)
	case h.Alg != algorithm:
		return nil, JWK{}, fmt.Errorf("%w: alg is not %s", ErrInvalidProof, algorithm)
	case h.Crit != nil:
		return nil, JWK{}, fmt.Errorf("%w: crit names extensions not understood", ErrInvalidProof)
	}
	return publicKey(h.JWK)
}

// publicKey reads a proof's jwk: an EC P-256 public key and nothing private.
func publicKey(members map[string]json.RawMessage) (*ecdsa.PublicKey, JWK, error) {
	for _, name := range privateMembers {
		if _, ok := members[name]; ok {
			return nil, JWK{}, fmt.Errorf("%w: jwk holds a private key", ErrInvalidProof)
		}
	}
	var kty, crv, x, y string
	for name, to := range map[string]*string{"kty": &kty, "crv": &crv, "x": &x, "y": &y} {
		if json.Unmarshal(members[name], to) != nil { // a missing member is nil: not JSON
			return nil, JWK{}, fmt.Errorf("%w: jwk member %s missing or not a string", ErrInvalidProof, name)
		}
	}
	if kty != "EC" || crv != "P-256" {
		return nil, JWK{}, fmt.Errorf("%w: jwk is not an EC P-256 key", ErrInvalidProof)
	}
	xb, errX := decodeFixed(x, coordSize)
	yb, errY := decodeFixed(y, coordSize)
	if errX != nil || errY != nil {
		return nil, JWK{}, fmt.Errorf("%w: jwk coordinates are not 32 bytes of base64url", ErrInvalidProof)
	}
	point := append(append([]byte{4}, xb...), yb...)
	pub, err := ecdsa.ParseUncompressedPublicKey(elliptic.P256(), point)
	if err != nil {
		return nil, JWK{}, fmt.Errorf("%w: jwk: %w", ErrInvalidProof, err)
	}
	return pub, jwkOf(xb, yb), nil // re-encoded: the thumbprint of one key is one string
}

func checkSignature(pub *ecdsa.PublicKey, signingInput, segment string) error {
	sig, err := decodeFixed(segment, 2*coordSize)
	if err != nil {
		return fmt.Errorf("%w: signature is not 64 bytes of base64url", ErrInvalidProof)
	}
	digest := sha256.Sum256([]byte(signingInput))
	r, s := new(big.Int).SetBytes(sig[:coordSize]), new(big.Int).SetBytes(sig[coordSize:])
	if !ecdsa.Verify(pub, digest[:], r, s) {
		return fmt.Errorf("%w: signature does not verify", ErrInvalidProof)
	}
	return nil
}

func checkRequest(c claims, method, target string) error {
	if c.JTI == "" {
		return fmt.Errorf("%w: no jti", ErrInvalidProof)
	}
	if c.HTM != method {
		return fmt.Errorf("%w: htm is not the request's method", ErrInvalidProof)
	}
	want, err := htuOf(target)
	if err != nil {
		return err // the server's own URL: its mistake, not the proof's
	}
	if got, _ := htuOf(c.HTU); got != want {
		return fmt.Errorf("%w: htu is not the request's URL", ErrInvalidProof)
	}
	return nil
}

// decodeFixed decodes s, the canonical base64url of exactly n bytes.
func decodeFixed(s string, n int) ([]byte, error) {
	if len(s) != b64.EncodedLen(n) {
		return nil, errors.New("wrong length")
	}
	return strictB64.DecodeString(s)
}

// decodeJSON decodes one base64url segment of a JWS into v.
func decodeJSON(segment string, v any) error {
	raw, err := strictB64.DecodeString(segment)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, v)
}
