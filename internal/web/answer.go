package web

import (
	"net/http"
	"net/url"
	"slices"
)

// The provider's answer on the callback page's URL, carried by the page's
// no-script form to the API callback: a browser that runs no script (a text
// browser, JavaScript turned off) finishes the sign-in there, and the API
// callback renders the outcome. The page reflects the answer's fields only, as
// hidden inputs that html/template escapes; the code is already in the page's
// own URL, and the page is no-store, no-referrer and never framed.

// maxFieldLen bounds each field of the provider's answer, as the API callback does.
const maxFieldLen = 4096

// Bounds of the extra fields (Options.CallbackFields): how many are
// forwarded, as the API callback keeps at most as many, and the names the
// page is given.
const (
	maxExtraFields  = 8
	maxFieldNameLen = 64
	maxFieldNames   = 32
)

// callbackAPIPath is the API callback, relative to the API base.
const callbackAPIPath = "/api/v1/oauth/callback"

// answerFields are the fields of a provider's redirect that the API callback
// reads, in the order the form carries them.
var answerFields = [...]string{"code", "state", "iss", "error", "error_description", "error_uri"}

// IsAnswerField reports whether name is one of the parameters of a
// provider's answer itself (RFC 6749 §4.1.2, RFC 9207), never an extra
// field a provider declares.
func IsAnswerField(name string) bool { return slices.Contains(answerFields[:], name) }

// fieldNames are the names among names that the page may forward: each a
// name (isFieldName) and not one of the answer's own, once, at most
// maxFieldNames of them, in their order.
func fieldNames(names []string) []string {
	var out []string
	for _, n := range names {
		if len(out) == maxFieldNames {
			break
		}
		if isFieldName(n) && !IsAnswerField(n) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out
}

// isFieldName reports whether s is a parameter name the page carries: ASCII
// letters, digits, '.', '_' and '-', at most maxFieldNameLen bytes.
func isFieldName(s string) bool {
	if s == "" || len(s) > maxFieldNameLen {
		return false
	}
	for _, c := range []byte(s) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// answerForm is the no-script form: where it goes and what it carries.
type answerForm struct {
	Action string
	Fields []answerField
}

type answerField struct{ Name, Value string }

// formFor returns the form that sends the answer in rawQuery to the API
// callback under apiBase, or nil when rawQuery holds no whole answer (a state,
// and a code or an error, no field longer than maxFieldLen). The answer goes
// with the extra fields named by extra (fieldNames) that rawQuery holds, at
// most maxExtraFields of them, none longer than maxFieldLen.
func formFor(apiBase, rawQuery string, extra []string) *answerForm {
	q, err := url.ParseQuery(rawQuery)
	if err != nil || q.Get("state") == "" || q.Get("code") == "" && q.Get("error") == "" {
		return nil
	}
	f := &answerForm{Action: apiBase + callbackAPIPath}
	for _, name := range answerFields {
		v := q.Get(name)
		if len(v) > maxFieldLen {
			return nil
		}
		if v != "" {
			f.Fields = append(f.Fields, answerField{Name: name, Value: v})
		}
	}
	kept := 0
	for _, name := range extra {
		if v := q.Get(name); v != "" && len(v) <= maxFieldLen && kept < maxExtraFields {
			f.Fields = append(f.Fields, answerField{Name: name, Value: v})
			kept++
		}
	}
	return f
}

// callbackPagePath is the frontend callback page's route.
const callbackPagePath = "/oauth/callback"

// callbackPage is the page for r: static, the asset the handler rendered once,
// unless r's query holds an answer for its no-script form to send, or the
// page names extra fields for its script to forward.
func (h *handler) callbackPage(r *http.Request, static asset) asset {
	var extra []string
	if h.fields != nil {
		extra = fieldNames(h.fields())
	}
	form := formFor(h.apiBase, r.URL.RawQuery, extra)
	if form == nil && len(extra) == 0 {
		return static
	}
	page, err := renderCallbackPage(h.apiBase, extra, form)
	if err != nil {
		return static // the template is checked at setup; a failure keeps the script's page
	}
	static.body = page
	return static
}
