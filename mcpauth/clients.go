package mcpauth

import (
	"fmt"
	"maps"

	"github.com/oauthflow/oauthflow"
)

// anyIssuer is the Config.Clients key of the client for every issuer that
// has none of its own.
const anyIssuer = "*"

// SetClients replaces the app's pre-registered clients (Config.Clients), as
// after rotating a secret: the next sign-in, code exchange or refresh of
// every provider this Connector built uses them. Each instance holds its
// own Connector: set them on each (they are never stored). A client under
// "*" that carries a secret, which New refuses, is never used.
func (c *Connector) SetClients(clients map[string]Client) {
	m := maps.Clone(clients)
	c.clients.Store(&m)
}

// presetClient is the app's own client for issuer as the Connector holds it
// now: the one configured for issuer, else the one under "*" when it
// carries no secret.
func (c *Connector) presetClient(issuer string) (Client, bool) {
	clients := *c.clients.Load()
	for _, key := range []string{issuer, issuer + "/"} {
		if cl, ok := clients[key]; ok {
			return cl, true
		}
	}
	if cl, ok := clients[anyIssuer]; ok && secretless(cl) {
		return cl, true
	}
	return Client{}, false
}

// secretless reports whether cl authenticates without a shared secret: a
// public client, or private_key_jwt, whose assertions each name the one
// authorization server they are for. Only such a client may serve every
// issuer: any MCP server may name any authorization server, an attacker's
// among them, and a secret sent there is the attacker's.
func secretless(cl Client) bool {
	m := cl.authMethod()
	return cl.Secret == "" && (m == "none" || m == "private_key_jwt")
}

// checkAnyIssuer refuses a client under "*" that carries a secret.
func checkAnyIssuer(clients map[string]Client) error {
	if cl, ok := clients[anyIssuer]; ok && !secretless(cl) {
		return fmt.Errorf(`%w: mcpauth.Config.Clients["*"] (client %q) authenticates with a client secret, which would be sent to every authorization server any MCP server names: key a confidential client by its authorization server's issuer ("*" takes a public client or private_key_jwt)`,
			oauthflow.ErrInvalidArgument, cl.ID)
	}
	return nil
}
