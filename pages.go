package oauthflow

import (
	"html/template"
	"net/http"
)

// The callback page: html/template escapes everything; the only script is the
// nonce'd one that tells a popup's opener the outcome and closes the popup
// after a success. It posts to its own origin and to each of
// Config.FrontendOrigins, never to "*": the browser delivers a message only
// when its target origin is the opener's, and drops the others, so the result
// (and the state) reaches a listed frontend or the API's own origin, and
// nothing else. The origins reach the script as a JSON array that
// html/template escapes for its JavaScript context.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}</title>
<style nonce="{{.Nonce}}">
body{font:16px/1.5 system-ui,sans-serif;margin:0;display:grid;place-items:center;min-height:100vh;background:#f6f7f9;color:#1d2330}
main{background:#fff;border-radius:12px;padding:2rem 2.5rem;box-shadow:0 1px 4px #0002;max-width:32rem;text-align:center}
h1{font-size:1.3rem;margin:0 0 .5rem}
main[data-status=success] h1{color:#17803d}
main[data-status=error] h1{color:#b42318}
p{margin:.25rem 0;color:#4a5263}
</style>
</head>
<body>
<main id="oauthflow-result" data-status="{{.Status}}" data-state="{{.State}}" data-provider="{{.ProviderID}}" data-message="{{.Message}}">
<h1>{{.Title}}</h1>
{{if .Message}}<p>{{.Message}}</p>{{end}}
<p>{{.Hint}}</p>
</main>
<script nonce="{{.Nonce}}">
(function () {
  var d = document.getElementById("oauthflow-result").dataset;
  var own = window.location.origin;
  var targets = [own].concat({{.FrontendOrigins}} || []);
  if (!window.opener || window.opener.closed) return;
  var result = {type: "oauthflow:result", state: d.state, status: d.status,
    provider: d.provider, message: d.message};
  for (var i = 0; i < targets.length; i++) {
    if (i > 0 && targets[i] === own) continue;
    try {
      window.opener.postMessage(result, targets[i]);
    } catch (e) {}
  }
  if (d.status === "success") window.close();
})();
</script>
</body>
</html>
`))

type pageData struct {
	Title, Message, Hint string
	Status               string // success | error
	State, ProviderID    string
	Nonce                string
	FrontendOrigins      []string // besides the page's own, where the result is posted
}

func (m *Module) renderPage(w http.ResponseWriter, out outcome, state string) {
	d := pageData{Status: "error", Message: out.message, Hint: "You can close this window and try again.", Nonce: newState(),
		FrontendOrigins: m.origins.list}
	if issuedState(state) {
		d.State = state // only a state of ours is echoed to the opener
	}
	status := http.StatusBadRequest
	name := "your"
	if out.provider != nil {
		d.ProviderID, name = out.provider.ProviderID(), displayName(out.provider)
	}
	switch out.kind {
	case outcomeConnected:
		status, d.Status, d.Message = http.StatusOK, "success", ""
		d.Title, d.Hint = name+" account connected", "You can close this window."
	case outcomeProviderError, outcomeRejected:
		d.Title = "Sign-in not completed"
	case outcomeInvalid:
		d.Title = "Invalid callback"
	case outcomeExpired:
		d.Title, d.Message = "This sign-in link has expired or was already used", "Start the sign-in again from the app."
	case outcomeUnavailable:
		status, d.Title = http.StatusBadGateway, "The provider could not be reached"
		d.Hint = "Please try again later."
	case outcomeStoreDown:
		status, d.Title = http.StatusServiceUnavailable, "Temporarily unavailable"
		d.Hint = "Please try again later."
	case outcomeCanceled:
		status, d.Title = statusClientClosedRequest, "Sign-in interrupted"
	default:
		status, d.Title = http.StatusInternalServerError, "Something went wrong"
	}
	setPageHeaders(w.Header(), d.Nonce)
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, d)
}

func setPageHeaders(h http.Header, nonce string) {
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'nonce-"+nonce+"'; style-src 'nonce-"+nonce+
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
}
