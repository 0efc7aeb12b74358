package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func get(t *testing.T, h http.Handler, method, target string) *http.Response {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	return string(b)
}

func TestRoutesAndContentTypes(t *testing.T) {
	t.Parallel()
	h := Handler(Options{})
	tests := []struct {
		path, contentType, cache, contains string
	}{
		{"/oauth/callback", "text/html; charset=utf-8", "no-store", `id="oauth-callback"`},
		{"/oauth/callback.js", "text/javascript; charset=utf-8", assetMaxAge, "oauthflow:callback"},
		{"/oauth/oauth-prompt.js", "text/javascript; charset=utf-8", assetMaxAge, `customElements.define("oauth-prompt"`},
		{"/oauth/oauth-prompt.css", "text/css; charset=utf-8", assetMaxAge, "oauth-prompt"},
		{"/oauth/oauth-connections.js", "text/javascript; charset=utf-8", assetMaxAge, `customElements.define("oauth-connections"`},
		{"/oauth/oauth-connections.css", "text/css; charset=utf-8", assetMaxAge, "oauth-connections"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			res := get(t, h, http.MethodGet, tt.path)
			assert.Equal(t, http.StatusOK, res.StatusCode)
			assert.Equal(t, tt.contentType, res.Header.Get("Content-Type"))
			assert.Equal(t, tt.cache, res.Header.Get("Cache-Control"))
			assert.Contains(t, body(t, res), tt.contains)
		})
	}
}

func TestSecurityHeadersOnEveryResponse(t *testing.T) {
	t.Parallel()
	h := Handler(Options{})
	for _, path := range []string{"/oauth/callback", "/oauth/callback.js", "/oauth/oauth-prompt.js", "/oauth/oauth-prompt.css",
		"/oauth/oauth-connections.js", "/oauth/oauth-connections.css", "/oauth/nope"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			res := get(t, h, http.MethodGet, path+"?code=c&state=s")
			assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
			assert.Equal(t, "DENY", res.Header.Get("X-Frame-Options"))
			assert.Equal(t, "nosniff", res.Header.Get("X-Content-Type-Options"))
			csp := res.Header.Get("Content-Security-Policy")
			for _, directive := range []string{
				"default-src 'none'", "script-src 'self'", "style-src 'self'", "connect-src 'self'",
				"base-uri 'none'", "form-action 'self'", "frame-ancestors 'none'",
			} {
				assert.Contains(t, csp, directive)
			}
			assert.NotContains(t, csp, "unsafe-inline")
			assert.NotContains(t, csp, "unsafe-eval")
		})
	}
}

// TestCallbackPageHasNoInlineCode checks the page obeys its own policy: scripts and
// styles come from files, no handler attributes, no style attributes.
func TestCallbackPageHasNoInlineCode(t *testing.T) {
	t.Parallel()
	page := body(t, get(t, Handler(Options{}), http.MethodGet, "/oauth/callback"))
	assert.Contains(t, page, `<script src="oauth-prompt.js" defer></script>`)
	assert.Contains(t, page, `<script src="callback.js" defer></script>`)
	assert.Contains(t, page, `<link rel="stylesheet" href="oauth-prompt.css">`)
	assert.Equal(t, 2, strings.Count(page, "<script"), "only the two external scripts")
	assert.NotContains(t, page, "<style")
	assert.NotContains(t, page, "style=")
	assert.NotRegexp(t, `\son[a-z]+=`, page, "no inline event handlers")
	// The hooks the script and the browser tests rely on.
	for _, hook := range []string{`id="oauth-callback"`, `data-status="pending"`, `id="oauth-callback-title"`, `id="oauth-callback-message"`, `data-role="message"`} {
		assert.Contains(t, page, hook)
	}
}

