package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
)

// Workload identity federation (SEP-1933): an agent that runs with no user
// (a Kubernetes pod, a SPIFFE workload, a cloud function) reaches an MCP
// server as itself with the JWT its platform issues it (a projected service
// account token, a JWT-SVID, a cloud identity token), which the server's
// authorization server takes as a JWT bearer authorization grant (RFC 7523
// §2.1) instead of a client secret. That grant is the only one tried: a
// refusal is the answer, never a reason to sign in or to send client
// credentials instead, and the grant is not asked again until
// workloadRefusalHold has passed. Its tokens are stored under the app's name
// for the agent and fetched again, with a fresh JWT, when they expire.

// jwtBearerGrant is the grant type of RFC 7523 §2.1.
const jwtBearerGrant = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// workloadRefreshMark, followed by the app's name for the agent, stands in
// for the refresh token a JWT bearer grant does not give: on expiry the
// store runs the grant again, with the platform's JWT of that moment.
const workloadRefreshMark = "workload:"

// workloadSuffix ends the provider ID of a server reached as the workload.
const workloadSuffix = "-wif"

// workloadRefusalHold is how long a refusal of the workload's grant answers
// every later grant of the same agent at the same server, on every
// instance, without a token request.
const workloadRefusalHold = 5 * time.Minute

// Workload is the platform identity the app runs as (Config.Workload).
type Workload struct {
	// Assertion returns the platform's JWT for audience: the authorization
	// server's issuer (for a 2025-03-26 server, its origin), which the JWT's
	// aud must name. It is called for every grant, the first and each one
	// on expiry, so a short-lived token is read anew each time.
	Assertion func(ctx context.Context, audience string) (string, error)
}

// ConnectAsWorkload connects the MCP server at serverURL for the agent
// itself, as the workload of Config.Workload: discovery (with ch, the
// challenge of the server's 401, when there is one), a provider that
// fetches tokens with the JWT bearer grant, and a first token stored for
// userID, the app's name for the agent. The authorization server must
// advertise the grant (grant_types_supported). The request carries the
// client authentication of Config.Clients for the server's verified issuer
// when there is a client for it, and none otherwise: the JWT is the
// workload's credential. It returns the provider ID; reads of userID's
// token for it fetch a new one, with a fresh JWT, when it expires.
//
// A refusal (any answer of the token endpoint but a token or a transient
// one: a server error, 408, 429, temporarily_unavailable) is returned, and for five minutes it is the answer to every grant
// for userID at the server, on every instance, with no request: the MCP Go
// SDK's connection, which falls back from server/discover to initialize
// and meets a second 401, does not send the refused grant again. No other
// grant is ever tried.
func (c *Connector) ConnectAsWorkload(ctx context.Context, serverURL, userID string, ch Challenge) (string, error) {
	if w := c.cfg.Workload; w == nil || w.Assertion == nil {
		return "", fmt.Errorf("%w: workload identity federation needs Config.Workload and its Assertion", oauthflow.ErrInvalidArgument)
	}
	return c.connectGrant(ctx, serverURL, userID, ch, workloadSuffix)
}

// workloadProvider makes p the workload's provider, if its authorization
// server offers the JWT bearer grant.
func (c *Connector) workloadProvider(p *ccProvider) (*ccProvider, error) {
	if p.workload = c.cfg.Workload; p.workload == nil || p.workload.Assertion == nil {
		return nil, fmt.Errorf("%w: %s needs Config.Workload", oauthflow.ErrUnknownProvider, p.id)
	}
	if !slices.Contains(p.d.AS.GrantTypesSupported, jwtBearerGrant) {
		return nil, fmt.Errorf("%w: the authorization server %s does not advertise the JWT bearer grant (%s in grant_types_supported), the only way a workload reaches %s",
			ErrDiscovery, verifiedIssuer(&p.d), jwtBearerGrant, p.d.Resource)
	}
	return p, nil
}

// workloadGrant asks the token endpoint for a token with the platform's JWT
// for the authorization server, unless a refusal of the grant is held; key
// is as for grant.
func (p *ccProvider) workloadGrant(ctx context.Context, userID string, key *dpop.Key) (*oauthflow.TokenSet, error) {
	if err := p.conn.heldRefusal(ctx, p.id, userID); err != nil {
		return nil, err
	}
	assertion, err := p.workload.Assertion(ctx, p.issuer)
	if err != nil {
		return nil, fmt.Errorf("mcpauth: the workload's JWT for %s: %w", p.issuer, err)
	}
	if assertion == "" {
		return nil, fmt.Errorf("mcpauth: the workload's JWT for %s is empty", p.issuer)
	}
	form := url.Values{"grant_type": {jwtBearerGrant}, "assertion": {assertion}, "resource": {p.d.Resource}}
	var cl *Client
	if preset, err := p.currentClient(); err == nil {
		cl = &preset
	}
	a, err := p.post(ctx, form, cl, key)
	if err != nil {
		return nil, p.conn.keepRefusal(ctx, p.id, userID, err)
	}
	return &oauthflow.TokenSet{AccessToken: a.AccessToken, RefreshToken: workloadRefreshMark + userID,
		ExpiresIn: a.ExpiresIn, Scope: a.Scope, TokenType: a.TokenType}, nil
}

// workloadRefusal is a refusal of a workload's grant, as the store keeps it.
type workloadRefusal struct {
	Status      int       `json:"status"`
	Code        string    `json:"error,omitempty"`
	Description string    `json:"error_description,omitempty"`
	Until       time.Time `json:"until"`
}

// refusalKey names the refusal of userID's grant at the server id (an ID
// has no space), hashed as an issuer's records are.
func refusalKey(id, userID string) string { return issuerKey("wifrefused", id+" "+userID) }

// keepRefusal keeps err, when the token endpoint answered it (any answer
// but a transient one: a 5xx, a 408 or 429, temporarily_unavailable, or no
// answer at all may pass), as the answer to userID's grants at the server
// id for workloadRefusalHold. It returns err.
func (c *Connector) keepRefusal(ctx context.Context, id, userID string, err error) error {
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode == 0 || oauthflow.IsTransient(err) {
		return err
	}
	b, _ := json.Marshal(workloadRefusal{Status: pe.StatusCode, Code: pe.Code, Description: pe.Description,
		Until: time.Now().Add(workloadRefusalHold)})
	if serr := c.kv.Set(ctx, refusalKey(id, userID), b, workloadRefusalHold); serr != nil {
		return errors.Join(err, fmt.Errorf("mcpauth: the refusal could not be kept: %w", serr))
	}
	return err
}

// heldRefusal is the refusal of userID's grant at the server id that an
// instance kept, as a *oauthflow.ProviderError; nil when there is none.
func (c *Connector) heldRefusal(ctx context.Context, id, userID string) error {
	raw, err := c.kv.Get(ctx, refusalKey(id, userID))
	if errors.Is(err, oauthflow.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var r workloadRefusal
	if json.Unmarshal(raw, &r) != nil {
		r = workloadRefusal{} // unreadable: held all the same
	}
	return fmt.Errorf("mcpauth: the workload's JWT bearer grant was refused, and is not asked again before %s: %w",
		r.Until.Format(time.RFC3339), &oauthflow.ProviderError{ProviderID: id, StatusCode: r.Status, Code: r.Code, Description: r.Description})
}
