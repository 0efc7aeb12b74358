package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/outbound"
)

// The MCP transport: an http.RoundTripper bound to one user and one MCP
// server. It sends the user's token (refreshed on expiry, and once more on a
// 401 to the token it sent, as Tokens.Client does), connects the server on
// its first 401, follows the server to another authorization server when a
// 401 to the user's token comes from a server whose metadata names another
// now (SEP-2352; see recheck), and turns what the store cannot fix into
// errors the rest of oauthflow understands: ErrNoToken when the user must sign in (a tool
// reports "unauthorized" and the "oauth" workflow runs its sign-in), and a
// *oauthflow.ScopeError when the server wants scopes the grant lacks (the
// workflow signs in again for the granted and the missing scopes).

// Client returns an *http.Client for an MCP transport (streamable HTTP or
// SSE) to the server at serverURL, as userID. ctx gives its token reads
// their values only, as Tokens.Client does.
func (c *Connector) Client(ctx context.Context, userID, serverURL string) *http.Client {
	return &http.Client{Transport: &transport{c: c, values: context.WithoutCancel(ctx), userID: userID, server: serverURL,
		base: c.http.Transport}}
}

type transport struct {
	c      *Connector
	values context.Context
	userID string
	server string
	base   http.RoundTripper // nil: http.DefaultTransport
}

// UnauthorizedError is a request the MCP server refused that a sign-in can
// fix: it wraps oauthflow.ErrNoToken, or a *oauthflow.ScopeError when the
// server asked for more scopes.
type UnauthorizedError struct {
	ProviderID string
	Status     int
	Challenge  Challenge
	Err        error
}

func (e *UnauthorizedError) Error() string {
	return fmt.Sprintf("mcpauth: the MCP server answered HTTP %d (%s): %v", e.Status, e.ProviderID, e.Err)
}

func (e *UnauthorizedError) Unwrap() error { return e.Err }

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	id, err := ProviderID(t.server)
	if err != nil {
		return nil, closeBody(req, err)
	}
	if !t.serversOrigin(req.URL) {
		return t.baseRT().RoundTrip(outbound.WithoutCredentials(req))
	}
	connected, err := t.connected(req.Context(), id)
	if err != nil {
		return nil, closeBody(req, err)
	}
	var resp *http.Response
	answers := &tokenAnswers{t: t, id: id}
	if connected {
		resp, err = t.c.cfg.Module.Tokens.Transport(t.values, t.userID, id, answers).RoundTrip(req)
	} else {
		resp, err = t.baseRT().RoundTrip(req)
	}
	if answers.err != nil && (err != nil || resp.StatusCode == http.StatusUnauthorized) {
		if resp != nil {
			discard(resp)
		}
		return nil, answers.err // the server moved, maybe, and could not be followed
	}
	if err != nil {
		if errors.Is(err, oauthflow.ErrNoToken) {
			return nil, &UnauthorizedError{ProviderID: id, Status: answers.status, Challenge: answers.ch, Err: err}
		}
		return nil, err
	}
	ch, _ := ParseChallenge(resp.Header)
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
	case resp.StatusCode == http.StatusForbidden && ch.Error == "insufficient_scope":
	default:
		return resp, nil
	}
	discard(resp)
	if _, err := t.c.Connect(req.Context(), t.server, ch); err != nil {
		return nil, err
	}
	return nil, t.c.unauthorized(req.Context(), t.userID, id, resp.StatusCode, ch)
}

// tokenAnswers is the transport under the token store's, which sees each
// answer to a request that carried the user's token: a 401 has the server
// checked for a move to another authorization server (Connector.recheck),
// before the store tries a refresh of the token.
type tokenAnswers struct {
	t      *transport
	id     string
	status int       // the last 401's, 0 when none came
	ch     Challenge // its challenge
	err    error     // why the check failed
}

func (a *tokenAnswers) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.t.baseRT().RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || !carriesToken(req, a.t.server) {
		return resp, err
	}
	a.status = resp.StatusCode
	a.ch, _ = ParseChallenge(resp.Header)
	a.err = a.t.c.recheck(req.Context(), a.t.userID, a.id, a.ch)
	return resp, nil
}

// unauthorized is the error for a 401 or 403 that the store could not fix:
// for missing scopes, a ScopeError naming them.
func (c *Connector) unauthorized(ctx context.Context, userID, id string, status int, ch Challenge) error {
	e := &UnauthorizedError{ProviderID: id, Status: status, Challenge: ch, Err: oauthflow.ErrNoToken}
	if status != http.StatusForbidden || len(ch.Scopes) == 0 {
		return e
	}
	var granted []string
	if tok, err := c.cfg.Module.Tokens.GetTokens(ctx, userID, id); err == nil {
		granted = strings.Fields(tok.Scope)
	}
	var missing []string
	for _, s := range ch.Scopes {
		if !slices.Contains(granted, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		// The grant holds every scope the server asks for and it still
		// refuses: another sign-in would end the same way. That is the
		// step-up's limit: the server's refusal, not "sign in".
		e.Err = fmt.Errorf("%w: the server wants %s, which the grant already has", errStepUpExhausted, strings.Join(ch.Scopes, " "))
		return e
	}
	e.Err = &oauthflow.ScopeError{ProviderID: id, Granted: granted, Missing: missing}
	return e
}

// errStepUpExhausted is a 403 insufficient_scope for scopes already granted.
var errStepUpExhausted = errors.New("mcpauth: the MCP server refuses the scopes it asked for")

// connected reports whether the server has been connected, by any instance.
func (t *transport) connected(ctx context.Context, id string) (bool, error) {
	if t.c.cfg.Module.Registry.Has(id) {
		return true, nil
	}
	_, ok, err := t.c.load(ctx, id)
	return ok, err
}

// serversOrigin reports whether u is on the origin of the connection's
// server. Nothing else gets its token, and no answer from elsewhere connects
// anything: the Go SDK's SSE transport posts to whatever URL the server's
// endpoint event names, and a server may redirect anywhere.
func (t *transport) serversOrigin(u *url.URL) bool {
	s, err := url.Parse(t.server)
	return err == nil && outbound.SameOrigin(u, s)
}

func (t *transport) baseRT() http.RoundTripper {
	if t.base != nil {
		return t.base
	}
	return http.DefaultTransport
}

func discard(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
}

// closeBody closes req's body, as a RoundTripper must even when it fails.
func closeBody(req *http.Request, err error) error {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	return err
}