// The query reaches the page only as the no-script form's hidden values,
// escaped: never into a script, a data- attribute the script reads, or markup.
func TestCallbackPageReflectsTheAnswerOnlyInItsForm(t *testing.T) {
	t.Parallel()
	page := body(t, get(t, Handler(Options{}), http.MethodGet, "/oauth/callback?code=SECRETCODE&state=STATE&error_description=%3Cb%3Ex"))
	assert.Equal(t, 1, strings.Count(page, "SECRETCODE"))
	assert.Equal(t, 1, strings.Count(page, "STATE"))
	assert.Contains(t, page, `<input type="hidden" name="code" value="SECRETCODE">`)
	assert.Contains(t, page, `<input type="hidden" name="state" value="STATE">`)
	assert.Contains(t, page, `value="&lt;b&gt;x"`)
	assert.NotContains(t, page, "<b>x")
	before, _, ok := strings.Cut(page, "<noscript>")
	require.True(t, ok)
	assert.NotContains(t, before, "SECRETCODE", "nothing of the answer outside the no-script form")
}

func TestAPIBase(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, apiBase, connectSrc, dataAttr string
	}{
		{"same origin", "", "connect-src 'self';", `data-api-base=""`},
		{"path on the same origin", "/backend/", "connect-src 'self';", `data-api-base="/backend"`},
		{"other origin", "https://api.example.com", "connect-src 'self' https://api.example.com;", `data-api-base="https://api.example.com"`},
		{"other origin with port and path", "http://127.0.0.1:9090/svc/", "connect-src 'self' http://127.0.0.1:9090;", `data-api-base="http://127.0.0.1:9090/svc"`},
		{
			"markup in the path is escaped", `https://api.example.com/x"><script>alert(1)</script>`,
			"connect-src 'self' https://api.example.com;",
			`data-api-base="https://api.example.com/x&#34;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := get(t, Handler(Options{APIBase: tt.apiBase}), http.MethodGet, "/oauth/callback")
			assert.Contains(t, res.Header.Get("Content-Security-Policy"), tt.connectSrc)
			page := body(t, res)
			assert.Contains(t, page, tt.dataAttr)
			assert.NotContains(t, page, "<script>alert(1)")
			assert.Equal(t, 2, strings.Count(page, "<script"))
		})
	}
}

// Each widget is served with the API base as its default, as a JSON string
// that markup in the base cannot break out of; without one it is the file as is.
func TestWidgetServedWithTheAPIBase(t *testing.T) {
	t.Parallel()
	for _, path := range []string{"/oauth/oauth-prompt.js", "/oauth/oauth-connections.js"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			widgetServedWithTheAPIBase(t, path)
		})
	}
}

func widgetServedWithTheAPIBase(t *testing.T, path string) {
	plain := get(t, Handler(Options{}), http.MethodGet, path)
	plainBody := body(t, plain)
	assert.Equal(t, 1, strings.Count(plainBody, widgetAPIBaseLine))
	tests := []struct{ apiBase, line string }{
		{"http://127.0.0.1:9090/", `var DEFAULT_API_BASE = "http://127.0.0.1:9090";`},
		{"/backend", `var DEFAULT_API_BASE = "/backend";`},
		{`https://api.example.com/x"</script><script>alert(1)//` + " ", `var DEFAULT_API_BASE = "https://api.example.com/x\"\u003c/script\u003e\u003cscript\u003ealert(1)//\u2028";`},
	}
	for _, tt := range tests {
		t.Run(tt.apiBase, func(t *testing.T) {
			t.Parallel()
			res := get(t, Handler(Options{APIBase: tt.apiBase}), http.MethodGet, path)
			js := body(t, res)
			assert.Equal(t, 1, strings.Count(js, tt.line), "the default API base line")
			assert.NotContains(t, js, widgetAPIBaseLine)
			assert.Equal(t, strings.Replace(plainBody, widgetAPIBaseLine, tt.line, 1), js, "nothing else changes")
			assert.NotEqual(t, plain.Header.Get("ETag"), res.Header.Get("ETag"), "the ETag follows the content")
		})
	}
}

