package authserver

import (
	"encoding/json"
	"net/http"
	"net/url"
)

// This file implements Rich Authorization Requests (RFC 9396): an
// authorization request, in its query or pushed (RFC 9126), may carry
// authorization_details, a JSON array of objects each with a string "type"
// (§2). The code keeps them; its exchange grants them and names them in the
// token answer (§7), and so does every refresh of the grant.
// Options.AuthorizationDetails decides what is granted and answered instead.

// paramAuthorizationDetails is the authorization request's parameter (RFC 9396 §3).
const paramAuthorizationDetails = "authorization_details"

// errInvalidDetails refuses an authorization request's details (RFC 9396 §5).
func errInvalidDetails(desc string) *oauthError {
	return newError(http.StatusBadRequest, "invalid_authorization_details", desc)
}

// requestedDetails reads q's authorization_details: nil when absent, else a
// JSON array of objects, each with a non-empty string "type".
func requestedDetails(q url.Values) (json.RawMessage, *oauthError) {
	if !q.Has(paramAuthorizationDetails) {
		return nil, nil
	}
	var items []map[string]json.RawMessage
	if err := json.Unmarshal([]byte(q.Get(paramAuthorizationDetails)), &items); err != nil {
		return nil, errInvalidDetails("authorization_details must be a JSON array of objects")
	}
	for _, it := range items {
		var typ string
		if json.Unmarshal(it["type"], &typ) != nil || typ == "" {
			return nil, errInvalidDetails(`every authorization detail needs a string "type"`)
		}
	}
	return json.RawMessage(q.Get(paramAuthorizationDetails)), nil
}

// answerDetails is what a token answer of grantType names as the grant's
// authorization details, given those it holds (at a code exchange, those
// asked for): Options.AuthorizationDetails' answer when it is set, else
// held. A nil answer leaves the field out.
func (s *Server) answerDetails(grantType string, held json.RawMessage) json.RawMessage {
	if s.opts.AuthorizationDetails == nil {
		return held
	}
	return s.opts.AuthorizationDetails(grantType, held)
}
