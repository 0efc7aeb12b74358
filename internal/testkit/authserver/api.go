package authserver

import (
	"net/http"
	"strings"
)

// Me is the demo API's answer: whom the access token belongs to, its scope, and their repositories.
type Me struct {
	User  string `json:"user"`
	Scope string `json:"scope"`
	Repos []Repo `json:"repos"`
}

// Repo is a fake repository listed by the demo API.
type Repo struct {
	Name        string `json:"name"`
	FullName    string `json:"full_name"`
	Private     bool   `json:"private"`
	Description string `json:"description"`
}

// Userinfo is the user-info endpoint's answer: who the access token belongs to,
// named as OpenID Connect names it (Core §5.3.2).
type Userinfo struct {
	Sub               string `json:"sub"`
	PreferredUsername string `json:"preferred_username"`
}

// handleAPI answers GET /api/me, the protected demo API.
func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	if t, ok := s.protected(w, r, PathAPI); ok {
		s.stats.apiCalls.Add(1)
		writeJSON(w, http.StatusOK, Me{User: t.user, Scope: t.scope, Repos: reposOf(t.user)})
	}
}

// handleUserinfo answers GET /userinfo, which names the token's user.
func (s *Server) handleUserinfo(w http.ResponseWriter, r *http.Request) {
	if t, ok := s.protected(w, r, PathUserinfo); ok {
		s.stats.userinfoCalls.Add(1)
		writeJSON(w, http.StatusOK, Userinfo{Sub: t.user, PreferredUsername: t.user})
	}
}

// protected checks the access token of a request to the protected endpoint at
// path: a bearer token (RFC 6750) as is, a DPoP-bound one with a proof of its
// key (RFC 9449 §7). It answers a refusal itself and reports false.
func (s *Server) protected(w http.ResponseWriter, r *http.Request, path string) (token, bool) {
	nonce := s.offerNonce(w)
	t, refusal := s.authorizeAPI(r, path, nonce)
	if refusal != nil {
		s.writeChallenge(w, refusal)
		return token{}, false
	}
	return t, true
}

// apiRefusal is why a protected endpoint refuses a request: the scheme of its
// challenge, an error code ("" when the request carried no token, RFC 6750 §3.1)
// and a description.
type apiRefusal struct{ scheme, code, desc string }

// authorizeAPI returns the access token r, a request to path, presents, or why
// it is refused.
func (s *Server) authorizeAPI(r *http.Request, path, nonce string) (token, *apiRefusal) {
	scheme, tok, ok := accessToken(r)
	if !ok || (scheme == schemeDPoP && !s.opts.DPoP) {
		return token{}, &apiRefusal{scheme: schemeBearer, desc: "an access token is required"}
	}
	t, ok := s.activeAccessToken(tok)
	if !ok {
		return token{}, &apiRefusal{scheme, "invalid_token", "the access token is unknown, expired or revoked"}
	}
	return t, s.resourceProof(r, path, scheme, tok, t.jkt, nonce)
}

// activeAccessToken returns a copy of the access token tok if it may be used.
func (s *Server) activeAccessToken(tok string) (token, bool) {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	t := st.access[tok]
	if t == nil || !t.active(s.now()) {
		return token{}, false
	}
	return *t, true
}

// Authorization schemes of the protected endpoints, as the server writes them.
const (
	schemeBearer = "Bearer"
	schemeDPoP   = "DPoP"
)

// accessToken reads "Authorization: Bearer <token>" or "Authorization: DPoP
// <token>"; the scheme is case-insensitive and returned as written above.
func accessToken(r *http.Request) (scheme, tok string, ok bool) {
	scheme, tok, ok = strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" || strings.ContainsAny(tok, " \t") {
		return "", "", false
	}
	switch {
	case strings.EqualFold(scheme, schemeBearer):
		return schemeBearer, tok, true
	case strings.EqualFold(scheme, schemeDPoP):
		return schemeDPoP, tok, true
	}
	return "", "", false
}

// writeChallenge answers 401 with a WWW-Authenticate challenge of the refusal's
// scheme (RFC 6750 §3, RFC 9449 §7.1). A request without a token gets no error
// code (RFC 6750 §3.1), and, when the server does DPoP, both challenges.
func (s *Server) writeChallenge(w http.ResponseWriter, refusal *apiRefusal) {
	h := w.Header()
	body := newError(http.StatusUnauthorized, "unauthorized", refusal.desc)
	if refusal.code != "" {
		body.Code = refusal.code
		h.Add("WWW-Authenticate", challenge(refusal))
	} else {
		h.Add("WWW-Authenticate", `Bearer realm="authserver"`)
		if s.opts.DPoP {
			h.Add("WWW-Authenticate", schemeDPoP+" "+dpopAlgsParam)
		}
	}
	writeJSON(w, http.StatusUnauthorized, body)
}

// challenge is the WWW-Authenticate value for a refusal with an error code.
func challenge(refusal *apiRefusal) string {
	params := `error="` + refusal.code + `", error_description="` + refusal.desc + `"`
	if refusal.scheme == schemeDPoP {
		return schemeDPoP + " " + params + ", " + dpopAlgsParam
	}
	return `Bearer realm="authserver", ` + params
}

// reposOf lists the fake repositories of user.
func reposOf(user string) []Repo {
	return []Repo{
		{Name: "hello-world", FullName: user + "/hello-world", Description: "My first repository"},
		{Name: "oauthflow-demo", FullName: user + "/oauthflow-demo", Private: true, Description: "Signed in through the demo provider"},
		{Name: "dotfiles", FullName: user + "/dotfiles", Description: "Configuration files"},
	}
}
