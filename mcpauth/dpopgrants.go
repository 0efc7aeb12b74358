package mcpauth

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/clientauth"
	"github.com/oauthflow/oauthflow/internal/dpop"
)

// This file implements DPoP (RFC 9449) for the grants an agent makes without
// a sign-in: client credentials, cross-app access and workload identity
// federation. At an authorization server that takes DPoP proofs (ES256
// among its dpop_signing_alg_values_supported) a connection's first grant
// proves a key of the connection's own (one per user and provider) at the
// token endpoint; a use_dpop_nonce answer gets one retry with the nonce,
// which the Connector remembers for the server's next first grant. A
// token_type DPoP answer is stored bound to that key, which the token record
// keeps as a sign-in's does (sealed with it when encryption is on), so that
// every instance's calls to the MCP server send the token with the DPoP
// scheme and a proof of the key. A refresh, which runs the grant again,
// proves the key the record keeps, which the store hands the grant in ctx
// (oauthflow.DPoPTransport) and keeps with the new token: a connection has
// one key for its life, and a new one only with a new connection. A record
// of a bearer token has no key, so its refreshes prove none. A server that
// does not take DPoP gets no proof, and a DPoP token for a request that
// proved no key is refused: nothing could use it (for a workload, the
// refusal is kept as any other is).

// tokenTypeDPoP is the token_type of a DPoP-bound token (RFC 9449 §5), as
// oauthflow.TokenSet and oauthflow.StoredTokens name it.
const tokenTypeDPoP = "DPoP"

// maxExpiresIn bounds the lifetime a token record is given, in seconds, as
// the store bounds it.
const maxExpiresIn = 100 * 365 * 24 * 3600

// errUnprovenDPoP means a token endpoint answered a DPoP-bound token to a
// request that proved no key.
var errUnprovenDPoP = errors.New("mcpauth: a DPoP-bound token for a request that proved no key")

// takesDPoP reports whether the authorization server d describes takes the
// DPoP proofs this package signs (ES256).
func takesDPoP(d *Discovered) bool {
	return slices.Contains(d.AS.DPoPSigningAlgValuesSupported, "ES256")
}

// grantKey is the key a connection's grants are bound to, and its encoding
// as the token record keeps it (oauthflow.StoredTokens.DPoPKey).
type grantKey struct {
	key *dpop.Key
	enc string
}

// newGrantKey makes the key of a new connection.
func newGrantKey() (grantKey, error) {
	k, err := dpop.NewKey()
	if err != nil {
		return grantKey{}, err
	}
	b, err := k.MarshalBinary()
	if err != nil {
		return grantKey{}, err
	}
	return grantKey{key: k, enc: base64.RawURLEncoding.EncodeToString(b)}, nil
}

// firstGrant fetches userID's first token with p's grant and stores it: at
// an authorization server that takes DPoP, bound to a new key of the
// connection's own, kept in the token record.
func (p *ccProvider) firstGrant(ctx context.Context, userID string) error {
	var gk grantKey
	if takesDPoP(&p.d) {
		var err error
		if gk, err = newGrantKey(); err != nil {
			return err
		}
	}
	ts, err := p.grant(ctx, userID, gk.key)
	if err != nil {
		return err
	}
	tokens := p.conn.cfg.Module.Tokens
	if ts.TokenType != tokenTypeDPoP {
		return tokens.StoreFromTokenSet(ctx, userID, p.id, ts)
	}
	return tokens.StoreTokens(ctx, userID, p.id, oauthflow.StoredTokens{AccessToken: ts.AccessToken,
		RefreshToken: ts.RefreshToken, ExpiresAt: expiresAt(ts.ExpiresIn), Scope: ts.Scope, TokenType: tokenTypeDPoP, DPoPKey: gk.enc})
}

// expiresAt is when a token that expires in expiresIn seconds expires, in
// Unix milliseconds; 0 for one that never does.
func expiresAt(expiresIn int64) int64 {
	if expiresIn <= 0 {
		return 0
	}
	return time.Now().UnixMilli() + min(expiresIn, maxExpiresIn)*1000
}

// tokenClient is the client of one token request of p's grant, under the
// outbound policy as every call is. It proves key, a first grant's new key
// (firstGrant makes one only for an authorization server that takes DPoP),
// or else, on a refresh at a server that takes DPoP, the key of the record
// refreshed, which the store gives in ctx (none for a bearer token's
// record); at any other server it proves none. Under the proofs, s (when
// set) signs a new client assertion into each request sent, the retry after
// a use_dpop_nonce answer included (assertionTransport). The watch tells
// whether the request answered carried a proof.
func (p *ccProvider) tokenClient(ctx context.Context, key *dpop.Key, s *clientauth.Signer) (*http.Client, *proofWatch, error) {
	watch := &proofWatch{base: p.http.Transport}
	rt, err := p.proving(ctx, asserting(watch, s), key)
	if err != nil {
		return nil, nil, err
	}
	c := *p.http
	c.Transport = rt
	return &c, watch, nil
}

// proving is base under the proofs of key, or of the refreshed record's
// key, as tokenClient says; base itself where none is proved.
func (p *ccProvider) proving(ctx context.Context, base http.RoundTripper, key *dpop.Key) (http.RoundTripper, error) {
	switch {
	case key != nil:
		origin, err := url.Parse(p.tokenURL)
		if err != nil {
			return nil, err
		}
		return &dpop.Transport{Base: base, Key: key, Nonces: &p.conn.nonces, Origin: origin}, nil
	case takesDPoP(&p.d):
		return oauthflow.DPoPTransport(ctx, base), nil
	}
	return base, nil
}

// proofWatch is the transport under a token request's proofs: it notes
// whether the last request it sent, whose answer the grant reads, carried
// one.
type proofWatch struct {
	base   http.RoundTripper // nil: http.DefaultTransport
	proved atomic.Bool
}

func (w *proofWatch) RoundTrip(req *http.Request) (*http.Response, error) {
	w.proved.Store(req.Header.Get("DPoP") != "")
	if w.base == nil {
		return http.DefaultTransport.RoundTrip(req)
	}
	return w.base.RoundTrip(req)
}

// bindAnswer reads a's token_type as oauthflow.TokenSet keeps it: "DPoP"
// (compared case-insensitively, RFC 6749 §5.1) for a token bound to the key
// the request proved, "" for any other. A DPoP token for a request that
// proved no key is refused.
func (p *ccProvider) bindAnswer(a *tokenAnswer, proved bool) error {
	if !strings.EqualFold(a.TokenType, tokenTypeDPoP) {
		a.TokenType = ""
		return nil
	}
	if !proved {
		return &oauthflow.ProviderError{ProviderID: p.id, StatusCode: http.StatusOK, Err: errUnprovenDPoP}
	}
	a.TokenType = tokenTypeDPoP
	return nil
}
