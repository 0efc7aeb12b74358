package oauthflow

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"sync"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/outbound"
)

// Sender-constrained tokens (DPoP, RFC 9449). A provider whose UsesDPoP
// method (see [Provider]) answers true has each of its grants bound to a key
// pair of its own (ES256): the key is made when the sign-in's URL is built (the
// authorization request carries its thumbprint as dpop_jkt), kept in the
// pending sign-in, then in the token record, both sealed when encryption is
// on, so any instance can sign for the connection; a new sign-in is a new
// grant and a new key. The code exchange and every refresh carry a proof of
// the key (DPoPTransport), and Client and Transport send a bound token as
// "Authorization: DPoP <token>" with a fresh proof (its hash in ath) on every
// request. A server's use_dpop_nonce challenge, from the authorization server
// or the API, is answered by one retry with its nonce; the last nonce of each
// origin is remembered by the store. A stolen bound token is useless without
// the key, which never leaves the store.

// dpopProvider is a Provider with the optional UsesDPoP method (documented
// on [Provider]): its grants are bound to a key when UsesDPoP is true.
type dpopProvider interface{ UsesDPoP() bool }

// usesDPoP reports whether p's grants are to be bound to a key.
func usesDPoP(p Provider) bool {
	d, ok := p.(dpopProvider)
	return ok && d.UsesDPoP()
}

// proofCall is what a token request the library makes for a bound grant
// signs with: the grant's key, and the nonces the store remembers.
type proofCall struct {
	key    *dpop.Key
	nonces *dpop.Nonces
}

type proofCallKey struct{}

// withProofs is ctx for a provider's ExchangeCode, RefreshToken or
// PushAuthorization whose requests must carry proofs of key; ctx itself when
// key is nil.
func withProofs(ctx context.Context, key *dpop.Key, nonces *dpop.Nonces) context.Context {
	if key == nil {
		return ctx
	}
	return context.WithValue(ctx, proofCallKey{}, proofCall{key: key, nonces: nonces})
}

// DPoPTransport is base (nil: http.DefaultTransport) adding a DPoP proof to
// each request when ctx is that of a call the library makes to bind a grant:
// the ExchangeCode, RefreshToken or PushAuthorization of a provider whose
// UsesDPoP is true. A
// provider that sends its own token requests wraps their transport with it;
// for any other ctx it is base.
// A proof goes only to the origin of the request made, never with a redirect
// elsewhere, and a use_dpop_nonce challenge gets one retry with the nonce.
// The answer's token_type is then "DPoP" (TokenSet.TokenType).
func DPoPTransport(ctx context.Context, base http.RoundTripper) http.RoundTripper {
	pc, ok := ctx.Value(proofCallKey{}).(proofCall)
	if base == nil {
		base = http.DefaultTransport
	}
	if !ok {
		return base
	}
	return &proofTransport{call: pc, base: base}
}

type proofTransport struct {
	call proofCall
	base http.RoundTripper
}

// RoundTrip proves the key to the origin of the request the caller made
// (dpop.Transport passes a redirect to any other origin through unsigned).
func (t *proofTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	dt := dpop.Transport{Base: t.base, Key: t.call.key, Nonces: t.call.nonces, Origin: outbound.FirstRequest(req).URL}
	return dt.RoundTrip(req)
}

// isDPoP reports whether a token answer's type is DPoP (case-insensitive,
// as token types are, RFC 6749 §5.1).
func isDPoP(tokenType string) bool { return strings.EqualFold(tokenType, tokenTypeDPoP) }

// newGrantKey makes the key a new sign-in's grant is bound to: the key and
// its encoded form, as kept in the session and the token record.
func newGrantKey() (*dpop.Key, string, error) {
	k, err := dpop.NewKey()
	if err != nil {
		return nil, "", err
	}
	b, err := k.MarshalBinary()
	if err != nil {
		return nil, "", err
	}
	return k, base64.RawURLEncoding.EncodeToString(b), nil
}

// keyCacheSize bounds the keys a store keeps parsed: a key is parsed once per
// process while it stays among the most recent this many (a parse costs a
// scalar multiplication, a proof a signature).
const keyCacheSize = 4096

// keyCache holds parsed grant keys by their encoded form.
type keyCache struct {
	mu   sync.Mutex
	keys map[string]*dpop.Key
	seq  []string // insertion order, for eviction
}

// get is the key encoded as enc, parsed once. enc may be a view of a stored
// record's bytes: it is copied before it is kept.
func (c *keyCache) get(enc string) (*dpop.Key, error) {
	c.mu.Lock()
	k, ok := c.keys[enc]
	c.mu.Unlock()
	if ok {
		return k, nil
	}
	k, err := parseGrantKey(enc)
	if err != nil {
		return nil, err
	}
	enc = strings.Clone(enc)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.keys == nil {
		c.keys = make(map[string]*dpop.Key)
	}
	if _, ok := c.keys[enc]; !ok {
		if len(c.seq) >= keyCacheSize {
			delete(c.keys, c.seq[0])
			c.seq = c.seq[1:]
		}
		c.keys[enc] = k
		c.seq = append(c.seq, enc)
	}
	return k, nil
}

// parseGrantKey reads a key as newGrantKey encodes it.
func parseGrantKey(enc string) (*dpop.Key, error) {
	b, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("%w: DPoP key: %w", errCorruptRecord, err)
	}
	k, err := dpop.ParseKey(b)
	if err != nil {
		return nil, fmt.Errorf("%w: DPoP key: %w", errCorruptRecord, err)
	}
	return k, nil
}
