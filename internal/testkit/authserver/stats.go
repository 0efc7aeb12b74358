package authserver

import (
	"errors"
	"sync/atomic"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

// Stats counts what the server has answered since it started.
type Stats struct {
	Authorizations  int64 // authorization requests answered with a code
	Denials         int64 // authorization requests answered with access_denied
	TokenRequests   int64 // every POST /token, scripted failures included
	CodeRequests    int64 // POST /token with grant_type=authorization_code
	RefreshRequests int64 // POST /token with grant_type=refresh_token
	CodesExchanged  int64 // codes successfully exchanged for tokens
	Refreshes       int64 // successful refresh grants
	CodeReplays     int64 // codes presented again after they were used (each revokes its grant)
	RefreshReuses   int64 // rotated refresh tokens presented again (each revokes its grant)
	Revocations     int64 // POST /revoke requests from an authenticated client
	APICalls        int64 // GET /api/me answered 200
	UserinfoCalls   int64 // GET /userinfo answered 200

	// Pushed authorization requests (RFC 9126).
	PARRequests         int64 // every POST /par, scripted failures included
	RequestURIsRedeemed int64 // authorization requests that used a pushed request's request_uri
	RequestURIsRefused  int64 // authorization requests refused over a request_uri (unknown, used, expired, with other parameters) or for want of one (RequirePAR)

	// The device authorization grant (RFC 8628). A poll of a code its client holds
	// that no script answers counts once among DevicePending, DeviceSlowDowns,
	// DeviceExpiries, DeviceRedeemedPolls and DeviceTokens, unless it is answered
	// access_denied.
	DeviceAuthorizations int64 // POST /device_authorization answered with a device code
	DevicePolls          int64 // POST /token with the device_code grant, scripted failures included
	DevicePending        int64 // authorization_pending answers
	DeviceSlowDowns      int64 // slow_down answers: polls that came too soon, and those SlowDownNext forced
	DeviceApprovals      int64 // user codes allowed, on the page or by ApproveDevice
	DeviceDenials        int64 // user codes denied, on the page or by DenyDevice
	DeviceExpiries       int64 // expired_token answers
	DeviceTokens         int64 // device codes redeemed for tokens
	DeviceRedeemedPolls  int64 // polls of a device code already redeemed (invalid_grant)

	// DPoP (RFC 9449). Each proof the server checks counts once among Accepted,
	// Invalid, Replayed and NonceChallenges; an accepted one may then be of the wrong
	// key (KeyMismatches).
	DPoPTokenRequests   int64 // POST /token with a DPoP header, whether or not the server does DPoP
	DPoPPARRequests     int64 // POST /par with a DPoP header, whether or not the server does DPoP
	DPoPProofsAccepted  int64 // proofs accepted at the token endpoint or a protected endpoint
	DPoPProofsInvalid   int64 // proofs refused by dpop.Verify, or sent two at once
	DPoPProofsReplayed  int64 // proofs refused because their jti was accepted before
	DPoPNonceChallenges int64 // use_dpop_nonce answers: proofs without the server's current nonce
	DPoPProofsMissing   int64 // requests refused for want of a proof (RequireDPoP, or a bound code or token)
	DPoPKeyMismatches   int64 // proofs of another key than the one the code or token is bound to

	// Client assertions (private_key_jwt, RFC 7523). Each request that carries one
	// counts once among these.
	ClientAssertionsAccepted int64 // assertions that authenticated their client
	ClientAssertionsRefused  int64 // assertions refused: type, signature, claims, or beside another method
	ClientAssertionReplays   int64 // assertions refused because their jti was accepted before
}

type counters struct {
	authorizations, denials                      atomic.Int64
	tokenRequests, codeRequests, refreshRequests atomic.Int64
	codesExchanged, refreshes                    atomic.Int64
	codeReplays, refreshReuses                   atomic.Int64
	revocations, apiCalls, userinfoCalls         atomic.Int64
	parRequests, dpopPARRequests                 atomic.Int64
	requestURIsRedeemed, requestURIsRefused      atomic.Int64
	deviceAuthorizations, devicePolls            atomic.Int64
	devicePending, deviceSlowDowns               atomic.Int64
	deviceApprovals, deviceDenials               atomic.Int64
	deviceExpiries, deviceTokens                 atomic.Int64
	deviceRedeemedPolls                          atomic.Int64
	dpopTokenRequests, dpopProofsAccepted        atomic.Int64
	dpopProofsInvalid, dpopProofsReplayed        atomic.Int64
	dpopNonceChallenges, dpopProofsMissing       atomic.Int64
	dpopKeyMismatches                            atomic.Int64
	clientAssertionsAccepted                     atomic.Int64
	clientAssertionsRefused                      atomic.Int64
	clientAssertionReplays                       atomic.Int64
}

// Stats returns a snapshot of the counters. Each field is read atomically on its own.
func (s *Server) Stats() Stats {
	c := &s.stats
	return Stats{
		Authorizations:  c.authorizations.Load(),
		Denials:         c.denials.Load(),
		TokenRequests:   c.tokenRequests.Load(),
		CodeRequests:    c.codeRequests.Load(),
		RefreshRequests: c.refreshRequests.Load(),
		CodesExchanged:  c.codesExchanged.Load(),
		Refreshes:       c.refreshes.Load(),
		CodeReplays:     c.codeReplays.Load(),
		RefreshReuses:   c.refreshReuses.Load(),
		Revocations:     c.revocations.Load(),
		APICalls:        c.apiCalls.Load(),
		UserinfoCalls:   c.userinfoCalls.Load(),

		PARRequests:         c.parRequests.Load(),
		RequestURIsRedeemed: c.requestURIsRedeemed.Load(),
		RequestURIsRefused:  c.requestURIsRefused.Load(),

		DeviceAuthorizations: c.deviceAuthorizations.Load(),
		DevicePolls:          c.devicePolls.Load(),
		DevicePending:        c.devicePending.Load(),
		DeviceSlowDowns:      c.deviceSlowDowns.Load(),
		DeviceApprovals:      c.deviceApprovals.Load(),
		DeviceDenials:        c.deviceDenials.Load(),
		DeviceExpiries:       c.deviceExpiries.Load(),
		DeviceTokens:         c.deviceTokens.Load(),
		DeviceRedeemedPolls:  c.deviceRedeemedPolls.Load(),

		DPoPTokenRequests:   c.dpopTokenRequests.Load(),
		DPoPPARRequests:     c.dpopPARRequests.Load(),
		DPoPProofsAccepted:  c.dpopProofsAccepted.Load(),
		DPoPProofsInvalid:   c.dpopProofsInvalid.Load(),
		DPoPProofsReplayed:  c.dpopProofsReplayed.Load(),
		DPoPNonceChallenges: c.dpopNonceChallenges.Load(),
		DPoPProofsMissing:   c.dpopProofsMissing.Load(),
		DPoPKeyMismatches:   c.dpopKeyMismatches.Load(),

		ClientAssertionsAccepted: c.clientAssertionsAccepted.Load(),
		ClientAssertionsRefused:  c.clientAssertionsRefused.Load(),
		ClientAssertionReplays:   c.clientAssertionReplays.Load(),
	}
}

// countTokenRequest counts one token request under its grant type, and among those
// that carry a DPoP proof when withProof.
func (c *counters) countTokenRequest(grant string, withProof bool) {
	c.tokenRequests.Add(1)
	if withProof {
		c.dpopTokenRequests.Add(1)
	}
	switch grant {
	case GrantAuthorizationCode:
		c.codeRequests.Add(1)
	case GrantRefreshToken:
		c.refreshRequests.Add(1)
	case GrantDeviceCode:
		c.devicePolls.Add(1)
	}
}

// countProof counts the outcome of checking one DPoP proof.
func (c *counters) countProof(err error) {
	switch {
	case err == nil:
		c.dpopProofsAccepted.Add(1)
	case errors.Is(err, dpop.ErrUseNonce):
		c.dpopNonceChallenges.Add(1)
	case errors.Is(err, errProofReplayed):
		c.dpopProofsReplayed.Add(1)
	default:
		c.dpopProofsInvalid.Add(1)
	}
}
