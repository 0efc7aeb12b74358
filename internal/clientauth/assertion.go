package clientauth

import (
	"crypto"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// AssertionType is the client_assertion_type of a JWT client assertion
// (RFC 7523 §2.2).
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// Lifetime is how long a client assertion is good for: a minute, as FAPI
// 2.0 asks of assertions. Each request is signed anew, so no assertion
// needs to live longer than its request.
const Lifetime = time.Minute

// Config is what a client's assertions say and what signs them.
type Config struct {
	ClientID string        // the assertion's iss and sub
	Audience string        // its aud: the authorization server's issuer
	Key      crypto.Signer // the client's private key, whose public key the server holds
	KeyID    string        // the header's kid, which names the key among the client's; "" for none
	// Alg is the signing algorithm; "" follows the key (see Algorithm).
	Alg string
	// Now is the clock of iat and exp; nil means time.Now.
	Now func() time.Time
}

// Signer signs the client assertions of one client for one authorization
// server. It is safe for concurrent use.
type Signer struct{ cfg Config }

// NewSigner checks cfg once: a client ID, an audience, and a key that
// signs with cfg.Alg. An error about the key wraps ErrKey.
func NewSigner(cfg Config) (*Signer, error) {
	switch {
	case cfg.Key == nil:
		return nil, fmt.Errorf("%w: no key", ErrKey)
	case cfg.ClientID == "":
		return nil, errors.New("clientauth: an assertion needs the client's ID, its issuer and subject")
	case cfg.Audience == "":
		return nil, errors.New("clientauth: an assertion needs its audience, the authorization server's issuer")
	}
	alg, err := Algorithm(cfg.Key.Public(), cfg.Alg)
	if err != nil {
		return nil, err
	}
	cfg.Alg = alg
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Signer{cfg: cfg}, nil
}

// Alg is the algorithm s signs with.
func (s *Signer) Alg() string { return s.cfg.Alg }

// header is a client assertion's JOSE header.
type header struct {
	Alg string `json:"alg"`
	Typ string `json:"typ"`
	Kid string `json:"kid,omitempty"`
}

// claims are a client assertion's claims (RFC 7523 §3).
type claims struct {
	Iss string `json:"iss"`
	Sub string `json:"sub"`
	Aud string `json:"aud"`
	Iat int64  `json:"iat"`
	Exp int64  `json:"exp"`
	Jti string `json:"jti"`
}

// Assertion signs a new client assertion (RFC 7523 §3): issued by and about
// the client (iss and sub), for the authorization server (aud, its issuer
// as a single string), good for Lifetime from now, with a random jti of its
// own.
func (s *Signer) Assertion() (string, error) {
	now := s.cfg.Now()
	h, err := json.Marshal(header{Alg: s.cfg.Alg, Typ: "JWT", Kid: s.cfg.KeyID})
	if err != nil {
		return "", err
	}
	c, err := json.Marshal(claims{Iss: s.cfg.ClientID, Sub: s.cfg.ClientID, Aud: s.cfg.Audience,
		Iat: now.Unix(), Exp: now.Add(Lifetime).Unix(), Jti: rand.Text()})
	if err != nil {
		return "", err
	}
	input := b64(h) + "." + b64(c)
	sig, err := sign(s.cfg.Key, s.cfg.Alg, []byte(input))
	if err != nil {
		return "", fmt.Errorf("clientauth: signing the client assertion: %w", err)
	}
	return input + "." + b64(sig), nil
}

// Authenticate puts the client's authentication in the form of one request
// (RFC 7521 §4.2): client_id, client_assertion_type and a new assertion.
func (s *Signer) Authenticate(form url.Values) error {
	assertion, err := s.Assertion()
	if err != nil {
		return err
	}
	form.Set("client_id", s.cfg.ClientID)
	form.Set("client_assertion_type", AssertionType)
	form.Set("client_assertion", assertion)
	return nil
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }
