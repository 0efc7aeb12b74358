package authserver

import (
	"encoding/json"
	"mime"
	"net/http"
	"net/url"
)

// maxBodyBytes bounds every request body the server reads.
const maxBodyBytes = 64 << 10

// oauthError is an RFC 6749 §5.2 error answer.
type oauthError struct {
	status      int
	Code        string `json:"error"`
	Description string `json:"error_description,omitempty"`
}

func (e *oauthError) Error() string { return e.Code + ": " + e.Description }

func newError(status int, code, desc string) *oauthError {
	return &oauthError{status: status, Code: code, Description: desc}
}

func errInvalidRequest(desc string) *oauthError {
	return newError(http.StatusBadRequest, "invalid_request", desc)
}

func errInvalidGrant(desc string) *oauthError {
	return newError(http.StatusBadRequest, "invalid_grant", desc)
}

func errInvalidClient(desc string) *oauthError {
	return newError(http.StatusUnauthorized, "invalid_client", desc)
}

// writeOAuthError answers e as JSON; an invalid_client answer names the Basic scheme.
func writeOAuthError(w http.ResponseWriter, e *oauthError) {
	if e.status == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="authserver"`)
	}
	writeJSON(w, e.status, e)
}

// writeJSON answers v as JSON that no cache keeps (RFC 6749 §5.1).
func writeJSON(w http.ResponseWriter, status int, v any) {
	h := w.Header()
	h.Set("Content-Type", "application/json;charset=UTF-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Pragma", "no-cache")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// readForm reads a form-encoded body of at most maxBodyBytes and refuses a
// repeated parameter (RFC 6749 §3.2).
func readForm(w http.ResponseWriter, r *http.Request) (url.Values, *oauthError) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/x-www-form-urlencoded" {
		return nil, errInvalidRequest("the body must be application/x-www-form-urlencoded")
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		return nil, errInvalidRequest("the body is malformed or too large")
	}
	if repeated(r.PostForm) {
		return nil, errInvalidRequest("a parameter is repeated")
	}
	return r.PostForm, nil
}

func repeated(v url.Values) bool {
	for _, vals := range v {
		if len(vals) > 1 {
			return true
		}
	}
	return false
}
