package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/browsertest"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// These tests drive the quickstart page in a real headless Chromium: the
// oauth-prompt widget, the demo provider's consent page in a popup, the API
// callback page, and the frontend callback page opened directly.

// Selectors on the page, all inside the demo provider's card (the
// "Connected accounts" section below the cards has a row of its own for it).
const (
	card        = `#providers > [data-provider="demo"]`
	startButton = card + `[data-connected="false"] [data-action="start"]`
	connected   = card + `[data-connected="true"]`
	widget      = card + ` [data-oauthflow="prompt"]`
	callButton  = connected + ` [data-action="call"]`
	result      = card + ` pre[data-role="result"]`
)

// startApp serves the quickstart on an httptest server whose URL is the app's
// Base (the demo provider's issuer and redirect URI derive from it).
func startApp(t *testing.T, tokenTTL time.Duration) string {
	t.Helper()
	_, base := serveApp(t, tokenTTL)
	return base
}

// serveApp is startApp that also returns the app.
func serveApp(t *testing.T, tokenTTL time.Duration) (*app, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	base := "http://" + srv.Listener.Addr().String()
	a, err := newApp(t.Context(), appConfig{Base: base, TokenTTL: tokenTTL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = a
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	return a, base
}

// openPage opens "/" in a fresh browser and waits for the demo card.
func openPage(t *testing.T, base string) context.Context {
	t.Helper()
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, "open the quickstart page",
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(startButton)))
	assertDisconnected(t, ctx)
	return ctx
}

// assertDisconnected checks that the card, once it shows the Connect button,
// hides who connected, the token details and the buttons that need a connection.
func assertDisconnected(t *testing.T, ctx context.Context) {
	t.Helper()
	var shown []string
	browsertest.Run(t, ctx, "list what the disconnected card shows", browsertest.Into(chromedp.Evaluate[[]string](`Array.from(
  document.querySelectorAll('`+card+` [data-role="account"], `+card+` [data-role="token"], `+card+` [data-role="actions"] button, `+result+`'))
  .filter(function (el) { return el.checkVisibility(); })
  .map(function (el) { return el.getAttribute("data-role") || el.getAttribute("data-action"); })`), &shown))
	if len(shown) != 0 {
		t.Errorf("the disconnected card shows %v, want only the Connect button", shown)
	}
}

// recordDone keeps, for every "oauthflow:done" the widget dispatches, what the
// widget showed at that moment: on success the page replaces the widget with
// the connected card 600 ms later, too soon to catch by polling alone.
const recordDone = `window.doneSeen = [];
document.addEventListener("oauthflow:done", function (e) {
  var m = e.target.querySelector('[data-role="message"]');
  var buttons = Array.from(e.target.querySelectorAll("button")).map(function (b) { return b.getAttribute("data-action"); });
  window.doneSeen.push({event: e.detail.status, status: e.target.getAttribute("data-status"),
    message: m ? m.textContent : "", buttons: buttons.join(" ")});
});`

type doneSeen struct {
	Event, Status, Message string
	Buttons                string // the widget's buttons' data-action values
}

// waitDone waits for the widget to settle and returns what recordDone saw.
func waitDone(t *testing.T, ctx context.Context) []doneSeen {
	t.Helper()
	var seen []doneSeen
	browsertest.Run(t, ctx, "the widget settles",
		poll(`window.doneSeen.length > 0`), browsertest.Into(chromedp.Evaluate[[]doneSeen](`window.doneSeen`), &seen))
	return seen
}

// openPopup starts recording the widget's outcome, clicks "Connect Demo
// Cloud", and returns the context of the sign-in popup the widget opens.
func openPopup(t *testing.T, ctx context.Context) context.Context {
	t.Helper()
	browsertest.Run(t, ctx, "record the widget's outcome", chromedp.Evaluate[chromedp.Void](recordDone))
	return browsertest.Popup(t, ctx, "click Connect Demo Cloud", chromedp.Click(chromedp.CSS(startButton)))
}

// connectWithPopup opens the sign-in popup, answers its consent page with d,
// and returns the popup's context.
func connectWithPopup(t *testing.T, ctx context.Context, d browsertest.Decision) context.Context {
	t.Helper()
	popup := openPopup(t, ctx)
	browsertest.Consent(t, popup, d)
	return popup
}

