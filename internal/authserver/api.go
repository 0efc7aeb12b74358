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

// handleAPI answers GET /api/me, the protected demo API (RFC 6750 bearer tokens).
func (s *Server) handleAPI(w http.ResponseWriter, r *http.Request) {
	tok, ok := bearerToken(r)
	if !ok {
		writeBearerError(w, "", "a bearer access token is required")
		return
	}
	t, ok := s.activeAccessToken(tok)
	if !ok {
		writeBearerError(w, "invalid_token", "the access token is unknown, expired or revoked")
		return
	}
	s.stats.apiCalls.Add(1)
	writeJSON(w, http.StatusOK, Me{User: t.user, Scope: t.scope, Repos: reposOf(t.user)})
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

// bearerToken reads "Authorization: Bearer <token>"; the scheme is case-insensitive.
func bearerToken(r *http.Request) (string, bool) {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || strings.ContainsAny(tok, " \t") {
		return "", false
	}
	return tok, true
}

// writeBearerError answers 401 with a WWW-Authenticate challenge (RFC 6750 §3); a
// request without a token gets no error code in the challenge (§3.1).
func writeBearerError(w http.ResponseWriter, code, desc string) {
	challenge := `Bearer realm="authserver"`
	body := newError(http.StatusUnauthorized, "unauthorized", desc)
	if code != "" {
		challenge += `, error="` + code + `", error_description="` + desc + `"`
		body.Code = code
	}
	w.Header().Set("WWW-Authenticate", challenge)
	writeJSON(w, http.StatusUnauthorized, body)
}

// reposOf lists the fake repositories of user.
func reposOf(user string) []Repo {
	return []Repo{
		{Name: "hello-world", FullName: user + "/hello-world", Description: "My first repository"},
		{Name: "oauthflow-demo", FullName: user + "/oauthflow-demo", Private: true, Description: "Signed in through the demo provider"},
		{Name: "dotfiles", FullName: user + "/dotfiles", Description: "Configuration files"},
	}
}
