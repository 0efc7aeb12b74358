// Package mcpauth makes an OAuth-protected MCP server one more oauthflow
// provider: per user, across instances. Given the server's URL it discovers
// the server's authorization (RFC 9728 resource metadata, RFC 8414
// authorization server metadata), registers a client once per authorization
// server for every instance (pre-registered credentials, a Client ID
// Metadata Document, or RFC 7591 dynamic registration), and builds a
// provider whose sign-ins and refreshes name the server as their resource
// (RFC 8707). The oauthflow package does not import it.
//
// What a server says is input: its challenge, its metadata, its registration
// answers and its redirects. Nothing secret (a code, a verifier, a client
// secret or assertion, a token) leaves for an origin not verified for it,
// and every call the Connector makes goes through one outbound policy:
// https only, with plain http for loopback hosts alone (local development:
// only a server that is itself plain http on a loopback host may name plain
// http endpoints, and an https server never); no redirect followed; loopback, private, link-local and other non-public
// addresses refused where the connection is dialed, so DNS rebinding cannot
// get round it (Config.AllowPrivateNetworks opens private and loopback
// addresses for internal deployments, never link-local); a deadline on every
// call. A sign-in records the issuer it was sent to, and a callback naming
// another is refused; a user's token goes to its server's origin only.
//
// Nothing the store keeps of a server is trusted for long. A dynamic
// registration is stored under the issuer discovery verified (for a server
// without resource metadata, its origin, whatever issuer its metadata
// claims), sealed with the module's key ring, with its provenance; it serves
// only while discovery still names that issuer and registration endpoint and
// until its secret's expiry, and a refusal of the client at the token
// endpoint rediscovers the server and registers again. A refusal at the
// authorization page arrives through the browser, a claim anyone with a
// sign-in can make: it heals only once the token endpoint confirms it. The
// app's own clients (Config.Clients, SetClients) are read at each
// use and never stored. A server record lives 7 days from its last use and
// is rediscovered when a day old; the server's URL, kept 90 days from a
// user's last sign-in or refresh, rebuilds a record gone while tokens live.
//
// A server may move to another authorization server (SEP-2352): a 401 to a
// user's token has its resource metadata read again (once per server per 30
// seconds, across instances), and when the verified issuer changed the
// record follows it, the next sign-in registers there, and every credential
// stays with the server that issued it: a grant of the old one is refused
// without a request (ErrIssuerChanged), never sent to the new one. An
// authorization server that takes DPoP proofs (ES256 among its
// dpop_signing_alg_values_supported) gets grants bound to a key (RFC 9449;
// see UsesDPoP on [oauthflow.Provider]); with the Go SDK's transport, set its
// HTTPClient to OAuthHandler.HTTPClient, since the SDK sends every token as
// Bearer.
//
// An agent may also reach a server as itself, with no sign-in, by a grant
// of its own, each under a provider ID of its own: the client credentials
// grant (ConnectAsClient), cross-app access through the enterprise identity
// provider its users sign in with (ConnectCrossApp), or workload identity
// federation with the JWT its platform issues it (ConnectAsWorkload, the
// JWT bearer grant of RFC 7523). A workload's grant is the only one tried:
// a refusal is returned, no other grant follows it, and for five minutes,
// on every instance, the grant is not asked again. The tokens these grants
// give are fetched anew by the same grant when they expire. At an
// authorization server that takes DPoP proofs they too are bound to a key,
// one per connection, kept with the token and proved again by every grant
// that fetches a new one.
package mcpauth
