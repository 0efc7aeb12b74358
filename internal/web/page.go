package web

import (
	"bytes"
	"html/template"
)

// callbackPage is the frontend callback page. It has no inline script or style
// (the Content-Security-Policy forbids both); its one setting, the API base,
// reaches the script through a data- attribute that html/template escapes.
var callbackPage = template.Must(template.ParseFS(assets, "assets/callback.html"))

// renderCallbackPage renders the page once for a handler: it depends only on
// the API base, never on the request.
func renderCallbackPage(apiBase string) ([]byte, error) {
	var buf bytes.Buffer
	if err := callbackPage.Execute(&buf, struct{ APIBase string }{apiBase}); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
