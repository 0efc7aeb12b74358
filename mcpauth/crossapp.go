package mcpauth

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
)

// Cross-app access (SEP-990, enterprise-managed authorization): a user
// signed in to the enterprise's identity provider reaches an MCP server
// without a sign-in of its own. The user's ID token is exchanged at the IdP
// (RFC 8693 token exchange) for an identity assertion JWT authorization
// grant (ID-JAG) for the server's authorization server and resource, which
// that server takes as a JWT bearer grant (RFC 7523) from the client.

// crossAppRefreshMark stands in for the refresh token that a JWT bearer
// grant does not give: on expiry the store runs the exchange again.
const crossAppRefreshMark = "id-jag"

// xaaSuffix ends the provider ID of a server reached through cross-app access.
const xaaSuffix = "-xaa"

// CrossApp is the user's enterprise identity provider.
type CrossApp struct {
	TokenURL string // the IdP's token endpoint
	ClientID string // the app's client ID at the IdP
	// IDToken returns the user's current ID token from the IdP.
	IDToken func(ctx context.Context) (string, error)
}

// assertionGrant exchanges the user's ID token at the IdP for an ID-JAG for
// the authorization server issuer and resource.
func (x *CrossApp) assertionGrant(ctx context.Context, id, issuer, resource string, client *http.Client) (string, error) {
	idToken, err := x.IDToken(ctx)
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
// the user's identity provider: discovery (with ch, the challenge of the
// server's 401, when there is one), a provider that exchanges the user's ID
// token for an ID-JAG and that for a token, authenticated with
// Config.Clients' credentials for the server's issuer, and a first token
// stored. It returns the provider ID.
func (c *Connector) ConnectCrossApp(ctx context.Context, serverURL, userID string, ch Challenge, idp *CrossApp) (string, error) {
	return c.connectGrant(ctx, serverURL, userID, ch, xaaSuffix, idp)
}
