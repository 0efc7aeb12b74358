package oauthflowtest

// Stats counts what a [Server] has answered since it started.
type Stats struct {
	Authorizations  int64 // authorization requests answered with a code
	Denials         int64 // authorization requests answered with access_denied
	CodesExchanged  int64 // codes exchanged for tokens
	RefreshRequests int64 // refresh requests, scripted failures included
	Refreshes       int64 // refreshes answered with tokens
	RefreshReuses   int64 // retired refresh tokens presented again (each revokes its grant)
	Revocations     int64 // revocation requests (RFC 7009)
	DeviceTokens    int64 // device sign-ins redeemed for tokens
	APICalls        int64 // calls of APIURL answered 200
	UserinfoCalls   int64 // calls of UserinfoURL answered 200
}

// Stats returns a snapshot of the server's counters, a [Stats]; each is read
// atomically on its own.
func (s *Server) Stats() Stats {
	st := s.as.Stats()
	return Stats{
		Authorizations:  st.Authorizations,
		Denials:         st.Denials,
		CodesExchanged:  st.CodesExchanged,
		RefreshRequests: st.RefreshRequests,
		Refreshes:       st.Refreshes,
		RefreshReuses:   st.RefreshReuses,
		Revocations:     st.Revocations,
		DeviceTokens:    st.DeviceTokens,
		APICalls:        st.APICalls,
		UserinfoCalls:   st.UserinfoCalls,
	}
}
