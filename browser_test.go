package oauthflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/browsertest"
	"github.com/oauthflow/oauthflow/internal/testkit/demo"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive a real headless Chromium through a host app whose frontend
// and API live on different origins: the API (the module and the demo provider)
// on http://127.0.0.1:PORT2 with Config.FrontendOrigins listing the frontend,
// the frontend (a page with the widget, and FrontendHandler(api)) on
// http://localhost:PORT1.

// crossOrigin is the two servers and the module behind the API.
type crossOrigin struct {
	mod           *oauthflow.Module
	api, frontend string // base URLs
}

// crossOriginPage is the frontend's page: the widget's script, served by
// FrontendHandler, and a slot the test renders an <oauth-prompt> into.
const crossOriginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Frontend</title>
<script src="/oauth/oauth-prompt.js"></script></head>
<body><main id="slot"></main></body></html>`

func startCrossOrigin(t *testing.T, config ...func(*oauthflow.Config)) *crossOrigin {
	t.Helper()
	return startCrossOriginWith(t, nil, config...)
}

// startCrossOriginWith is startCrossOrigin with the demo provider as wrap
// makes it (nil: as it is).
func startCrossOriginWith(t *testing.T, wrap func(*providers.OAuth2) oauthflow.Provider, config ...func(*oauthflow.Config)) *crossOrigin {
	t.Helper()
	apiSrv, frontSrv := httptest.NewUnstartedServer(nil), httptest.NewUnstartedServer(nil)
	_, frontPort, err := net.SplitHostPort(frontSrv.Listener.Addr().String())
	require.NoError(t, err)
	c := &crossOrigin{api: "http://" + apiSrv.Listener.Addr().String(), frontend: "http://localhost:" + frontPort}
	cfg := oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler), FrontendOrigins: []string{c.frontend}}
	for _, f := range config {
		f(&cfg)
	}
	c.mod, err = oauthflow.New(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.mod.Close() })

	apiMux := http.NewServeMux()
	_, p, err := demo.Mount(apiMux, c.api, demo.Options{AccessTokenTTL: time.Hour})
	require.NoError(t, err)
	var registered oauthflow.Provider = p
	if wrap != nil {
		registered = wrap(p)
	}
	require.NoError(t, c.mod.Registry.Register(registered))
	c.mod.Mount(apiMux)

	frontMux := http.NewServeMux()
	frontMux.Handle("GET /oauth/", c.mod.FrontendHandler(c.api))
	frontMux.HandleFunc("GET /{$}", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, crossOriginPage)
	})
	for srv, h := range map[*httptest.Server]http.Handler{apiSrv: apiMux, frontSrv: frontMux} {
		srv.Config.Handler = h
		srv.Start()
		t.Cleanup(srv.Close)
	}
	return c
}

// startSignIn starts a sign-in to the demo provider for user on the API.
func (c *crossOrigin) startSignIn(t *testing.T, user string) *oauthflow.OAuthPromptDocument {
	t.Helper()
	_, doc, err := c.mod.StartSignIn(context.Background(), user, demo.ProviderID)
	require.NoError(t, err)
	return doc
}

// connected reports whether the API holds a token for user.
func (c *crossOrigin) connected(t *testing.T, user string) bool {
	t.Helper()
	_, err := c.mod.Tokens.GetTokens(context.Background(), user, demo.ProviderID)
	return err == nil
}

// showPrompt opens the frontend's page, renders doc with an <oauth-prompt>
// that has no api-base attribute (the widget takes the API base it was served
// with) and records every "oauthflow:done" in window.doneSeen.
func showPrompt(t *testing.T, ctx context.Context, frontend string, doc *oauthflow.OAuthPromptDocument) {
	t.Helper()
	docJSON, err := json.Marshal(doc)
	require.NoError(t, err)
	docJSON, err = json.Marshal(string(docJSON)) // a JavaScript string literal
	require.NoError(t, err)
	show := fmt.Sprintf(`(function () {
window.doneSeen = [];
document.addEventListener("oauthflow:done", function (e) {
  window.doneSeen.push({status: e.detail.status, message: e.detail.message, reason: e.target.getAttribute("data-reason") || ""});
});
var el = document.createElement("oauth-prompt");
el.setAttribute("provider-name", "Demo Cloud");
el.setAttribute("document", %s);
document.getElementById("slot").appendChild(el);
})()`, docJSON)
	browsertest.Run(t, ctx, "show the prompt on the frontend",
		chromedp.Navigate(frontend+"/"),
		chromedp.WaitReady(chromedp.CSS("#slot")),
		chromedp.Evaluate[chromedp.Void](show),
		chromedp.WaitVisible(chromedp.CSS(`oauth-prompt [data-action="connect"]`)))
}

type crossOriginDone struct{ Status, Message, Reason string }

// widgetDone waits for the widget to settle and returns what it reported.
func widgetDone(t *testing.T, ctx context.Context) []crossOriginDone {
	t.Helper()
	var seen []crossOriginDone
	browsertest.Run(t, ctx, "the widget settles",
		chromedp.Poll[chromedp.Void](`window.doneSeen.length > 0`, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0)),
		browsertest.Into(chromedp.Evaluate[[]crossOriginDone](`window.doneSeen`), &seen))
	return seen
}

// The API's callback page, in the widget's popup, posts the success to the
// frontend's origin; the widget on the frontend accepts it from the API's
// origin. Without either the widget reports "the sign-in window was closed".
func TestBrowserCrossOriginPopupSuccess(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t)
	ctx := browsertest.New(t)
	showPrompt(t, ctx, c.frontend, c.startSignIn(t, "alice"))

	connectWithWidget(t, ctx, c)
}

// A denial reaches the widget the same way, as the provider's error, not as a
// closed window (the API's error page stays open, so the widget would wait).
func TestBrowserCrossOriginPopupDenial(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t)
	ctx := browsertest.New(t)
	showPrompt(t, ctx, c.frontend, c.startSignIn(t, "bob"))

	popup := browsertest.Popup(t, ctx, "click Connect", chromedp.Click(chromedp.CSS(`oauth-prompt [data-action="connect"]`)))
	browsertest.Consent(t, popup, browsertest.Deny)
	seen := widgetDone(t, ctx)
	require.Len(t, seen, 1, "the widget reported %+v", seen)
	assert.Equal(t, "error", seen[0].Status)
	assert.Equal(t, "error", seen[0].Reason, "the provider's answer, not a closed window or a timeout")
	assert.Contains(t, strings.ToLower(seen[0].Message), "denied")
	var retry bool
	browsertest.Run(t, ctx, "the widget offers a retry",
		browsertest.Into(chromedp.Evaluate[bool](`!!document.querySelector('oauth-prompt [data-action="retry"]')`), &retry))
	assert.True(t, retry)
	assert.False(t, c.connected(t, "bob"))
}

// The frontend callback page opened directly (no opener) completes through the
// API's POST /api/v1/oauth/complete on the other origin, with CORS.
func TestBrowserCrossOriginDirectCallback(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t)
	ctx := browsertest.New(t)
	q := browsertest.ConsentOverHTTP(t, c.startSignIn(t, "carol").AuthURL, browsertest.Allow)
	require.NotEmpty(t, q.Get("code"), "the consent redirected with %v", q)

	var status, mode, title, message string
	browsertest.Run(t, ctx, "open the frontend callback page directly",
		chromedp.Navigate(c.frontend+"/oauth/callback?"+q.Encode()),
		chromedp.WaitVisible(chromedp.CSS(`#oauth-callback:is([data-status="success"], [data-status="error"])`)),
		browsertest.Into(chromedp.Evaluate[string](`document.getElementById("oauth-callback").dataset.status`), &status),
		browsertest.Into(chromedp.Evaluate[string](`document.getElementById("oauth-callback").dataset.mode`), &mode),
		browsertest.Into(chromedp.Text(chromedp.CSS(`#oauth-callback [data-role="title"]`)), &title),
		browsertest.Into(chromedp.Text(chromedp.CSS(`#oauth-callback [data-role="message"]`)), &message))
	assert.Equal(t, []string{"success", "direct", "Connected"}, []string{status, mode, title}, "the page says: %q", message)
	assert.True(t, c.connected(t, "carol"), "the token is stored")
}

