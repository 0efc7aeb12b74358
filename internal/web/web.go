// Package web serves the browser side of the flow as embedded assets with no
// build step: the frontend callback page, the oauth-prompt widget and the
// oauth-connections widget.
//
// Handler answers, relative to where it is mounted:
//
//	GET /oauth/callback            the frontend callback page (a redirect URI target)
//	GET /oauth/callback.js         its script
//	GET /oauth/oauth-prompt.js     the oauth-prompt widget (custom element and OAuthFlow.renderPrompt)
//	GET /oauth/oauth-prompt.css    styles for the widget and the callback page
//	GET /oauth/oauth-connections.js   the oauth-connections widget (needs oauth-prompt.js)
//	GET /oauth/oauth-connections.css  its styles
//
// Mount it on the frontend's origin, for example:
//
//	mux.Handle("GET /oauth/", web.Handler(web.Options{}))
//	mux.Handle("GET /app/oauth/", http.StripPrefix("/app", web.Handler(opts)))
//
// The page links its script and stylesheet by relative URL, so any mount point works.
// The script reads the code and state in the browser. The one part of a response
// that depends on the request's query is the page's <noscript> form (answer.go):
// the provider's answer, escaped into hidden inputs, for a browser that runs no
// script to send to the API callback, which completes the sign-in without script.
// Both the form and the script carry, besides the answer, the redirect's
// parameters named by Options.CallbackFields (those the providers keep with the
// tokens), and no others.
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"path"
	"time"
)

//go:embed assets
var assets embed.FS

// Options configures Handler. The zero value serves a page that completes
// through POST /api/v1/oauth/complete on its own origin.
type Options struct {
	// APIBase is where POST {APIBase}/api/v1/oauth/complete lives: "" for the
	// page's own origin, an absolute path ("/backend") on that origin, or an
	// absolute http or https URL ("https://api.example.com") on another origin,
	// whose origin the page's Content-Security-Policy then allows in connect-src.
	// The widget is served with it as its default api-base, so that it completes
	// through that API and accepts the API callback page's result from its origin.
	// Anything else is a setup error and makes Handler panic.
	APIBase string
	// CallbackFields names the parameters of a provider's redirect, besides
	// the answer's own, that the callback page forwards to the API: those the
	// registered providers keep with the tokens (QuickBooks' realmId). It is
	// asked on each request to the page; nil forwards none.
	CallbackFields func() []string
}

// asset is one response body with the headers that depend on it.
type asset struct {
	body         []byte
	contentType  string
	cacheControl string
	etag         string // empty: none
}

// handler serves a fixed set of assets; it holds nothing that changes after Handler returns.
type handler struct {
	routes  map[string]asset
	csp     string
	apiBase string          // the checked Options.APIBase, for the callback page's form
	fields  func() []string // Options.CallbackFields
}

var _ http.Handler = (*handler)(nil)

// assetMaxAge is how long a browser may reuse the scripts and the stylesheet
// before it revalidates them with their ETag.
const assetMaxAge = "public, max-age=300"

// Handler returns the http.Handler that serves the callback page and the widget
// for opts. It panics when opts.APIBase is not a value Options allows.
func Handler(opts Options) http.Handler {
	base, err := parseAPIBase(opts.APIBase)
	if err != nil {
		panic("web: " + err.Error())
	}
	page, err := renderCallbackPage(base.URL, nil, nil)
	if err != nil {
		panic("web: rendering the callback page: " + err.Error())
	}
	return &handler{
		routes: map[string]asset{
			callbackPagePath:               {body: page, contentType: "text/html; charset=utf-8", cacheControl: "no-store"},
			"/oauth/callback.js":           staticAsset("callback.js"),
			"/oauth/oauth-prompt.js":       widgetAsset("oauth-prompt.js", base.URL),
			"/oauth/oauth-prompt.css":      staticAsset("oauth-prompt.css"),
			"/oauth/oauth-connections.js":  widgetAsset("oauth-connections.js", base.URL),
			"/oauth/oauth-connections.css": staticAsset("oauth-connections.css"),
		},
		csp:     contentSecurityPolicy(base.Origin),
		apiBase: base.URL,
		fields:  opts.CallbackFields,
	}
}

// staticAsset loads an embedded script or stylesheet; they are cacheable for a
// short time and revalidated by content hash.
func staticAsset(name string) asset {
	body, err := assets.ReadFile("assets/" + name)
	if err != nil {
		panic("web: missing embedded asset " + name) // the embed directive guarantees it
	}
	return newAsset(name, body)
}

// widgetAPIBaseLine is the line of each widget's script (oauth-prompt.js,
// oauth-connections.js) that holds the API base it uses when its host gives none.
const widgetAPIBaseLine = `var DEFAULT_API_BASE = "";`

// widgetAsset is the widget script name with apiBase (checked by
// parseAPIBase) as its default, so that a widget served by a frontend on
// another origin talks to the API there and accepts the result the API's
// callback page posts from there. apiBase is written as a JSON string, whose
// escapes (<, >, &, U+2028, U+2029) keep it a string literal in any script.
func widgetAsset(name, apiBase string) asset {
	a := staticAsset(name)
	if apiBase == "" {
		return a
	}
	if bytes.Count(a.body, []byte(widgetAPIBaseLine)) != 1 {
		panic("web: " + name + " must hold " + widgetAPIBaseLine + " once")
	}
	quoted, err := json.Marshal(apiBase)
	if err != nil {
		panic("web: " + err.Error()) // a string always marshals
	}
	line := "var DEFAULT_API_BASE = " + string(quoted) + ";"
	return newAsset(name, bytes.Replace(a.body, []byte(widgetAPIBaseLine), []byte(line), 1))
}

func newAsset(name string, body []byte) asset {
	sum := sha256.Sum256(body)
	return asset{
		body:         body,
		contentType:  contentTypes[path.Ext(name)],
		cacheControl: assetMaxAge,
		etag:         `"` + hex.EncodeToString(sum[:16]) + `"`,
	}
}

var contentTypes = map[string]string{
	".js":  "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8",
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.setSecurityHeaders(w.Header())
	a, ok := h.routes[r.URL.Path]
	if !ok {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, http.StatusText(http.StatusMethodNotAllowed), http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == callbackPagePath {
		a = h.callbackPage(r, a)
	}
	hd := w.Header()
	hd.Set("Content-Type", a.contentType)
	hd.Set("Cache-Control", a.cacheControl)
	if a.etag != "" {
		hd.Set("ETag", a.etag)
	}
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}

// setSecurityHeaders sets the headers every response carries, errors included.
// Referrer-Policy matters most: the callback page's URL carries the code.
func (h *handler) setSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", h.csp)
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Cache-Control", "no-store")
}

// contentSecurityPolicy allows scripts and styles from the page's own origin
// only (no inline code), and fetches and form submissions (the callback page's
// no-script form) to that origin and, when set, the API's.
func contentSecurityPolicy(apiOrigin string) string {
	sources := "'self'"
	if apiOrigin != "" {
		sources += " " + apiOrigin
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; connect-src " + sources +
		"; base-uri 'none'; form-action " + sources + "; frame-ancestors 'none'"
}
