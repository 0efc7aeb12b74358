package authserver

import (
	"errors"
	"net/http"
)

// devicePage is what the device template shows: the user code field, filled in
// when the request named one, and what the code asks for, or why it cannot be used.
type devicePage struct {
	User, UserCode  string
	ClientID, Scope string
	Message         string
}

// handleDevicePage answers GET /device, the verification URI: the user enters or
// confirms the user code and allows or denies. login_hint names the signed-in
// user, as on the authorization endpoint.
func (s *Server) handleDevicePage(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	page := devicePage{User: s.opts.User, UserCode: q.Get("user_code")}
	if hint := q.Get("login_hint"); hint != "" {
		page.User = hint
	}
	if page.UserCode != "" {
		s.describeDevice(&page)
	}
	writePage(w, http.StatusOK, "device", page)
}

// describeDevice fills in what page's user code asks for, or why it cannot be used.
func (s *Server) describeDevice(page *devicePage) {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	d, err := s.pendingDeviceLocked(page.UserCode)
	if err != nil {
		page.Message = userCodeMessage(err)
		return
	}
	page.ClientID, page.Scope = d.client.ID, d.scope
}

// handleDeviceDecision answers POST /device, the device page's form.
func (s *Server) handleDeviceDecision(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		writeErrorPage(w, http.StatusBadRequest, "The form is malformed or too large.")
		return
	}
	form := r.PostForm
	user := form.Get("login_hint")
	if user == "" {
		user = s.opts.User
	}
	allow := form.Get("decision") == "allow"
	if err := s.decideDevice(form.Get("user_code"), user, allow); err != nil {
		page := devicePage{User: user, UserCode: form.Get("user_code"), Message: userCodeMessage(err)}
		writePage(w, http.StatusBadRequest, "device", page)
		return
	}
	writePage(w, http.StatusOK, "device-done", allow)
}

// userCodeMessage tells the user why a user code cannot be used.
func userCodeMessage(err error) string {
	switch {
	case errors.Is(err, ErrUserCodeExpired):
		return "This code expired. Start again on your device."
	case errors.Is(err, ErrUserCodeAnswered):
		return "This code was already used."
	}
	return "This code is not valid. Check the code shown on your device."
}
