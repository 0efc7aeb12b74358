// Package mcpauth makes an OAuth-protected MCP server one more oauthflow
// provider: per user, across instances. Given the server's URL it discovers
// the server's authorization (RFC 9728 resource metadata, RFC 8414
// authorization server metadata), registers a client once per authorization
// server for every instance (pre-registered credentials, a Client ID
// Metadata Document, or RFC 7591 dynamic registration), and builds a
// provider whose sign-ins and refreshes name the server as their resource
// (RFC 8707). The oauthflow package does not import it.
//
// Nothing the store keeps of a server is trusted for long. A dynamic
// registration is stored under the issuer discovery verified (for a server
// without resource metadata, its origin, whatever issuer its metadata
// claims), sealed with the module's key ring, with its provenance; it serves
// only while discovery still names that issuer and registration endpoint and
// until its secret's expiry, and a refusal of the client at the token
// endpoint or the authorization page rediscovers the server and registers
// again. The app's own clients (Config.Clients, SetClients) are read at each
// use and never stored. A server record lives 7 days from its last use and
// is rediscovered when a day old; the server's URL, kept 90 days from a
// user's last sign-in or refresh, rebuilds a record gone while tokens live.
package mcpauth
