package oauthflow

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// This file implements Rich Authorization Requests (RFC 9396). A sign-in may
// ask for authorization details besides its scopes: a JSON array of objects,
// each naming its "type" (§2), such as one payment or access to one account.
// They are checked where they come in (build_oauth_url's arguments,
// [OAuthWorkflowArgs]), kept with the pending sign-in ([Session]) and sent as
// the authorization request's authorization_details parameter, in the URL or
// in the pushed request (RFC 9126), however the sign-in is opened. What the
// provider granted, the token answer's authorization_details (§7), is kept
// with the tokens ([StoredTokens]), through refreshes that do not name them
// again, and listed on the user's [Connection].

// Bounds of authorization details.
const (
	maxAskedDetailsLen   = 8 << 10  // bytes of the details a sign-in asks for, as given
	maxGrantedDetailsLen = 16 << 10 // bytes of the details kept with a grant: a server may add to what was asked
)

// paramAuthorizationDetails is the authorization request's parameter (RFC 9396 §3).
const paramAuthorizationDetails = "authorization_details"

// errBadDetails says what authorization details must be.
var errBadDetails = errors.New(`not a JSON array of objects, each with a non-empty string "type"`)

// askedDetails checks the authorization details a sign-in asks for and
// returns them compact; nil when there are none (absent, null or []). Bad
// details are refused with a *FlowError wrapping ErrInvalidArgument that
// says why.
func askedDetails(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > maxAskedDetailsLen {
		return nil, refusedDetails(fmt.Errorf("%d bytes, more than %d", len(raw), maxAskedDetailsLen))
	}
	d, err := parseDetails(raw)
	if err != nil {
		return nil, refusedDetails(err)
	}
	return d, nil
}

// refusedDetails is the refusal of a sign-in whose authorization details are
// not what why says.
func refusedDetails(why error) error {
	return &FlowError{Message: "The sign-in request is not valid.", Err: errs.Invalid("authorizationDetails: %w", why)}
}

// noDetails refuses authorization details where no request can carry them
// (a sign-in with a code, RFC 8628); none (absent, null or []) is nil.
func noDetails(raw json.RawMessage) error {
	d, err := askedDetails(raw)
	if err == nil && d != nil {
		err = refusedDetails(errors.New("a sign-in with a code does not carry them"))
	}
	return err
}

// grantedDetails is what a grant keeps of the authorization details its
// provider answered: them, compact, when they are well formed and within
// maxGrantedDetailsLen; nil, and why not, otherwise. None (absent, null or
// []) is nil and no error.
func grantedDetails(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) > maxGrantedDetailsLen {
		return nil, fmt.Errorf("%s: %d bytes, more than %d", paramAuthorizationDetails, len(raw), maxGrantedDetailsLen)
	}
	d, err := parseDetails(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", paramAuthorizationDetails, err)
	}
	return d, nil
}

// parseDetails checks that raw is a JSON array of objects, each with a
// non-empty string "type" (RFC 9396 §2), and returns it as json.Marshal
// writes it: compact, and with <, > and & escaped, so that a record that
// holds it encodes it unchanged; nil for none.
func parseDetails(raw json.RawMessage) (json.RawMessage, error) {
	if len(raw) == 0 {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, errBadDetails
	}
	for i, it := range items {
		if !wellFormedDetail(it) {
			return nil, fmt.Errorf(`item %d is not an object with a non-empty string "type"`, i)
		}
	}
	if len(items) == 0 {
		return nil, nil
	}
	b, err := json.Marshal(raw) // compact, in the form every record that holds them is encoded in
	if err != nil {
		return nil, errBadDetails // unreachable: raw decoded above
	}
	return b, nil
}

// wellFormedDetail reports whether it is an authorization detail: an object
// whose "type" (the exact key) is a non-empty string.
func wellFormedDetail(it json.RawMessage) bool {
	var fields map[string]json.RawMessage
	if json.Unmarshal(it, &fields) != nil || fields == nil {
		return false
	}
	var typ string
	return json.Unmarshal(fields["type"], &typ) == nil && typ != ""
}

// keptDetails is what a grant of providerID keeps of the authorization
// details its provider answered (grantedDetails). Details it cannot keep are
// logged and left out: the grant is stored all the same, its code spent.
func (r *tokenRecords) keptDetails(providerID string, answered json.RawMessage) json.RawMessage {
	d, err := grantedDetails(answered)
	if err != nil {
		r.events.log.Warn("oauthflow: the granted authorization details are not kept",
			"provider", providerID, "error", err.Error())
	}
	return d
}
