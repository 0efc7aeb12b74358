package oauthflowtest

import (
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
)

// Grant types a [Failure] may be limited to.
const (
	GrantAuthorizationCode = "authorization_code"                           // the code exchange after a sign-in
	GrantRefreshToken      = "refresh_token"                                // a refresh
	GrantDeviceCode        = "urn:ietf:params:oauth:grant-type:device_code" // a device sign-in's poll (RFC 8628)
)

// Failure scripts the answer to one token request, before the server looks at
// it: the code or refresh token the request carries stays usable.
//
// Delay alone slows the request down and then answers it normally; it ends
// early when the client gives up or the server closes. Status, Error or Body
// replace the answer:
//
//	Failure{Status: 503}                                      // 503 {"error":"temporarily_unavailable"}
//	Failure{Grant: GrantRefreshToken, Error: "invalid_grant"} // 400: the grant is dead
//	Failure{Status: 502, Body: "<html>bad gateway"}           // any body, sent as is
type Failure struct {
	// Grant limits the failure to one grant type; empty matches any.
	Grant string
	// Delay is how long to wait before answering.
	Delay time.Duration
	// Status is the HTTP status; 0 means 401 for invalid_client, 400 for
	// another Error, and 200 for a Body.
	Status int
	// Error is the RFC 6749 error code; empty means one that fits Status.
	Error string
	// Description is the error_description.
	Description string
	// Body, when set, is sent verbatim: as application/json when it is valid
	// JSON, as text/html otherwise.
	Body string
}

// FailNext queues failures for the coming token requests. Each [Failure] is
// used once, by the first token request it matches, in the order they were
// queued.
func (s *Server) FailNext(failures ...Failure) {
	queued := make([]authserver.Failure, len(failures))
	for i, f := range failures {
		queued[i] = authserver.Failure(f)
	}
	s.as.FailNext(queued...)
}
