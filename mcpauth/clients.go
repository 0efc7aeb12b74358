package mcpauth

import "maps"

// SetClients replaces the app's pre-registered clients (Config.Clients), as
// after rotating a secret: the next sign-in, code exchange or refresh of
// every provider this Connector built uses them. Each instance holds its
// own Connector: set them on each (they are never stored).
func (c *Connector) SetClients(clients map[string]Client) {
	m := maps.Clone(clients)
	c.clients.Store(&m)
}

// presetClient is the app's own client for issuer as the Connector holds it
// now: the one configured for issuer, else the one under "*".
func (c *Connector) presetClient(issuer string) (Client, bool) {
	clients := *c.clients.Load()
	for _, key := range []string{issuer, issuer + "/", "*"} {
		if cl, ok := clients[key]; ok {
			return cl, true
		}
	}
	return Client{}, false
}
