package clientauth_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/clientauth"
)

const (
	clientID = "app-1"
	issuer   = "https://as.example"
)

// keys are a fresh key of each kind an assertion is signed with.
func keys(t *testing.T) map[string]crypto.Signer {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return map[string]crypto.Signer{"ecdsa": ec, "rsa": rs, "ed25519": ed}
}

// jwt is a client assertion taken apart.
type jwt struct {
	header map[string]any
	claims map[string]any
	input  string // the signed part
	sig    []byte
}

func parse(t *testing.T, assertion string) jwt {
	t.Helper()
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		t.Fatalf("assertion %q is no compact JWS", assertion)
	}
	var j jwt
	for i, dst := range []*map[string]any{&j.header, &j.claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		t.Fatal(err)
	}
	j.input, j.sig = parts[0]+"."+parts[1], sig
	return j
}

// verify checks j's signature by pub with alg, as a server does.
func verify(pub crypto.PublicKey, alg string, j jwt) bool {
	digest := sha256.Sum256([]byte(j.input))
	switch k := pub.(type) {
	case *ecdsa.PublicKey:
		if alg != "ES256" || len(j.sig) != 64 {
			return false
		}
		r, s := new(big.Int).SetBytes(j.sig[:32]), new(big.Int).SetBytes(j.sig[32:])
		return ecdsa.Verify(k, digest[:], r, s)
	case *rsa.PublicKey:
		switch alg {
		case "PS256":
			return rsa.VerifyPSS(k, crypto.SHA256, digest[:], j.sig, &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash}) == nil
		case "RS256":
			return rsa.VerifyPKCS1v15(k, crypto.SHA256, digest[:], j.sig) == nil
		}
	case ed25519.PublicKey:
		return alg == "EdDSA" && ed25519.Verify(k, []byte(j.input), j.sig)
	}
	return false
}

func newSigner(t *testing.T, cfg clientauth.Config) *clientauth.Signer {
	t.Helper()
	s, err := clientauth.NewSigner(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Each kind of key signs with its algorithm, an RSA key with RS256 when it
// is named, and a server verifies the signature with the public key; the
// header names the algorithm, the type JWT and the key ID when there is one.
func TestAssertionSignatures(t *testing.T) {
	t.Parallel()
	ks := keys(t)
	for _, tt := range []struct{ key, named, alg, kid string }{
		{"ecdsa", "", "ES256", "ec-1"},
		{"rsa", "", "PS256", "rsa-1"},
		{"rsa", "RS256", "RS256", ""},
		{"ed25519", "", "EdDSA", "ed-1"},
	} {
		t.Run(tt.alg, func(t *testing.T) {
			t.Parallel()
			key := ks[tt.key]
			s := newSigner(t, clientauth.Config{ClientID: clientID, Audience: issuer, Key: key, KeyID: tt.kid, Alg: tt.named})
			if s.Alg() != tt.alg {
				t.Fatalf("Alg() = %q, want %q", s.Alg(), tt.alg)
			}
			a, err := s.Assertion()
			if err != nil {
				t.Fatal(err)
			}
			j := parse(t, a)
			if !verify(key.Public(), tt.alg, j) {
				t.Errorf("the %s signature does not verify", tt.alg)
			}
			if j.header["alg"] != tt.alg || j.header["typ"] != "JWT" {
				t.Errorf("header %v", j.header)
			}
			if kid, has := j.header["kid"]; has != (tt.kid != "") || has && kid != tt.kid {
				t.Errorf("header kid %v, want %q", j.header["kid"], tt.kid)
			}
			other := keys(t)[tt.key]
			if verify(other.Public(), tt.alg, j) {
				t.Error("the signature verifies with another key")
			}
		})
	}
}

// The claims: issued by and about the client, for the issuer as a single
// string, at the clock's time, good for a minute.
func TestAssertionClaims(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	s := newSigner(t, clientauth.Config{ClientID: clientID, Audience: issuer, Key: keys(t)["ecdsa"], Now: func() time.Time { return now }})
	a, err := s.Assertion()
	if err != nil {
		t.Fatal(err)
	}
	c := parse(t, a).claims
	if c["iss"] != clientID || c["sub"] != clientID {
		t.Errorf("iss %v sub %v, want %q", c["iss"], c["sub"], clientID)
	}
	if aud, ok := c["aud"].(string); !ok || aud != issuer {
		t.Errorf("aud %#v, want the issuer %q as a string", c["aud"], issuer)
	}
	iat, exp := c["iat"].(float64), c["exp"].(float64)
	if int64(iat) != now.Unix() {
		t.Errorf("iat %v, want %d", iat, now.Unix())
	}
	if life := time.Duration(exp-iat) * time.Second; life <= 0 || life > time.Minute {
		t.Errorf("lifetime %v, want at most a minute", life)
	}
	if clientauth.Lifetime > time.Minute {
		t.Errorf("Lifetime %v, want at most a minute", clientauth.Lifetime)
	}
}

// Every assertion has a jti of its own, even within one second.
func TestAssertionJTIsFresh(t *testing.T) {
	t.Parallel()
	now := time.Now()
	s := newSigner(t, clientauth.Config{ClientID: clientID, Audience: issuer, Key: keys(t)["ed25519"], Now: func() time.Time { return now }})
	seen := map[string]bool{}
	for range 200 {
		a, err := s.Assertion()
		if err != nil {
			t.Fatal(err)
		}
		jti, _ := parse(t, a).claims["jti"].(string)
		if len(jti) < 16 || seen[jti] {
			t.Fatalf("jti %q: empty, short or seen before", jti)
		}
		seen[jti] = true
	}
}

// Authenticate sets the three fields of RFC 7521 §4.2, a new assertion each time.
func TestAuthenticate(t *testing.T) {
	t.Parallel()
	s := newSigner(t, clientauth.Config{ClientID: clientID, Audience: issuer, Key: keys(t)["ecdsa"]})
	form := url.Values{"grant_type": {"refresh_token"}}
	if err := s.Authenticate(form); err != nil {
		t.Fatal(err)
	}
	first := form.Get("client_assertion")
	if form.Get("client_id") != clientID || form.Get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer" ||
		first == "" || form.Get("grant_type") != "refresh_token" || form.Has("client_secret") {
		t.Fatalf("form %v", form)
	}
	if err := s.Authenticate(form); err != nil {
		t.Fatal(err)
	}
	if form.Get("client_assertion") == first || len(form["client_assertion"]) != 1 {
		t.Error("a second request carries the first assertion")
	}
}

func TestNewSignerRefuses(t *testing.T) {
	t.Parallel()
	key := keys(t)["ecdsa"]
	for name, cfg := range map[string]clientauth.Config{
		"no key":         {ClientID: clientID, Audience: issuer},
		"no client ID":   {Audience: issuer, Key: key},
		"no audience":    {ClientID: clientID, Key: key},
		"an alg not its": {ClientID: clientID, Audience: issuer, Key: key, Alg: "RS256"},
	} {
		if _, err := clientauth.NewSigner(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	_, err := clientauth.NewSigner(clientauth.Config{ClientID: clientID, Audience: issuer, Key: key, Alg: "HS256"})
	if !errors.Is(err, clientauth.ErrKey) {
		t.Errorf("err = %v, want ErrKey", err)
	}
}