// A denial through the frontend callback page opened directly reaches the
// run's prompt (its iss goes with it, so the server accepts it).
func TestBrowserCrossOriginDirectDenial(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t)
	ctx := browsertest.New(t)
	run, doc, err := c.mod.StartSignIn(context.Background(), "dave", demo.ProviderID)
	require.NoError(t, err)
	q := browsertest.ConsentOverHTTP(t, doc.AuthURL, browsertest.Deny)
	require.Equal(t, "access_denied", q.Get("error"), "the consent redirected with %v", q)

	var status, title string
	browsertest.Run(t, ctx, "open the frontend callback page directly with the denial",
		chromedp.Navigate(c.frontend+"/oauth/callback?"+q.Encode()),
		chromedp.WaitVisible(chromedp.CSS(`#oauth-callback:is([data-status="success"], [data-status="error"])`)),
		browsertest.Into(chromedp.Evaluate[string](`document.getElementById("oauth-callback").dataset.status`), &status),
		browsertest.Into(chromedp.Text(chromedp.CSS(`#oauth-callback [data-role="title"]`)), &title))
	assert.Equal(t, []string{"error", "Sign-in not completed"}, []string{status, title})
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, c.mod.Engine.Document(context.Background(), run.ID, oauthflow.PromptDocumentName, &prompt))
	assert.Equal(t, oauthflow.PromptError, prompt.Status, "the denial reached the run")
	want := q.Get("error_description")
	if want == "" {
		want = "Access was denied."
	}
	assert.Equal(t, want, prompt.Message, "said once, without a repeated heading")
}

