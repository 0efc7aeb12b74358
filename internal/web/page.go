package web

import (
	"bytes"
	"html/template"
	"strings"
)

// callbackPage is the frontend callback page. It has no inline script or style
// (the Content-Security-Policy forbids both); its one setting, the API base,
// reaches the script through a data- attribute that html/template escapes.
// Its no-script form (answer.go) carries the provider's answer when there is one.
var callbackPage = template.Must(template.ParseFS(assets, "assets/callback.html"))

// renderCallbackPage renders the page for apiBase, the extra fields its
// script forwards (fieldNames; nil: none) and form (nil: no answer to send,
// the page every request without one gets).
func renderCallbackPage(apiBase string, extra []string, form *answerForm) ([]byte, error) {
	var buf bytes.Buffer
	data := struct {
		APIBase string
		Fields  string
		Form    *answerForm
	}{apiBase, strings.Join(extra, " "), form}
	if err := callbackPage.Execute(&buf, data); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
