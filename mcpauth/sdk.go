package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/outbound"
	"golang.org/x/oauth2"
)

// OAuthHandler lets a client of the official MCP Go SDK
// (github.com/modelcontextprotocol/go-sdk) talk to a protected server as one
// user of the Module: it satisfies the SDK's auth.OAuthHandler, so it goes in
// mcp.StreamableClientTransport's OAuthHandler field. The tokens are the
// store's: shared by every instance, refreshed once across them.
type OAuthHandler struct {
	Connector *Connector
	UserID    string
	ServerURL string
	// SignIn, when set, takes the user through the sign-in at authURL (a
	// browser the app drives, a device, a test's headless consent) and
	// returns the query the authorization server redirected to the callback
	// with. Nil: Authorize fails with an *UnauthorizedError wrapping
	// oauthflow.ErrNoToken (or a *oauthflow.ScopeError), and the app sends the
	// user through the "oauth" workflow (Module.StartSignIn).
	SignIn func(ctx context.Context, authURL string) (url.Values, error)
	// AsClient has the handler reach the server as the client itself, with
	// the client credentials grant and Config.Clients' credentials, instead
	// of as a user who signs in; UserID is then the app's name for the agent.
	AsClient bool
	// CrossApp has the handler reach the server through the user's
	// enterprise identity provider (Config.CrossApp, cross-app access)
	// instead of a sign-in of the server's own.
	CrossApp bool
	// Workload has the handler reach the server as the workload the app
	// runs as, with its platform's JWT (Config.Workload, the JWT bearer
	// grant) and no other grant, instead of as a user who signs in; UserID
	// is then the app's name for the agent.
	Workload bool
}

// providerID is the server's provider ID for the handler's way in.
func (h *OAuthHandler) providerID() (string, error) {
	id, err := ProviderID(h.ServerURL)
	switch {
	case err != nil:
		return "", err
	case h.Workload:
		return id + workloadSuffix, nil
	case h.CrossApp:
		return id + xaaSuffix, nil
	case h.AsClient:
		return id + ccSuffix, nil
	}
	return id, nil
}

// TokenSource returns the user's token source once they have a token for
// the server; nil (no Authorization header) before, so that the server's
// 401 says how to sign in.
func (h *OAuthHandler) TokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	id, err := h.providerID()
	if err != nil {
		return nil, err
	}
	if _, err := h.Connector.cfg.Module.Tokens.GetTokens(ctx, h.UserID, id); errors.Is(err, oauthflow.ErrNoToken) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return h.Connector.cfg.Module.Tokens.TokenSource(ctx, h.UserID, id), nil
}

// Authorize answers the server's 401 or 403 (resp): it connects the server
// from the challenge, and signs the user in for the scopes the server asks
// for (added to those granted, on a 403 insufficient_scope) when SignIn is
// set. A 401 to the user's token first has the server checked for a move to
// another authorization server (SEP-2352): the sign-in then goes there, and
// a credential of the old one fails with [ErrIssuerChanged].
// The SDK then sends the request again.
func (h *OAuthHandler) Authorize(ctx context.Context, req *http.Request, resp *http.Response) error {
	discard(resp)
	ch, _ := ParseChallenge(resp.Header)
	switch {
	case h.Workload:
		_, err := h.Connector.ConnectAsWorkload(ctx, h.ServerURL, h.UserID, ch)
		return err
	case h.CrossApp:
		_, err := h.Connector.ConnectCrossApp(ctx, h.ServerURL, h.UserID, ch)
		return err
	case h.AsClient:
		_, err := h.Connector.ConnectAsClient(ctx, h.ServerURL, h.UserID, ch)
		return err
	}
	if resp.StatusCode == http.StatusUnauthorized && carriesToken(req, h.ServerURL) {
		id, err := ProviderID(h.ServerURL)
		if err != nil {
			return err
		}
		if err := h.Connector.recheck(ctx, h.UserID, id, ch); err != nil {
			return err
		}
	}
	id, err := h.Connector.Connect(ctx, h.ServerURL, ch)
	if err != nil {
		return err
	}
	unauthorized := h.Connector.unauthorized(ctx, h.UserID, id, resp.StatusCode, ch)
	if h.SignIn == nil {
		return unauthorized
	}
	scopes := ch.Scopes
	var se *oauthflow.ScopeError
	if errors.As(unauthorized, &se) {
		scopes = se.Scopes()
	}
	return h.signIn(ctx, id, scopes)
}

// HTTPClient is the client for mcp.StreamableClientTransport's HTTPClient
// beside this handler, over base (nil: the Connector's outbound transport).
// The SDK sends the token it gets from TokenSource as a Bearer token; a
// server whose tokens are bound to a key (DPoP, RFC 9449) refuses that. This
// client sends each request that carries the user's token to the server's
// origin with the token as the store holds it: a bound one as "Authorization:
// DPoP" with a fresh proof, a nonce challenge answered once, and one forced
// refresh on a 401, as Tokens.Client does; the server's 401 after that goes
// back to the SDK, whose Authorize signs the user in. A request to another
// origin, a redirect among them, goes without the token (Authorization and
// DPoP removed), as with Tokens.Client.
func (h *OAuthHandler) HTTPClient(base http.RoundTripper) *http.Client {
	if base == nil {
		base = h.Connector.http.Transport
	}
	if base == nil {
		base = http.DefaultTransport
	}
	return &http.Client{Transport: &sdkTransport{h: h, base: base}}
}

// sdkTransport sends the SDK's requests with the store's token (HTTPClient).
type sdkTransport struct {
	h    *OAuthHandler
	base http.RoundTripper
}

func (t *sdkTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if !t.toServer(req) {
		// Another origin (a redirect, an endpoint the server named): the
		// SDK's Authorization, which net/http copies onto a redirect to the
		// same host or a subdomain, stays off it.
		return t.base.RoundTrip(outbound.WithoutCredentials(req))
	}
	if !carriesToken(req, t.h.ServerURL) {
		return t.base.RoundTrip(req) // no token yet: as the SDK sent it
	}
	id, err := t.h.providerID()
	if err != nil {
		return nil, closeBody(req, err)
	}
	r := req.Clone(req.Context())
	r.Header.Del("Authorization") // the store's transport sets it, with the scheme the token needs
	resp, err := t.h.Connector.cfg.Module.Tokens.Transport(req.Context(), t.h.UserID, id, t.base).RoundTrip(r)
	if errors.Is(err, oauthflow.ErrNoToken) && req.GetBody != nil {
		// The store has no usable token (a 401 its refresh did not cure):
		// the request goes as the SDK sent it, so that the server's own 401
		// reaches the SDK, whose Authorize takes it from there.
		body, gerr := req.GetBody()
		if gerr != nil {
			return nil, err
		}
		again := req.Clone(req.Context())
		again.Body = body
		return t.base.RoundTrip(again)
	}
	return resp, err
}

// toServer reports whether req goes to the origin of the handler's server,
// the only one its token is for.
func (t *sdkTransport) toServer(req *http.Request) bool {
	s, err := url.Parse(t.h.ServerURL)
	return err == nil && outbound.SameOrigin(req.URL, s)
}

// signIn runs the "oauth" workflow for the user and completes it with what
// SignIn brings back, through the Module's own callback.
func (h *OAuthHandler) signIn(ctx context.Context, id string, scopes []string) error {
	m := h.Connector.cfg.Module
	_, doc, err := m.StartSignIn(ctx, h.UserID, id, scopes...)
	if err != nil {
		return err
	}
	q, err := h.SignIn(ctx, doc.AuthURL)
	if err != nil {
		return err
	}
	cb, err := http.NewRequestWithContext(ctx, http.MethodGet, oauthflow.CallbackPath+"?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	w := &pageWriter{header: http.Header{}, status: http.StatusOK}
	m.CallbackHandler().ServeHTTP(w, cb)
	if w.status != http.StatusOK {
		return fmt.Errorf("mcpauth: the sign-in to %s did not complete: HTTP %d", id, w.status)
	}
	if _, err := m.Tokens.GetTokens(ctx, h.UserID, id); err != nil {
		return fmt.Errorf("mcpauth: the sign-in to %s stored no token: %w", id, err)
	}
	return nil
}

// pageWriter takes the callback's page when the sign-in is completed
// in-process: only its status matters.
type pageWriter struct {
	header http.Header
	status int
}

func (w *pageWriter) Header() http.Header         { return w.header }
func (w *pageWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *pageWriter) WriteHeader(status int)      { w.status = status }
