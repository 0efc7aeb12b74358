// Package clientauth is private_key_jwt client authentication (RFC 7523
// §2.2, RFC 7521 §4.2): a client proves who it is at an authorization
// server's endpoints with a short-lived JWT it signs with its private key,
// instead of a shared secret. Each request gets an assertion of its own (a
// fresh jti), so a server that remembers the jtis it accepted takes each
// once.
//
// The providers package and mcpauth both sign with it. It never imports the
// root package.
package clientauth