// waitConnected waits for the widget's success and then the connected card.
func waitConnected(t *testing.T, ctx context.Context) {
	t.Helper()
	seen := waitDone(t, ctx)
	if len(seen) != 1 || seen[0].Event != "success" || seen[0].Status != "success" ||
		!strings.HasPrefix(seen[0].Message, "Connected to Demo Cloud") || seen[0].Buttons != "" {
		t.Fatalf("the widget reported %+v, want one success showing \"Connected to Demo Cloud.\"", seen)
	}
	browsertest.Run(t, ctx, "the card shows the connection", chromedp.WaitVisible(chromedp.CSS(callButton)))
}

// poll waits, with no timeout of its own, for a JavaScript condition.
func poll(expr string) chromedp.Action[chromedp.Void] {
	return chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(0))
}

// text reads the visible text of the element sel into *s.
func text(sel string, s *string) chromedp.Action[chromedp.Void] {
	return browsertest.Into(chromedp.Text(chromedp.CSS(sel)), s)
}

// callAPI clicks "Call the protected API", waits until the page has shown the
// answer and reloaded the session with wantRefreshes, and returns the answer.
func callAPI(t *testing.T, ctx context.Context, wantRefreshes string) string {
	t.Helper()
	var out string
	browsertest.Run(t, ctx, "call the protected API",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+result+`').removeAttribute("data-status")`),
		chromedp.Click(chromedp.CSS(callButton)),
		chromedp.WaitVisible(chromedp.CSS(result+`[data-status="success"]`)),
		poll(`document.querySelector('`+card+` [data-role="refreshes"]').textContent === "`+wantRefreshes+`"`),
		text(result, &out))
	return out
}

// me decodes the JSON the page shows under its first line.
func me(t *testing.T, out string) (fingerprint string, repos []string) {
	t.Helper()
	head, body, _ := strings.Cut(out, "\n")
	var m struct {
		User  string
		Repos []struct{ Name string }
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("the page shows %q: %v", out, err)
	}
	for _, r := range m.Repos {
		repos = append(repos, r.Name)
	}
	if m.User == "" || len(repos) == 0 {
		t.Fatalf("the API answer has no user or no repos: %q", out)
	}
	return head[strings.LastIndex(head, " ")+1:], repos
}

// inRefreshWindow is true once the card says the token is at most 58 s from
// expiry: past the token store's 60 s skew, with a second to spare for rounding.
const inRefreshWindow = `(function () {
  var s = document.querySelector('` + card + ` [data-role="expiry"]').textContent;
  var m = /^in (\d+) s \(inside/.exec(s);
  return s.indexOf("expired") === 0 || (m !== null && Number(m[1]) <= 58);
})()`

// The popup path end to end: connect, consent in the popup, the API callback
// page tells the opener and closes, the widget shows "Connected", the API call
// succeeds with the stored token, the token refreshes once it is inside the
// refresh window, and Disconnect brings the Connect button back.
func TestBrowserPopupConnectCallRefreshDisconnect(t *testing.T) {
	t.Parallel()
	// Refresh-eligible 8 s after sign-in (the token store refreshes 60 s early):
	// room for the first call on a loaded machine, a short wait for the second.
	base := startApp(t, 68*time.Second)
	ctx := openPage(t, base)

	popup := connectWithPopup(t, ctx, browsertest.Allow)
	browsertest.WaitClosed(t, ctx, popup)
	waitConnected(t, ctx)

	var shown, health, connectedAt, account string
	browsertest.Run(t, ctx, "read the fingerprint and the connection's health", text(card+` [data-role="fingerprint"]`, &shown),
		text(card+` [data-role="health"]`, &health), text(card+` [data-role="connected-at"]`, &connectedAt),
		text(card+` [data-role="account"]`, &account))
	if health != "healthy" || connectedAt == "" || connectedAt == "unknown" {
		t.Errorf("the card shows health %q, connected %q; want healthy and a time", health, connectedAt)
	}
	if account != "Connected to Demo Cloud as demo-user" {
		t.Errorf("the card says %q, want who connected", account)
	}
	first, repos := me(t, callAPI(t, ctx, "0"))
	if first != shown {
		t.Errorf("the API was called with token %s, the card shows %s", first, shown)
	}
	t.Logf("first call: token %s, repos %v", first, repos)

	browsertest.Run(t, ctx, "wait for the refresh window", poll(inRefreshWindow))
	second, _ := me(t, callAPI(t, ctx, "1"))
	browsertest.Run(t, ctx, "read the new fingerprint", text(card+` [data-role="fingerprint"]`, &shown))
	if second == first || shown != second {
		t.Errorf("after the refresh: call used %s, card shows %s, first token %s; want a new token on both", second, shown, first)
	}

	browsertest.Run(t, ctx, "disconnect",
		chromedp.Click(chromedp.CSS(connected+` [data-action="disconnect"]`)),
		chromedp.WaitVisible(chromedp.CSS(startButton)))
	assertDisconnected(t, ctx)
}

