package web_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/oauthflow/oauthflow/internal/web"
)

// Mount the callback page and the widget on the frontend's mux. The provider's
// redirect URI then points at {frontend}/oauth/callback, and the host's pages load
// <script src="/oauth/oauth-prompt.js"> to render <oauth-prompt> elements.
func ExampleHandler() {
	mux := http.NewServeMux()
	mux.Handle("GET /oauth/", web.Handler(web.Options{APIBase: "https://api.example.com"}))

	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/oauth/callback?code=c&state=s", nil))
	fmt.Println(rec.Code, rec.Header().Get("Content-Type"), rec.Header().Get("Referrer-Policy"))
	fmt.Println(rec.Header().Get("Content-Security-Policy"))
	// Output:
	// 200 text/html; charset=utf-8 no-referrer
	// default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self' https://api.example.com; base-uri 'none'; form-action 'self' https://api.example.com; frame-ancestors 'none'
}
