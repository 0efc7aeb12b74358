package authserver

import (
	"net/http"
	"net/url"
)

// handleRevoke answers POST /revoke (RFC 7009). Any token the client owns is revoked;
// revoking a refresh token revokes every token of its grant. An unknown token, or
// another client's, is answered 200 like a revoked one (§2.2).
func (s *Server) handleRevoke(w http.ResponseWriter, r *http.Request) {
	form, client, err := s.authenticatedForm(w, r)
	if err == nil && form.Get("token") == "" {
		err = errInvalidRequest("token is missing")
	}
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	s.stats.revocations.Add(1)
	s.revoke(client, form.Get("token"))
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// authenticatedForm reads a form-encoded request and authenticates its client.
func (s *Server) authenticatedForm(w http.ResponseWriter, r *http.Request) (url.Values, *Client, *oauthError) {
	form, err := readForm(w, r)
	if err != nil {
		return nil, nil, err
	}
	client, err := s.authenticateClient(r, form)
	return form, client, err
}

func (s *Server) revoke(client *Client, tok string) {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if t := st.refresh[tok]; t != nil && t.clientID == client.ID {
		t.grant.revoked = true
	}
	if t := st.access[tok]; t != nil && t.clientID == client.ID {
		t.revoked = true
	}
}

// introspection is an RFC 7662 §2.2 answer.
type introspection struct {
	Active    bool   `json:"active"`
	Scope     string `json:"scope,omitempty"`
	ClientID  string `json:"client_id,omitempty"`
	Username  string `json:"username,omitempty"`
	TokenType string `json:"token_type,omitempty"`
	Exp       int64  `json:"exp,omitempty"`
	Iat       int64  `json:"iat,omitempty"`
	Sub       string `json:"sub,omitempty"`
	Iss       string `json:"iss,omitempty"`
	// Cnf names the DPoP key a bound token is bound to (RFC 9449 §6.2).
	Cnf *confirmation `json:"cnf,omitempty"`
}

// confirmation is a token's cnf claim (RFC 7800): the thumbprint of its DPoP key.
type confirmation struct {
	JKT string `json:"jkt"`
}

// handleIntrospect answers POST /introspect for any authenticated client.
func (s *Server) handleIntrospect(w http.ResponseWriter, r *http.Request) {
	form, _, err := s.authenticatedForm(w, r)
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	answer := s.introspect(form.Get("token"))
	if answer.Active {
		answer.Iss = s.issuerFor(r)
	}
	writeJSON(w, http.StatusOK, answer)
}

// Active reports whether tok is an access or refresh token the server would
// honour now: issued by it, not expired, revoked or retired by rotation.
func (s *Server) Active(tok string) bool { return s.introspect(tok).Active }

func (s *Server) introspect(tok string) introspection {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	t, access := st.access[tok], true
	if t == nil {
		t, access = st.refresh[tok], false
	}
	if t == nil || !t.active(s.now()) {
		return introspection{}
	}
	answer := introspection{
		Active: true, Scope: t.scope, ClientID: t.clientID, Username: t.user, Sub: t.user,
		Iat: t.issued.Unix(),
	}
	if access {
		answer.TokenType = tokenType(t.jkt)
	}
	if t.jkt != "" {
		answer.Cnf = &confirmation{JKT: t.jkt}
	}
	if !t.expires.IsZero() {
		answer.Exp = t.expires.Unix()
	}
	return answer
}
