package authserver

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
)

// tokenResponse is a successful token answer (RFC 6749 §5.1).
type tokenResponse struct {
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in,omitempty"`
	RefreshToken string `json:"refresh_token,omitempty"`
	Scope        string `json:"scope,omitempty"`
	// AuthorizationDetails are the grant's authorization details (RFC 9396 §7).
	AuthorizationDetails json.RawMessage `json:"authorization_details,omitempty"`
}

// handleToken answers POST /token.
func (s *Server) handleToken(w http.ResponseWriter, r *http.Request) {
	form, err := readForm(w, r)
	grant := form.Get("grant_type") // Get on a nil form is ""
	s.stats.countTokenRequest(grant, len(r.Header.Values(headerDPoP)) > 0)
	if grant == GrantDeviceCode && !s.opts.NoDeviceGrant {
		s.notePoll(form.Get("device_code"))
	}
	if s.applyFailure(w, r, s.nextFailure(grant)) {
		return
	}
	nonce := s.offerNonce(w)
	if err == nil {
		var resp *tokenResponse
		if resp, err = s.grantTokens(r, form, nonce); err == nil {
			writeJSON(w, http.StatusOK, resp)
			return
		}
	}
	writeOAuthError(w, err)
}

// grantTokens authenticates the client, checks its DPoP proof, if any, against
// nonce, and runs the grant the form asks for.
func (s *Server) grantTokens(r *http.Request, form url.Values, nonce string) (*tokenResponse, *oauthError) {
	client, err := s.authenticateClient(r, form)
	if err != nil {
		return nil, err
	}
	jkt, err := s.tokenProof(r, nonce)
	if err != nil {
		return nil, err
	}
	switch form.Get("grant_type") {
	case GrantAuthorizationCode:
		return s.exchangeCode(client, form, jkt)
	case GrantRefreshToken:
		return s.refreshGrant(client, form, jkt)
	case GrantDeviceCode:
		if s.opts.NoDeviceGrant {
			break
		}
		return s.pollDevice(client, form, jkt)
	case "":
		return nil, errInvalidRequest("grant_type is missing")
	}
	return nil, newError(http.StatusBadRequest, "unsupported_grant_type", "the grant type is not supported")
}

// exchangeCode runs the authorization_code grant (RFC 6749 §4.1.3). A code is used
// once; presenting it again revokes every token issued from it (§4.1.2). jkt is the
// key the request proved ("" for none): the grant is bound to it.
func (s *Server) exchangeCode(client *Client, form url.Values, jkt string) (*tokenResponse, *oauthError) {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	c := st.codes[form.Get("code")]
	if c == nil || c.req.client != client {
		return nil, errInvalidGrant("the code is unknown or was issued to another client")
	}
	if c.used {
		c.grant.revoked = true
		s.stats.codeReplays.Add(1)
		return nil, errInvalidGrant("the code was already used")
	}
	c.used = true
	if err := s.checkCodeUse(c, form, jkt); err != nil {
		return nil, err
	}
	c.grant.jkt = jkt
	c.grant.details = s.answerDetails(GrantAuthorizationCode, c.req.details)
	resp := s.issueLocked(token{clientID: client.ID, user: c.req.user, scope: c.req.scope, jkt: jkt}, c.grant, true)
	resp.AuthorizationDetails = c.grant.details
	s.stats.codesExchanged.Add(1)
	return &resp, nil
}

// checkCodeUse checks the code's lifetime, redirect URI, DPoP key and PKCE verifier.
func (s *Server) checkCodeUse(c *authCode, form url.Values, jkt string) *oauthError {
	if !s.now().Before(c.expires) {
		return errInvalidGrant("the code expired")
	}
	if !redirectMatches(&c.req, form.Get("redirect_uri")) {
		return errInvalidGrant("redirect_uri does not match the authorization request")
	}
	if err := s.checkBinding(c.req.dpopJKT, jkt, "the code"); err != nil {
		return err
	}
	verifier := form.Get("code_verifier")
	switch {
	case c.req.challenge == "" && c.req.client.requiresPKCE():
		return errInvalidGrant("the client must use PKCE")
	case c.req.challenge == "" && verifier != "":
		return errInvalidGrant("code_verifier sent but the authorization request had no code_challenge")
	case c.req.challenge != "" && !verifyPKCE(c.req.challenge, c.req.method, verifier):
		return errInvalidGrant("code_verifier does not match the code_challenge")
	}
	return nil
}

// redirectMatches reports whether the token request's redirect_uri is the one of the
// authorization request; when that one had none, the registered one may be repeated.
func redirectMatches(req *authRequest, got string) bool {
	if req.redirectParam == "" {
		return got == "" || got == req.redirectTarget
	}
	return got == req.redirectParam
}

// refreshGrant runs the refresh_token grant (RFC 6749 §6). With rotation, the old
// refresh token retires; presenting it again revokes the whole grant. A request
// that does not prove the key a refresh token is bound to has no say over its
// grant. jkt is the key the request proved ("" for none): the new access token is
// bound to it.
func (s *Server) refreshGrant(client *Client, form url.Values, jkt string) (*tokenResponse, *oauthError) {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	rt := st.refresh[form.Get("refresh_token")]
	if rt == nil || rt.clientID != client.ID {
		return nil, errInvalidGrant("the refresh token is unknown or was issued to another client")
	}
	if err := s.checkBinding(rt.jkt, jkt, "the refresh token"); err != nil {
		return nil, err
	}
	if rt.rotated {
		rt.grant.revoked = true
		s.stats.refreshReuses.Add(1)
		return nil, errInvalidGrant("the refresh token was already used")
	}
	if !rt.active(s.now()) {
		return nil, errInvalidGrant("the refresh token expired or was revoked")
	}
	scope, err := narrowScope(rt.scope, form.Get("scope"))
	if err != nil {
		return nil, err
	}
	resp := s.issueLocked(token{clientID: client.ID, user: rt.user, scope: scope, jkt: jkt}, rt.grant, s.opts.RotateRefreshTokens)
	if resp.AuthorizationDetails = s.answerDetails(GrantRefreshToken, rt.grant.details); resp.AuthorizationDetails != nil {
		rt.grant.details = resp.AuthorizationDetails
	}
	if next := st.refresh[resp.RefreshToken]; next != nil {
		next.scope = rt.scope // a new refresh token keeps the whole grant (§6)
		rt.rotated = true
	}
	s.stats.refreshes.Add(1)
	return &resp, nil
}

// narrowScope returns the scope of a refresh that asks for requested out of granted.
func narrowScope(granted, requested string) (string, *oauthError) {
	if requested == "" {
		return granted, nil
	}
	have := strings.Fields(granted)
	for _, sc := range strings.Fields(requested) {
		if !slices.Contains(have, sc) {
			return "", newError(http.StatusBadRequest, "invalid_scope", "the scope exceeds the grant")
		}
	}
	return requested, nil
}
