package oauthflow

import (
	"context"
	"net/http"
	"time"

	"golang.org/x/oauth2"
)

// Calling an API as the user: an oauth2.TokenSource and an *http.Client over
// the store, each reading (and refreshing) the user's token per call.

// TokenSource adapts the store to oauth2.TokenSource: every Token call returns a
// valid token for the user and provider, refreshing it as needed. ctx gives the
// calls its values (trace IDs) only, never its lifetime: each Token call is
// bounded by the refresh timeout, however long ago the source was made.
func (s *TokenStore) TokenSource(ctx context.Context, userID, providerID string) oauth2.TokenSource {
	return &storeTokenSource{values: valuesOnly(ctx), s: s, userID: userID, providerID: providerID}
}

type storeTokenSource struct {
	values             context.Context
	s                  *TokenStore
	userID, providerID string
}

func (ts *storeTokenSource) Token() (*oauth2.Token, error) {
	ctx, cancel := context.WithTimeout(ts.values, ts.s.refreshTimeout)
	defer cancel()
	return ts.token(ctx)
}

func (ts *storeTokenSource) token(ctx context.Context) (*oauth2.Token, error) {
	access, expiresAt, err := ts.s.validToken(ctx, ts.userID, ts.providerID)
	if err != nil {
		return nil, err
	}
	t := &oauth2.Token{AccessToken: access, TokenType: "Bearer"}
	if expiresAt != 0 {
		t.Expiry = time.UnixMilli(expiresAt).Add(-ts.s.skew)
	}
	return t, nil
}

// Client returns an *http.Client that sends "Authorization: Bearer <token>" with
// every request, reading (and refreshing) the user's token each time under that
// request's own context. ctx gives those reads its values (trace IDs) only,
// never its lifetime, so a Client made in one request serves later ones.
func (s *TokenStore) Client(ctx context.Context, userID, providerID string) *http.Client {
	src := &storeTokenSource{values: valuesOnly(ctx), s: s, userID: userID, providerID: providerID}
	return &http.Client{Transport: &bearerTransport{src: src, base: http.DefaultTransport}}
}

// bearerTransport adds the user's token to each request, read under the request's context.
type bearerTransport struct {
	src  *storeTokenSource
	base http.RoundTripper
}

func (t *bearerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := t.src.token(withValuesOf(req.Context(), t.src.values))
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	tok.SetAuthHeader(r)
	return t.base.RoundTrip(r)
}
