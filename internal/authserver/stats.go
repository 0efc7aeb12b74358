package authserver

import "sync/atomic"

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
}

type counters struct {
	authorizations, denials                      atomic.Int64
	tokenRequests, codeRequests, refreshRequests atomic.Int64
	codesExchanged, refreshes                    atomic.Int64
	codeReplays, refreshReuses                   atomic.Int64
	revocations, apiCalls                        atomic.Int64
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
	}
}

// countTokenRequest counts one token request under its grant type.
func (c *counters) countTokenRequest(grant string) {
	c.tokenRequests.Add(1)
	switch grant {
	case GrantAuthorizationCode:
		c.codeRequests.Add(1)
	case GrantRefreshToken:
		c.refreshRequests.Add(1)
	}
}
