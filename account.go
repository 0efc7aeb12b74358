package oauthflow

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// Who each connection is: after a sign-in the library asks the provider once
// which account the new grant is for, so that an app shows "Connected as
// octocat" and an agent picks the right account. The answer is kept in the
// token record (StoredTokens.Account) and listed by Connections; it is never
// read on a token read, and a failure to learn it never fails the sign-in.

// Optional interfaces a Provider may implement for what a sign-in keeps.
type (
	// AccountReader names the account a new grant is for: it calls the
	// provider's user-info endpoint with client, which authenticates each
	// request with the grant's access token (as Tokens.Client does, a proof
	// included for a DPoP-bound one). "" means the provider did not say.
	AccountReader interface {
		ReadAccount(ctx context.Context, client *http.Client) (string, error)
	}
	// CallbackFielder names the query parameters of the provider's redirect
	// that are kept with the tokens, in StoredTokens.Metadata (QuickBooks'
	// realmId names the company the grant is for).
	CallbackFielder interface{ CallbackFields() []string }
)

// Bounds of what a sign-in keeps.
const (
	accountTimeout  = 5 * time.Second // the user-info call after a sign-in
	maxAccountLen   = 256             // bytes of an account name
	maxMetadata     = 16              // fields kept with the tokens
	maxMetadataLen  = 2048            // bytes of one kept value
	maxCallbackKept = 8               // extra callback parameters carried to the exchange
)

// readAccount fills ts.Account from the provider's user-info endpoint with
// the new access token (bound to key when the answer says DPoP), unless the
// answer named it already. It waits at most accountTimeout, and a failure
// is logged and otherwise ignored.
func (m *Module) readAccount(ctx context.Context, p Provider, ts *TokenSet, key string) {
	r, ok := p.(AccountReader)
	if !ok || ts.Account != "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), accountTimeout)
	defer cancel()
	tok := validRead{access: ts.AccessToken}
	if isDPoP(ts.TokenType) {
		tok.key = key
	}
	base := http.DefaultTransport
	if m.httpClient != nil && m.httpClient.Transport != nil {
		base = m.httpClient.Transport
	}
	client := &http.Client{Timeout: accountTimeout, Transport: &grantTransport{
		t: &bearerTransport{src: &storeTokenSource{s: m.Tokens}, base: base}, tok: tok},
		// A redirect is not followed: the token is for the endpoint's own
		// origin, and a page elsewhere does not speak for the provider.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	account, err := callReadAccount(ctx, r, client)
	if err != nil {
		m.log.WarnContext(ctx, "oauthflow: the account of a new connection could not be read; it is shown without one",
			"provider", p.ProviderID(), "error", logSafeError(err))
		return
	}
	ts.Account = account
}

func callReadAccount(ctx context.Context, r AccountReader, c *http.Client) (account string, err error) {
	defer errs.Recover(&err, "provider ReadAccount")
	return r.ReadAccount(ctx, c)
}

// grantTransport sends each request with one grant's access token (its
// client follows no redirect).
type grantTransport struct {
	t   *bearerTransport
	tok validRead
}

func (g *grantTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return g.t.send(req, req.Body, g.tok)
}

// keepCallbackFields adds to ts.Metadata the callback parameters given: the
// ones its provider declares, which the callback picked (declaredFields).
func keepCallbackFields(ts *TokenSet, given map[string]string) {
	for name, v := range given {
		if ts.Metadata == nil {
			ts.Metadata = map[string]string{}
		}
		ts.Metadata[name] = v
	}
}

// showable is s cut to max bytes (at a rune's start) without the characters
// that would not show as themselves (unshowable), trimmed.
func showable(s string, max int) string {
	s = strings.Map(func(r rune) rune {
		if unshowable(r) {
			return -1
		}
		return r
	}, s)
	if len(s) > max {
		s = strings.ToValidUTF8(s[:max], "")
	}
	return strings.TrimSpace(s)
}

// keptMetadata is md bounded: at most maxMetadata fields (the first by name),
// each value showable and at most maxMetadataLen bytes; nil when empty.
func keptMetadata(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(md), maxMetadata))
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if len(out) == maxMetadata {
			break
		}
		if v := showable(md[k], maxMetadataLen); v != "" && k != "" && len(k) <= 64 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// refreshedMetadata is a refresh answer's metadata (a new instance_url),
// bounded as keptMetadata bounds it, then the stored fields it does not
// name, by name, while there is room: at most maxMetadata in all.
func refreshedMetadata(old, answer map[string]string) map[string]string {
	kept := keptMetadata(answer)
	if kept == nil {
		return old
	}
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if len(kept) >= maxMetadata {
			break
		}
		if _, ok := kept[k]; !ok {
			kept[k] = old[k]
		}
	}
	return kept
}

// signInKept is what a completion learned besides the tokens, for the
// prompt: the account, as stored.
type signInKept struct{ account string }

type signInKeptKey struct{}

func withSignInKept(ctx context.Context, k *signInKept) context.Context {
	return context.WithValue(ctx, signInKeptKey{}, k)
}

// keepAccount tells ctx's completion the account stored with the tokens.
func keepAccount(ctx context.Context, account string) {
	if k, ok := ctx.Value(signInKeptKey{}).(*signInKept); ok {
		k.account = showable(account, maxAccountLen)
	}
}

type callbackFieldsKey struct{}

// withCallbackFields hands the callback's extra parameters to the exchange.
func withCallbackFields(ctx context.Context, fields map[string]string) context.Context {
	if len(fields) == 0 {
		return ctx
	}
	return context.WithValue(ctx, callbackFieldsKey{}, fields)
}

func callbackFieldsOf(ctx context.Context) map[string]string {
	f, _ := ctx.Value(callbackFieldsKey{}).(map[string]string)
	return f
}
