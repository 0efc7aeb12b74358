// Package dpop holds the building blocks of DPoP (RFC 9449), which binds
// OAuth tokens to a key the client holds, so that a token copied from a log,
// a store or the wire is of no use without that key.
//
// The client side: a Key (ES256) signs a fresh proof for each request with
// Key.Proof; Nonces remembers the DPoP-Nonce each server last sent; Challenge
// reads a response for a use_dpop_nonce challenge; and Transport, an
// http.RoundTripper, does all of that for the requests to one origin, retrying
// once when the server asks for a nonce. The token store keeps a Key sealed
// (MarshalBinary, ParseKey) and names it to the authorization server by its
// Thumbprint (dpop_jkt).
//
// The server side: Verify checks a proof the way an authorization server or
// a resource server does (RFC 9449 §4.3), for the in-process test servers.
package dpop