// A denied consent: the widget shows the error and a retry button; retrying
// reopens the same sign-in (its state survives a provider error) in the popup,
// which still shows the error page, and Allow then connects.
func TestBrowserDeniedConsentThenRetry(t *testing.T) {
	t.Parallel()
	base := startApp(t, time.Hour)
	ctx := openPage(t, base)

	popup := connectWithPopup(t, ctx, browsertest.Deny)
	seen := waitDone(t, ctx)
	if len(seen) != 1 || seen[0].Event != "error" || seen[0].Status != "error" ||
		!strings.Contains(seen[0].Message, "denied") || seen[0].Buttons != "retry" {
		t.Fatalf("the widget reported %+v, want one error saying access was denied, with a retry button only", seen)
	}
	browsertest.Run(t, ctx, "reset the recorder, click retry",
		chromedp.Evaluate[chromedp.Void](`window.doneSeen = []`),
		chromedp.Click(chromedp.CSS(widget+` [data-action="retry"]`)),
		chromedp.WaitVisible(chromedp.CSS(widget+`[data-status="working"]`)))
	browsertest.Consent(t, popup, browsertest.Allow)
	browsertest.WaitClosed(t, ctx, popup)
	waitConnected(t, ctx)
}

// The direct path: the frontend callback page opened without an opener (as
// from a link a terminal printed) completes through POST /api/v1/oauth/complete,
// shows the outcome, and the token is stored for the browser's user.
func TestBrowserDirectCallbackCompletes(t *testing.T) {
	t.Parallel()
	base := startApp(t, time.Hour)
	ctx := openPage(t, base) // the page's first request gives this browser its user cookie

	var started startedSignIn
	browsertest.Run(t, ctx, "start a sign-in from the page", browsertest.Into(chromedp.Evaluate[startedSignIn](`fetch("/app/connect", {method: "POST",
  headers: {"Content-Type": "application/json"}, body: JSON.stringify({provider: "demo"})}).then(function (r) { return r.json(); })`,
		chromedp.EvalAwaitPromise), &started))
	q := browsertest.ConsentOverHTTP(t, started.Prompt.AuthURL, browsertest.Allow)
	if q.Get("state") != started.Prompt.State || q.Get("code") == "" || q.Get("iss") == "" {
		t.Fatalf("the consent redirected with %v, want a code, an iss and the state %q", q, started.Prompt.State)
	}

	var status, mode, title, message, search string
	settled := `#oauth-callback:is([data-status="success"], [data-status="error"])`
	browsertest.Run(t, ctx, "open the callback page directly",
		chromedp.Navigate(base+"/oauth/callback?"+q.Encode()),
		chromedp.WaitVisible(chromedp.CSS(settled)),
		browsertest.Into(chromedp.Evaluate[string](`document.getElementById("oauth-callback").dataset.status`), &status),
		browsertest.Into(chromedp.Evaluate[string](`document.getElementById("oauth-callback").dataset.mode`), &mode),
		text(`#oauth-callback [data-role="title"]`, &title),
		text(`#oauth-callback [data-role="message"]`, &message),
		browsertest.Into(chromedp.Evaluate[string](`location.search`), &search))
	if status != "success" || mode != "direct" || title != "Connected" {
		t.Fatalf("the callback page shows %s/%s %q: %q; want success/direct \"Connected\"", status, mode, title, message)
	}
	if search != "" {
		t.Errorf("the address bar still has the query %q, want the code gone", search)
	}
	browsertest.Run(t, ctx, "the page shows the stored token",
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(callButton)))
	me(t, callAPI(t, ctx, "0"))
}

// The popup path through the frontend callback page, as when a provider
// redirects to /oauth/callback: opened in the widget's popup, the page posts
// the code and state to its opener and closes, and the widget completes the
// sign-in through POST /api/v1/oauth/complete. The demo provider redirects
// to the API callback, so the test consents over HTTP and sends the popup to
// /oauth/callback with the redirect's query, as a provider would.
func TestBrowserPopupThroughFrontendCallback(t *testing.T) {
	t.Parallel()
	base := startApp(t, time.Hour)
	ctx := openPage(t, base)
	popup := openPopup(t, ctx)

	var authURL string
	browsertest.Run(t, popup, "the popup shows the consent page",
		chromedp.WaitVisible(chromedp.CSS("#allow")), browsertest.Into(chromedp.Location(), &authURL))
	q := browsertest.ConsentOverHTTP(t, authURL, browsertest.Allow)
	browsertest.Run(t, popup, "the provider redirects to the frontend callback page",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, page.Navigate, page.NavigateParams{URL: base + "/oauth/callback?" + q.Encode()})
			return err
		}))
	browsertest.WaitClosed(t, ctx, popup)
	waitConnected(t, ctx)
	me(t, callAPI(t, ctx, "0"))
}