// connectWithWidget clicks Connect on the widget shown, consents, and checks
// that the widget reports success and alice's token is stored.
func connectWithWidget(t *testing.T, ctx context.Context, c *crossOrigin) {
	t.Helper()
	popup := browsertest.Popup(t, ctx, "click Connect", chromedp.Click(chromedp.CSS(`oauth-prompt [data-action="connect"]`)))
	browsertest.Consent(t, popup, browsertest.Allow)
	browsertest.WaitClosed(t, ctx, popup)
	seen := widgetDone(t, ctx)
	require.Len(t, seen, 1, "the widget reported %+v", seen)
	assert.Equal(t, crossOriginDone{Status: "success", Message: "Connected to Demo Cloud."}, seen[0])
	assert.True(t, c.connected(t, "alice"), "the token is stored")
}

// keepsFields is a provider that keeps the callback parameters fields with
// the tokens (QuickBooks' realmId), and is otherwise the one it wraps.
type keepsFields struct {
	*providers.OAuth2
	fields []string
}

func (k keepsFields) CallbackFields() []string { return k.fields }

// The frontend callback page opened directly forwards, besides the answer,
// the redirect's parameters the provider keeps with the tokens, and the API
// keeps them; no other parameter goes.
func TestBrowserCrossOriginDirectCallbackKeepsDeclaredFields(t *testing.T) {
	t.Parallel()
	c := startCrossOriginWith(t, func(p *providers.OAuth2) oauthflow.Provider {
		return keepsFields{OAuth2: p, fields: []string{"realmId"}}
	})
	ctx := browsertest.New(t)
	q := browsertest.ConsentOverHTTP(t, c.startSignIn(t, "dave").AuthURL, browsertest.Allow)
	require.NotEmpty(t, q.Get("code"), "the consent redirected with %v", q)
	q.Set("realmId", "4620816365")
	for i := range 9 {
		q.Set(fmt.Sprintf("a%d", i), "x") // undeclared, sorting first
	}

	var status string
	browsertest.Run(t, ctx, "open the frontend callback page directly",
		chromedp.Navigate(c.frontend+"/oauth/callback?"+q.Encode()),
		chromedp.WaitVisible(chromedp.CSS(`#oauth-callback:is([data-status="success"], [data-status="error"])`)),
		browsertest.Into(chromedp.Evaluate[string](`document.getElementById("oauth-callback").dataset.status`), &status))
	require.Equal(t, "success", status)
	conns, err := c.mod.Tokens.Connections(context.Background(), "dave")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	assert.Equal(t, map[string]string{"realmId": "4620816365"}, conns[0].Metadata)
}