func TestAPIBaseRejectsValuesThatCouldBreakOut(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		`https://a.example"; script-src *`,
		`https://a.example"'`,
		"https://a.example;script-src",
		"//api.example.com",
		`/\evil.example`,
		"javascript:alert(1)",
		"ftp://api.example.com",
		"https://user:pw@api.example.com",
		"https://api.example.com/?x=1",
		"https://api.example.com/#frag",
		"backend",
		"https://",
	} {
		t.Run(bad, func(t *testing.T) {
			t.Parallel()
			assert.Panics(t, func() { Handler(Options{APIBase: bad}) })
		})
	}
}

func TestUnknownPathsAre404(t *testing.T) {
	t.Parallel()
	h := Handler(Options{})
	for _, path := range []string{"/", "/oauth", "/oauth/", "/oauth/callback/", "/oauth/callback.html", "/oauth/assets/callback.js", "/callback", "/oauth/../oauth/callback.js", "/oauth/CALLBACK"} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			res := get(t, h, http.MethodGet, path)
			assert.Equal(t, http.StatusNotFound, res.StatusCode)
			assert.Equal(t, "no-store", res.Header.Get("Cache-Control"))
		})
	}
}

func TestOnlyGetAndHead(t *testing.T) {
	t.Parallel()
	h := Handler(Options{})
	for _, method := range []string{http.MethodPost, http.MethodPut, http.MethodDelete, http.MethodOptions} {
		res := get(t, h, method, "/oauth/callback")
		assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode, method)
		assert.Equal(t, "GET, HEAD", res.Header.Get("Allow"))
	}
}

func TestHead(t *testing.T) {
	t.Parallel()
	h := Handler(Options{})
	for _, path := range []string{"/oauth/callback", "/oauth/oauth-prompt.js"} {
		full := get(t, h, http.MethodGet, path)
		res := get(t, h, http.MethodHead, path)
		assert.Equal(t, http.StatusOK, res.StatusCode)
		assert.Empty(t, body(t, res))
		assert.Equal(t, full.Header.Get("Content-Type"), res.Header.Get("Content-Type"))
		assert.Equal(t, full.Header.Get("Content-Length"), res.Header.Get("Content-Length"))
		assert.NotEmpty(t, res.Header.Get("Content-Length"))
		assert.Equal(t, "no-referrer", res.Header.Get("Referrer-Policy"))
	}
}

func TestAssetsRevalidateByETag(t *testing.T) {
	t.Parallel()
	h := Handler(Options{})
	etag := get(t, h, http.MethodGet, "/oauth/oauth-prompt.js").Header.Get("ETag")
	require.NotEmpty(t, etag)

	req := httptest.NewRequest(http.MethodGet, "/oauth/oauth-prompt.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	assert.Equal(t, http.StatusNotModified, rec.Code)

	assert.Empty(t, get(t, h, http.MethodGet, "/oauth/callback").Header.Get("ETag"), "the page is never cached")
}

// TestServedUnderAPrefix mounts the handler the way the package documentation shows,
// on a real server, and follows the page's relative links.
func TestServedUnderAPrefix(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.Handle("GET /app/oauth/", http.StripPrefix("/app", Handler(Options{})))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, path := range []string{"/app/oauth/callback", "/app/oauth/callback.js", "/app/oauth/oauth-prompt.js", "/app/oauth/oauth-prompt.css",
		"/app/oauth/oauth-connections.js", "/app/oauth/oauth-connections.css"} {
		res, err := srv.Client().Get(srv.URL + path)
		require.NoError(t, err)
		_ = res.Body.Close()
		assert.Equal(t, http.StatusOK, res.StatusCode, path)
	}
	res, err := srv.Client().Post(srv.URL+"/app/oauth/callback", "text/plain", nil)
	require.NoError(t, err)
	_ = res.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, res.StatusCode, "the host mux answers 405")
}
