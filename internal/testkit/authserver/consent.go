package authserver

import (
	"html/template"
	"net/http"
)

// pages holds the consent page, the device page and the error page: inline style,
// no script, no external assets, every value escaped by html/template.
var pages = template.Must(template.New("").Parse(`
{{define "head"}}<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.}}</title>
<style>
body{font-family:system-ui,sans-serif;max-width:30rem;margin:3rem auto;padding:0 1rem;color:#222}
button{font-size:1rem;padding:.5rem 1.5rem;margin-right:.75rem;cursor:pointer}
#allow{background:#1a7f37;color:#fff;border:0;border-radius:6px}
#deny{background:#fff;border:1px solid #999;border-radius:6px}
code{background:#f3f3f3;padding:0 .25rem}
input{font-size:1.25rem;padding:.4rem;letter-spacing:.1em;margin:.5rem 0}
</style></head><body>{{end}}

{{define "consent"}}{{template "head" "Authorize access"}}
<h1>Demo provider</h1>
<p>Signed in as <strong id="user">{{.User}}</strong>.</p>
<p><strong id="client">{{.ClientID}}</strong> asks to access your account{{if .Scope}} with the scope <code id="scope">{{.Scope}}</code>{{end}}.</p>
<form method="post" action="authorize/decision">
<input type="hidden" name="consent" value="{{.Consent}}">
<button type="submit" id="allow" name="decision" value="allow">Allow</button>
<button type="submit" id="deny" name="decision" value="deny">Deny</button>
</form>
</body></html>
{{end}}

{{define "device"}}{{template "head" "Connect a device"}}
<h1>Demo provider</h1>
<p>Signed in as <strong id="user">{{.User}}</strong>.</p>
{{if .Message}}<p id="error">{{.Message}}</p>{{end}}
{{if .ClientID}}<p><strong id="client">{{.ClientID}}</strong> asks to access your account{{if .Scope}} with the scope <code id="scope">{{.Scope}}</code>{{end}}.</p>{{end}}
<form method="post" action="device">
<p><label for="user_code">Code shown on your device</label><br>
<input id="user_code" name="user_code" value="{{.UserCode}}" autocomplete="off" autocapitalize="characters" spellcheck="false" required></p>
<input type="hidden" name="login_hint" value="{{.User}}">
<button type="submit" id="allow" name="decision" value="allow">Allow</button>
<button type="submit" id="deny" name="decision" value="deny">Deny</button>
</form>
</body></html>
{{end}}

{{define "device-done"}}{{template "head" "Device connected"}}
<h1>Demo provider</h1>
<p id="result">{{if .}}Access allowed{{else}}Access denied{{end}}. You can return to your device.</p>
</body></html>
{{end}}

{{define "error"}}{{template "head" "Authorization error"}}
<h1>Authorization error</h1>
<p id="error">{{.}}</p>
</body></html>
{{end}}
`))

// consentPage is what the consent template shows.
type consentPage struct {
	User, ClientID, Scope, Consent string
}

// showConsent keeps req under a new consent ID and asks the user to allow or deny it.
func (s *Server) showConsent(w http.ResponseWriter, req *authRequest) {
	id := newSecret()
	now := s.now()
	req.expires = now.Add(s.opts.CodeTTL)
	st := &s.store
	st.mu.Lock()
	st.consents[id] = req
	st.addedLocked(now)
	st.mu.Unlock()
	page := consentPage{User: req.user, ClientID: req.client.ID, Scope: req.scope, Consent: id}
	writePage(w, http.StatusOK, "consent", page)
}

// handleDecision answers POST /authorize/decision, the consent page's form.
func (s *Server) handleDecision(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxBodyBytes)
	if err := r.ParseForm(); err != nil {
		writeErrorPage(w, http.StatusBadRequest, "The form is malformed or too large.")
		return
	}
	req := s.takeConsent(r.PostForm.Get("consent"))
	if req == nil {
		writeErrorPage(w, http.StatusBadRequest, "This authorization request expired or was already answered.")
		return
	}
	if r.PostForm.Get("decision") == "allow" {
		s.approve(w, r, req, http.StatusSeeOther)
		return
	}
	s.deny(w, r, req, http.StatusSeeOther)
}

// takeConsent removes and returns the pending request id, if it has not lapsed.
func (s *Server) takeConsent(id string) *authRequest {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	req := st.consents[id]
	delete(st.consents, id)
	if req == nil || !s.now().Before(req.expires) {
		return nil
	}
	return req
}

func writeErrorPage(w http.ResponseWriter, status int, msg string) {
	writePage(w, status, "error", msg)
}

func writePage(w http.ResponseWriter, status int, name string, data any) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	w.WriteHeader(status)
	_ = pages.ExecuteTemplate(w, name, data)
}
