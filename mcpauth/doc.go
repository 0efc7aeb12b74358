// Package mcpauth makes an OAuth-protected MCP server one more oauthflow
// provider: per user, across instances. Given the server's URL it discovers
// the server's authorization (RFC 9728 resource metadata, RFC 8414
// authorization server metadata), registers a client once per authorization
// server for every instance (pre-registered credentials, a Client ID
// Metadata Document, or RFC 7591 dynamic registration), and builds a
// provider whose sign-ins and refreshes name the server as their resource
// (RFC 8707). The oauthflow package does not import it.
package mcpauth