// With BindSignIns, in a real Chromium: the widget on the frontend's origin
// opens the popup through POST /start on the API's origin, the cookie it sets
// comes back with the provider's redirect to the API's callback, and the
// widget hears the success. The same sign-in's link, opened by anyone else,
// is refused first, and that consumes nothing.
func TestBrowserBoundSignIn(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t, func(cfg *oauthflow.Config) { cfg.BindSignIns = true })
	ctx := browsertest.New(t)
	doc := c.startSignIn(t, "alice")
	require.NotEmpty(t, doc.Binding)

	forwarded := browsertest.ConsentOverHTTP(t, doc.AuthURL, browsertest.Allow)
	status, _, _ := get(t, c.api+oauthflow.CallbackPath+"?"+forwarded.Encode())
	require.Equal(t, http.StatusForbidden, status, "the link alone does not complete")
	require.False(t, c.connected(t, "alice"))

	showPrompt(t, ctx, c.frontend, doc)
	connectWithWidget(t, ctx, c)
}

// Chromium with JavaScript turned off, on the frontend callback page of a
// frontend whose API lives on another origin: the page's <noscript> form is
// what the user sees, and submitting it ends on the API's callback page,
// which says the account is connected; the token is stored.
func TestBrowserWithoutJavaScriptCompletesThroughTheForm(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t)
	ctx := browsertest.New(t)
	q := browsertest.ConsentOverHTTP(t, c.startSignIn(t, "erin").AuthURL, browsertest.Allow)
	require.NotEmpty(t, q.Get("code"), "the consent redirected with %v", q)

	var button, title, location string
	browsertest.Run(t, ctx, "open the frontend callback page with JavaScript off",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}),
		chromedp.Navigate(c.frontend+"/oauth/callback?"+q.Encode()),
		chromedp.WaitVisible(chromedp.CSS(`form button[type="submit"]`)),
		browsertest.Into(chromedp.Text(chromedp.CSS(`form button[type="submit"]`)), &button))
	assert.Equal(t, "Finish signing in", button)
	assert.False(t, c.connected(t, "erin"), "nothing is completed before the user submits")

	browsertest.Run(t, ctx, "submit the form",
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#oauthflow-result`)),
		browsertest.Into(chromedp.Text(chromedp.CSS(`#oauthflow-result h1`)), &title),
		browsertest.Into(chromedp.Location(), &location))
	u, err := url.Parse(location)
	require.NoError(t, err)
	assert.Equal(t, c.api+oauthflow.CallbackPath, u.Scheme+"://"+u.Host+u.Path, "the API callback completed it")
	assert.Contains(t, title, "account connected")
	assert.True(t, c.connected(t, "erin"), "the token is stored")
}

// A full-page sign-in with a return address ends back in the app: the API's
// callback page sends the browser to the frontend with the outcome.
func TestBrowserFullPageSignInReturnsToTheApp(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t)
	ctx := browsertest.New(t)
	run, err := c.mod.Engine.Launch(context.Background(), "erin", oauthflow.OAuthWorkflowName,
		oauthflow.OAuthWorkflowArgs{Provider: demo.ProviderID, ReturnTo: c.frontend + "/?tab=accounts"}, oauthflow.RunOptions{})
	require.NoError(t, err)
	var doc oauthflow.OAuthPromptDocument
	require.NoError(t, c.mod.Engine.Document(context.Background(), run.ID, oauthflow.PromptDocumentName, &doc))
	q := browsertest.ConsentOverHTTP(t, doc.AuthURL, browsertest.Allow)
	browsertest.Run(t, ctx, "land on the API's callback in the tab", chromedp.Navigate(c.api+oauthflow.CallbackPath+"?"+q.Encode()))
	want := c.frontend + "/?oauth=success&provider=" + demo.ProviderID + "&tab=accounts"
	deadline := time.Now().Add(browsertest.StepTimeout)
	for {
		href, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.href`))
		if err == nil && href == want {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tab is at %q (%v), want %q", href, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
	assert.True(t, c.connected(t, "erin"), "the token is stored")
}
