package authserver

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// This file implements private_key_jwt client authentication (RFC 7523
// §2.2, RFC 7521 §4.2) for a Client with a PublicKey: each request carries
// a JWT the client signed, issued by and about the client (iss and sub),
// for the server's issuer exactly (aud, a single string), short-lived, and
// with a jti the server has not accepted before. A jti is spent when its
// assertion is accepted and remembered until the assertion expires.

// AssertionType is the client_assertion_type of a JWT client assertion
// (RFC 7523 §2.2).
const AssertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// MaxAssertionLifetime is the longest a client assertion may be good for:
// its exp at most this long after its iat.
const MaxAssertionLifetime = 5 * time.Minute

// assertionSkew is how far in the future an assertion's iat may be: the
// client's clock may run a little ahead of the server's.
const assertionSkew = time.Minute

// errAssertionReplayed refuses an assertion whose jti was accepted before.
var errAssertionReplayed = errors.New("the client assertion was used before")

// assertion is a client assertion taken apart: what its signature covers,
// the signature, and what the header and claims say.
type assertion struct {
	input  string
	sig    []byte
	header struct {
		Alg string `json:"alg"`
	}
	claims struct {
		Iss string  `json:"iss"`
		Sub string  `json:"sub"`
		Aud any     `json:"aud"`
		Iat float64 `json:"iat"`
		Exp float64 `json:"exp"`
		Jti string  `json:"jti"`
	}
}

// assertedClient authenticates the client of a request that carries a
// client assertion, and counts the outcome. The assertion is the only
// authentication the request may carry.
func (s *Server) assertedClient(r *http.Request, form url.Values) (*Client, *oauthError) {
	if r.Header.Get("Authorization") != "" || form.Has("client_secret") {
		s.stats.clientAssertionsRefused.Add(1)
		return nil, errInvalidRequest("more than one client authentication method")
	}
	client, err := s.checkAssertion(r, form)
	switch {
	case err == nil:
		s.stats.clientAssertionsAccepted.Add(1)
		return client, nil
	case errors.Is(err, errAssertionReplayed):
		s.stats.clientAssertionReplays.Add(1)
	default:
		s.stats.clientAssertionsRefused.Add(1)
	}
	return nil, errInvalidClient(err.Error())
}

// checkAssertion checks the request's assertion and returns its client: its
// type, its signature by the client's key, its claims, and last its jti,
// which it spends.
func (s *Server) checkAssertion(r *http.Request, form url.Values) (*Client, error) {
	if form.Get("client_assertion_type") != AssertionType {
		return nil, errors.New("client_assertion_type must be " + AssertionType)
	}
	a, err := parseAssertion(form.Get("client_assertion"))
	if err != nil {
		return nil, err
	}
	client := s.clients[a.claims.Iss]
	switch {
	case client == nil || client.PublicKey == nil:
		return nil, errors.New("the client assertion's issuer is no client with a key")
	case form.Has("client_id") && form.Get("client_id") != client.ID:
		return nil, errors.New("client_id is not the client assertion's issuer")
	case !a.verify(client.PublicKey):
		return nil, errors.New("the client assertion's signature does not verify with the client's key")
	}
	exp, err := a.checkClaims(client.ID, s.issuerFor(r), s.now())
	if err != nil {
		return nil, err
	}
	if !s.assertions.spend(client.ID+" "+a.claims.Jti, exp, s.now()) {
		return nil, errAssertionReplayed
	}
	return client, nil
}

// parseAssertion takes a compact JWS apart.
func parseAssertion(raw string) (*assertion, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return nil, errors.New("the client assertion is no JWT")
	}
	a := &assertion{input: parts[0] + "." + parts[1]}
	for i, dst := range []any{&a.header, &a.claims} {
		b, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil || json.Unmarshal(b, dst) != nil {
			return nil, errors.New("the client assertion is no JWT")
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return nil, errors.New("the client assertion is no JWT")
	}
	a.sig = sig
	return a, nil
}

// verify reports whether a is signed by the private half of pub, with the
// algorithm its header names, which must be one pub's kind of key signs
// with: ES256 (P-256), PS256 or RS256 (RSA), EdDSA (Ed25519).
func (a *assertion) verify(pub crypto.PublicKey) bool {
	digest := sha256.Sum256([]byte(a.input))
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if a.header.Alg != "ES256" || len(a.sig) != 64 {
			return false
		}
		r, s := new(big.Int).SetBytes(a.sig[:32]), new(big.Int).SetBytes(a.sig[32:])
		return ecdsa.Verify(k, digest[:], r, s)
	case *rsa.PublicKey:
		switch a.header.Alg {
		case "PS256":
			return rsa.VerifyPSS(k, crypto.SHA256, digest[:], a.sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		case "RS256":
			return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], a.sig) == nil
		}
	case ed25519.PublicKey:
		return a.header.Alg == "EdDSA" && ed25519.Verify(k, []byte(a.input), a.sig)
	}
	return false
}

// checkClaims checks that a is issued by and about clientID, for issuer
// exactly, now within its lifetime of at most MaxAssertionLifetime, and has
// a jti; it returns when a expires.
func (a *assertion) checkClaims(clientID, issuer string, now time.Time) (time.Time, error) {
	c := &a.claims
	iat, exp := unixTime(c.Iat), unixTime(c.Exp)
	switch aud, _ := c.Aud.(string); {
	case c.Iss != clientID || c.Sub != clientID:
		return time.Time{}, errors.New("the client assertion's iss and sub must both be the client ID")
	case aud != issuer:
		return time.Time{}, errors.New("the client assertion's aud must be the server's issuer, as a single string")
	case c.Iat == 0 || c.Exp == 0:
		return time.Time{}, errors.New("the client assertion has no iat or no exp")
	case !now.Before(exp):
		return time.Time{}, errors.New("the client assertion expired")
	case iat.After(now.Add(assertionSkew)):
		return time.Time{}, errors.New("the client assertion was issued in the future")
	case exp.Sub(iat) > MaxAssertionLifetime:
		return time.Time{}, fmt.Errorf("the client assertion is good for longer than %v", MaxAssertionLifetime)
	case c.Jti == "":
		return time.Time{}, errors.New("the client assertion has no jti")
	}
	return exp, nil
}

func unixTime(secs float64) time.Time { return time.Unix(0, int64(secs*float64(time.Second))) }

// checkPublicKey accepts the kinds of key a client assertion is verified with.
func checkPublicKey(pub crypto.PublicKey) error {
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if k.Curve != elliptic.P256() {
			return errors.New("an ECDSA key not on P-256")
		}
	case *rsa.PublicKey, ed25519.PublicKey:
	default:
		return fmt.Errorf("a %T key, want a P-256 ECDSA, RSA or Ed25519 public key", pub)
	}
	return nil
}
