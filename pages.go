package oauthflow

import (
	"bytes"
	"html/template"
	"io"
	"net/http"
	"strings"
	"sync"
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
	case outcomeForbidden:
		status, d.Title = http.StatusForbidden, "This sign-in is not yours"
		d.Hint = "You can close this window."
	default:
		status, d.Title = http.StatusInternalServerError, "Something went wrong"
	}
	setPageHeaders(w.Header(), d.Nonce)
	w.WriteHeader(status)
	if out.kind == outcomeConnected && d.State != "" {
		m.pages.write(w, d, m.Registry)
		return
	}
	_ = pageTemplate.Execute(w, d)
}

// pageCache keeps the success page per provider and title rendered once, cut
// where the per-request nonce and state go: a burst of sign-ins pays for
// html/template's escaping once, not per callback. Only success pages are kept:
// they carry no message, one per provider, and no more than the registry
// holds providers: the pages of providers it let go are let go too.
// The zero value is ready.
type pageCache struct {
	once  sync.Once
	holes [2]string  // the stand-ins for the nonce and the state
	m     sync.Map   // provider ID + "\x00" + title -> []pagePart
	mu    sync.Mutex // held while a page is added
	n     int        // the pages in m
	bufs  sync.Pool  // *[]byte: the buffers pages are put together in
}

// pagePart is a run of rendered bytes, followed by the nonce (hole 0), the
// state (hole 1) or nothing (hole -1).
type pagePart struct {
	text []byte
	hole int
}

// write writes the success page d in one Write, put together in a buffer
// that the next page reuses.
func (c *pageCache) write(w io.Writer, d pageData, reg *Registry) {
	b, _ := c.bufs.Get().(*[]byte)
	if b == nil {
		b = new([]byte)
	}
	*b = c.appendPage((*b)[:0], d, reg)
	_, _ = w.Write(*b)
	c.bufs.Put(b)
}

// render is pageTemplate.Execute(d) for a success page.
func (c *pageCache) render(d pageData) []byte { return c.appendPage(make([]byte, 0, 2048), d, nil) }

// appendPage appends the success page d to b. Nonce and state are put in as
// they are: both are of the characters html/template leaves alone in an
// attribute (hex, base64url), which is how the stand-ins were rendered.
func (c *pageCache) appendPage(b []byte, d pageData, reg *Registry) []byte {
	c.once.Do(func() { c.holes = [2]string{"n" + randomHex(16), "s" + randomHex(16)} })
	key := d.ProviderID + "\x00" + d.Title
	v, ok := c.m.Load(key)
	if !ok {
		v = c.add(key, d, reg)
	}
	parts := v.([]pagePart)
	fill := [2]string{d.Nonce, d.State}
	for _, p := range parts {
		b = append(b, p.text...)
		if p.hole >= 0 {
			b = append(b, fill[p.hole]...)
		}
	}
	return b
}

// add renders and keeps the success page d under key, unless another
// caller did first. Once the cache holds as many pages as reg holds
// providers (maxResolved without a registry), it first lets go of the pages
// of providers reg no longer holds, or of any page when reg holds them all.
func (c *pageCache) add(key string, d pageData, reg *Registry) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m.Load(key); ok {
		return v
	}
	bound := maxResolved
	if reg != nil {
		bound = reg.bound()
	}
	if c.n >= bound {
		c.forgetDropped(reg)
	}
	v := c.cut(d)
	c.m.Store(key, v)
	c.n++
	return v
}

// forgetDropped lets go of the pages of providers reg no longer holds, or
// of one page when it holds them all. c.mu is held.
func (c *pageCache) forgetDropped(reg *Registry) {
	before := c.n
	c.m.Range(func(k, _ any) bool {
		if id, _, _ := strings.Cut(k.(string), "\x00"); reg == nil || !reg.Has(id) {
			c.m.Delete(k)
			c.n--
		}
		return reg != nil // without a registry, one page is enough
	})
	if c.n < before {
		return
	}
	c.m.Range(func(k, _ any) bool {
		c.m.Delete(k)
		c.n--
		return false
	})
}

// cut renders d with the stand-ins and splits the page where they are.
func (c *pageCache) cut(d pageData) []pagePart {
	d.Nonce, d.State = c.holes[0], c.holes[1]
	var buf bytes.Buffer
	_ = pageTemplate.Execute(&buf, d)
	page := buf.Bytes()
	var parts []pagePart
	for {
		at, hole := -1, -1
		for h, s := range c.holes {
			if i := bytes.Index(page, []byte(s)); i >= 0 && (at < 0 || i < at) {
				at, hole = i, h
			}
		}
		if at < 0 {
			return append(parts, pagePart{text: page, hole: -1})
		}
		parts = append(parts, pagePart{text: page[:at], hole: hole})
		page = page[at+len(c.holes[hole]):]
	}
}

// setPageHeaders sets the page's headers as h.Set would, with the six values in
// one allocation rather than one each.
func setPageHeaders(h http.Header, nonce string) {
	v := make([]string, 6)
	v[0], v[1], v[2] = "text/html; charset=utf-8", "no-store", "no-referrer"
	v[3], v[4] = "DENY", "nosniff"
	v[5] = "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce +
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	for i, k := range [...]string{"Content-Type", "Cache-Control", "Referrer-Policy", "X-Frame-Options", "X-Content-Type-Options", "Content-Security-Policy"} {
		h[k] = v[i : i+1 : i+1]
	}
}
