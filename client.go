package oauthflow

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/outbound"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Calling an API as the user: an oauth2.TokenSource and an *http.Client over
// the store, each reading (and refreshing) the user's token per call.

// TokenSource adapts the store to oauth2.TokenSource: every Token call returns a
// valid token for the user and provider, refreshing it as needed. ctx gives the
// calls its values (trace IDs) only, never its lifetime: each Token call is
// bounded by the refresh timeout, however long ago the source was made.
func (s *TokenStore) TokenSource(ctx context.Context, userID, providerID string) oauth2.TokenSource {
	return &storeTokenSource{values: xcontext.ValuesOnly(ctx), s: s, userID: userID, providerID: providerID}
}

type storeTokenSource struct {
	values             context.Context
	s                  *TokenStore
	userID, providerID string
}

// Token returns the user's valid token. A DPoP-bound one has TokenType
// "DPoP": it is refused without a proof of its key, which only Client and
// Transport add.
func (ts *storeTokenSource) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(ts.values, ts.s.refresher.refreshTimeout)
	defer cancel()
	r, err := ts.s.validToken(ctx, ts.userID, ts.providerID, nil)
	if err != nil {
		return nil, err
	}
	t := &oauth2.Token{AccessToken: r.access, TokenType: "Bearer"}
	if r.key != "" {
		t.TokenType = tokenTypeDPoP
	}
	if r.expiresAt != 0 {
		t.Expiry = time.UnixMilli(r.expiresAt).Add(-ts.s.skew)
	}
	return t, nil
}

// Client returns an *http.Client that sends "Authorization: Bearer <token>" with
// every request, reading (and refreshing) the user's token each time under that
// request's own context. A DPoP-bound token (see [Provider]'s UsesDPoP) is sent as
// "Authorization: DPoP <token>" with a fresh proof of its key in the DPoP
// header; a use_dpop_nonce challenge is answered by one retry with the API's
// nonce. ctx gives those reads its values (trace IDs) only, never its
// lifetime, so a Client made in one request serves later ones.
//
// When the API answers 401 to the token just sent (revoked early, say), the
// Client forces one refresh, shared with every other caller that met the same
// 401, and sends the request once more with the new token, when its body can
// be replayed (no body, or GetBody set, as http.NewRequest does for in-memory
// bodies). A refresh that finds the grant dead fails the request with
// ErrNoToken; any other refresh failure leaves the caller the API's 401.
//
// The token goes only to the origin of the request the caller made: see [TokenStore.Transport].
func (s *TokenStore) Client(ctx context.Context, userID, providerID string) *http.Client {
	return &http.Client{Transport: s.Transport(ctx, userID, providerID, nil)}
}

// Transport is the RoundTripper of Client over base (nil: http.DefaultTransport),
// for an app whose calls must go through its own transport (custom CAs, a
// proxy, an egress filter). ctx gives the token reads its values only.
func (s *TokenStore) Transport(ctx context.Context, userID, providerID string, base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	src := &storeTokenSource{values: xcontext.ValuesOnly(ctx), s: s, userID: userID, providerID: providerID}
	return &bearerTransport{src: src, base: base}
}

// bearerTransport adds the user's token to each request, read under the request's context.
type bearerTransport struct {
	src  *storeTokenSource
	base http.RoundTripper
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !outbound.SameOrigin(req.URL, outbound.FirstRequest(req).URL) {
		return t.base.RoundTrip(outbound.WithoutCredentials(req)) // a redirect to another origin
	}
	ctx := xcontext.WithValuesOf(req.Context(), t.src.values)
	tok, err := t.src.s.validToken(ctx, t.src.userID, t.src.providerID, nil)
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	resp, err := t.send(req, req.Body, tok)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !replayable(req) {
		return resp, err
	}
	return t.recover(ctx, req, resp, tok.access)
}

// recover answers a 401 to the token sent: one forced refresh, one retry.
func (t *bearerTransport) recover(ctx context.Context, req *http.Request, resp *http.Response, sent string) (*http.Response, error) {
	s := t.src.s
	fresh, err := s.refresher.refreshRejected(ctx, t.src.userID, t.src.providerID, sent)
	switch {
	case errors.Is(err, ErrNoToken):
		discard(resp)
		return nil, err
	case err != nil, fresh.access == sent:
		return resp, nil // the API's own answer: the refresh did not help
	}
	body := req.Body
	if req.GetBody != nil {
		if body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	}
	discard(resp)
	return t.send(req, body, fresh)
}

// send sends req with body and the token tok: as a bearer token, or bound to
// its key with a proof.
func (t *bearerTransport) send(req *http.Request, body io.ReadCloser, tok validRead) (*http.Response, error) {
	r := req.Clone(req.Context())
	r.Body = body
	if tok.key == "" {
		r.Header.Set("Authorization", "Bearer "+tok.access)
		return t.base.RoundTrip(r)
	}
	key, err := t.src.s.keys.get(tok.key)
	if err != nil {
		if body != nil {
			_ = body.Close()
		}
		return nil, err
	}
	r.Header.Del("Authorization")
	dt := dpop.Transport{Base: t.base, Key: key, Nonces: &t.src.s.nonces, Origin: r.URL,
		AccessToken: func(*http.Request) (string, error) { return tok.access, nil }}
	return dt.RoundTrip(r)
}

// replayable reports whether req can be sent a second time.
func replayable(req *http.Request) bool {
	return req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
}

// discard reads a little of an answer that is dropped, so its connection can
// be reused, and closes it.
func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
}
