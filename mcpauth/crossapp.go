package mcpauth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"

	"github.com/oauthflow/oauthflow"
)

// Cross-app access (SEP-990, enterprise-managed authorization): a user
// signed in to the enterprise's identity provider reaches an MCP server
// without a sign-in of its own. The user's ID token is exchanged at the IdP
// (RFC 8693 token exchange) for an identity assertion JWT authorization
// grant (ID-JAG) for the server's authorization server and resource, which
// that server takes as a JWT bearer grant (RFC 7523) from the client.

// crossAppRefreshMark, followed by the user ID, stands in for the refresh
// token that a JWT bearer grant does not give: on expiry the store runs the
// exchange again, for the user it names, with that user's ID token.
const crossAppRefreshMark = "id-jag:"

// xaaSuffix ends the provider ID of a server reached through cross-app access.
const xaaSuffix = "-xaa"

// CrossApp is the enterprise identity provider the app's users sign in
// with (Config.CrossApp).
type CrossApp struct {
	TokenURL string // the IdP's token endpoint
	ClientID string // the app's client ID at the IdP
	// IDToken returns userID's current ID token from the IdP (the app keeps
	// it from the user's sign-in to the app).
	IDToken func(ctx context.Context, userID string) (string, error)
}

// assertionGrant exchanges the user's ID token at the IdP for an ID-JAG for
// the authorization server issuer and resource.
func (x *CrossApp) assertionGrant(ctx context.Context, userID, id, issuer, resource string, client *http.Client) (string, error) {
	idToken, err := x.IDToken(ctx, userID)
	if err != nil {
		return "", fmt.Errorf("mcpauth: the user's ID token: %w", err)
	}
	form := url.Values{
		"grant_type":           {"urn:ietf:params:oauth:grant-type:token-exchange"},
		"subject_token":        {idToken},
		"subject_token_type":   {"urn:ietf:params:oauth:token-type:id_token"},
		"requested_token_type": {"urn:ietf:params:oauth:token-type:id-jag"},
		"audience":             {issuer},
		"resource":             {resource},
		"client_id":            {x.ClientID},
	}
	a, err := postToken(ctx, client, id, x.TokenURL, form, nil)
	if err != nil {
		return "", fmt.Errorf("mcpauth: the IdP's token exchange: %w", err)
	}
	return a.AccessToken, nil
}

// ConnectCrossApp connects the MCP server at serverURL for userID through
// the identity provider of Config.CrossApp: discovery (with ch, the
// challenge of the server's 401, when there is one), a provider that
// exchanges the user's ID token for an ID-JAG and that for a token,
// authenticated with Config.Clients' credentials for the server's verified
// issuer (for a 2025-03-26 server, its origin, whatever issuer it claims),
// and a first token stored. It returns the provider ID. Each user's tokens,
// the refreshed ones too, come from that user's own ID token.
func (c *Connector) ConnectCrossApp(ctx context.Context, serverURL, userID string, ch Challenge) (string, error) {
	if c.cfg.CrossApp == nil {
		return "", fmt.Errorf("%w: cross-app access needs Config.CrossApp", oauthflow.ErrInvalidArgument)
	}
	return c.connectGrant(ctx, serverURL, userID, ch, xaaSuffix)
}