// startedSignIn is the part of POST /app/connect's answer the tests read.
type startedSignIn struct {
	Prompt struct {
		AuthURL string `json:"authUrl"`
		State   string `json:"state"`
	} `json:"prompt"`
}

// TestScreenshots drives the page to before and after connecting and takes a
// screenshot of each, of a sign-in with a code, and of the "Connected
// accounts" section with a connection whose refreshes fail. It writes
// docs/quickstart-{before,after,device,connections}.png only with
// UPDATE_SCREENSHOTS=1, so a test run never rewrites tracked files:
//
//	UPDATE_SCREENSHOTS=1 go test ./examples/quickstart -run TestScreenshots
func TestScreenshots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		dir = filepath.Join("..", "..", "docs")
	}
	base := startApp(t, 75*time.Second)
	ctx := openPage(t, base)
	browsertest.Screenshot(t, ctx, filepath.Join(dir, "quickstart-before.png"))

	connectWithPopup(t, ctx, browsertest.Allow)
	waitConnected(t, ctx)
	me(t, callAPI(t, ctx, "0"))
	browsertest.Screenshot(t, ctx, filepath.Join(dir, "quickstart-after.png"))

	device := openPage(t, startApp(t, 75*time.Second))
	browsertest.Run(t, device, "ask for a code",
		chromedp.Click(chromedp.CSS(card+`[data-connected="false"] [data-action="start-device"]`)),
		chromedp.WaitVisible(chromedp.CSS(widget+`[data-status="pending"] [data-role="qr"]`)))
	browsertest.Screenshot(t, device, filepath.Join(dir, "quickstart-device.png"))

	a, base := serveApp(t, 30*time.Second)
	accountsCtx := openAccounts(t, base, "none")
	connectWithKeyboard(t, accountsCtx, demoConnect, "Connect Demo Cloud", "Connected Demo Cloud as demo-user.")
	a.demo.FailNext(oauthflowtest.Failure{Grant: authserver.GrantRefreshToken, Status: http.StatusServiceUnavailable})
	_, _ = a.mod.Tokens.GetValidAccessToken(t.Context(), userOf(t, accountsCtx, base), demoID) // the refresh fails
	browsertest.Run(t, accountsCtx, "open the page again",
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(demoRow+`[data-health="refresh_failing"]`)))
	browsertest.ScreenshotOf(t, accountsCtx, "#accounts", filepath.Join(dir, "quickstart-connections.png"))
}

// Sign-in with a code: "Sign in with a code" shows the demo's code and where to
// enter it in the widget; the page polls the sign-in's document, so a denial on
// the provider's page (another device, here answered over HTTP) shows in the
// widget with a way to start again, and an approval connects the card.
func TestBrowserDeviceSignIn(t *testing.T) {
	t.Parallel()
	base := startApp(t, time.Hour)
	ctx := openPage(t, base)
	const deviceButton = card + `[data-connected="false"] [data-action="start-device"]`

	var code, uri string
	browsertest.Run(t, ctx, "record the widget's outcome", chromedp.Evaluate[chromedp.Void](recordDone))
	showCode := func(step string) {
		browsertest.Run(t, ctx, step,
			chromedp.Evaluate[chromedp.Void](`window.doneSeen = []`),
			chromedp.Click(chromedp.CSS(deviceButton)),
			chromedp.WaitVisible(chromedp.CSS(widget+`[data-status="pending"] [data-role="user-code"]`)),
			text(widget+` [data-role="user-code"]`, &code),
			text(widget+` [data-role="verification-uri"]`, &uri))
		if uri != base+"/demo/device" || code == "" {
			t.Fatalf("the widget shows the code %q at %q, want a code at %s/demo/device", code, uri, base)
		}
	}

	showCode("ask for a code")
	decide(t, uri, code, "deny")
	seen := waitDone(t, ctx)
	if len(seen) != 1 || seen[0].Status != "error" || !strings.Contains(seen[0].Message, "denied") {
		t.Fatalf("the widget reported %+v, want one error saying the sign-in was denied", seen)
	}

	showCode("start again with a new code")
	decide(t, uri, code, "allow")
	waitConnected(t, ctx)
	me(t, callAPI(t, ctx, "0"))
}
