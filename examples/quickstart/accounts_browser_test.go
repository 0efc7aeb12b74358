package main

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/browsertest"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// These tests drive the page's "Connected accounts" section, the
// oauth-connections widget on the library's connections endpoint, in a real
// headless Chromium and with the keyboard only: Tab to a control, Enter or
// Space to press it, Escape to close the dialog; the demo provider's consent
// page in the popup is answered with Tab and Enter too.

// Selectors in the widget.
const (
	accounts    = `oauth-connections`
	demoRow     = accounts + ` li[data-provider="demo"]`
	demoName    = demoRow + ` [data-role="name"]`
	demoConnect = demoRow + ` button[data-action="connect"]`
	confirmBox  = accounts + ` dialog[data-role="confirm"]`
)

// openAccounts opens the page in a fresh browser and waits until the widget
// lists Demo Cloud in the state health ("none": not connected).
func openAccounts(t *testing.T, base, health string) context.Context {
	t.Helper()
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, "open the quickstart page",
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(demoRow+`[data-health="`+health+`"]`)))
	return ctx
}

// rowState is what the widget shows in Demo Cloud's row.
type rowState struct {
	Health, State, Account, Reason string
	Buttons                        []string // the accessible names of the row's buttons
}

func readRow(t *testing.T, ctx context.Context) rowState {
	t.Helper()
	var r rowState
	browsertest.Run(t, ctx, "read Demo Cloud's row", browsertest.Into(chromedp.Evaluate[rowState](`(function () {
  var row = document.querySelector('`+demoRow+`');
  var text = function (role) { var n = row.querySelector('[data-role="' + role + '"]'); return n ? n.textContent : ""; };
  return {Health: row.getAttribute("data-health"), State: text("state"), Account: text("account"), Reason: text("reason"),
    Buttons: Array.from(row.querySelectorAll('[data-role="actions"] button')).map(function (b) { return b.getAttribute("aria-label"); })};
})()`), &r))
	return r
}

// waitStatus waits until the widget's status region says want.
func waitStatus(t *testing.T, ctx context.Context, want string) {
	t.Helper()
	browsertest.Run(t, ctx, "the widget says "+want,
		poll(`document.querySelector('`+accounts+` [data-role="status"]').textContent === `+jsString(want)))
}

func jsString(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// connectWithKeyboard tabs to the widget's button named label (Connect or
// Reconnect Demo Cloud), presses Enter, allows the consent in the popup with
// the keyboard, and waits for the widget to say said, with focus on Demo
// Cloud's row.
func connectWithKeyboard(t *testing.T, ctx context.Context, sel, label, said string) {
	t.Helper()
	if name := browsertest.TabTo(t, ctx, sel); name != label {
		t.Fatalf("the focused button is named %q, want %q", name, label)
	}
	popup := browsertest.Popup(t, ctx, "press Enter on "+label, chromedp.KeyEvent(browsertest.Enter))
	browsertest.ConsentWithKeyboard(t, popup, browsertest.Allow)
	browsertest.WaitClosed(t, ctx, popup)
	waitStatus(t, ctx, said)
	if !browsertest.Focused(t, ctx, demoName) {
		t.Error("after connecting, focus is not on Demo Cloud's row")
	}
}

// userOf is the quickstart user of the browser of ctx: its cookie.
func userOf(t *testing.T, ctx context.Context, base string) string {
	t.Helper()
	var got network.GetCookiesResult
	browsertest.Run(t, ctx, "read the user cookie", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		var err error
		got, err = cdp.Call(ctx, tg, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/"}})
		return err
	}))
	for _, c := range got.Cookies {
		if c.Name == userCookie {
			return c.Value
		}
	}
	t.Fatal("the browser has no quickstart user cookie")
	return ""
}

// The list, a connect and a disconnect, with the keyboard: the widget lists
// Demo Cloud as not connected; Connect opens the sign-in in a popup and the
// row then says who is connected; Disconnect asks first (Escape keeps the
// connection), and confirmed it revokes the grant at the provider. The page
// passes the accessibility check in each state, the dialog open too.
func TestBrowserAccountsConnectAndDisconnect(t *testing.T) {
	t.Parallel()
	a, base := serveApp(t, time.Hour)
	ctx := openAccounts(t, base, "none")
	if r := readRow(t, ctx); r.State != "Not connected" || strings.Join(r.Buttons, ",") != "Connect Demo Cloud" {
		t.Errorf("the row shows %+v, want Demo Cloud not connected with a Connect button", r)
	}
	browsertest.CheckAccessibility(t, ctx, "check the page before connecting")

	connectWithKeyboard(t, ctx, demoConnect, "Connect Demo Cloud", "Connected Demo Cloud as demo-user.")
	want := rowState{Health: "healthy", State: "Connected", Account: "Connected as demo-user", Buttons: []string{"Disconnect Demo Cloud"}}
	if r := readRow(t, ctx); !equalRows(r, want) {
		t.Errorf("the row shows %+v, want %+v", r, want)
	}
	browsertest.CheckAccessibility(t, ctx, "check the page with a connection")
	user := userOf(t, ctx, base)
	stored, err := a.mod.Tokens.GetTokens(t.Context(), user, demoID)
	if err != nil {
		t.Fatalf("the widget's sign-in stored no token for the browser's user: %v", err)
	}

	disconnect := demoRow + ` button[data-action="disconnect"]`
	browsertest.TabTo(t, ctx, disconnect)
	browsertest.Press(t, ctx, "press Space on Disconnect", browsertest.Space)
	browsertest.Run(t, ctx, "the dialog asks", chromedp.WaitVisible(chromedp.CSS(confirmBox+`[open]`)))
	if !browsertest.Focused(t, ctx, confirmBox+` [data-action="cancel"]`) {
		t.Error("the dialog opened without focus on Cancel")
	}
	browsertest.CheckAccessibility(t, ctx, "check the page with the dialog open")
	browsertest.Press(t, ctx, "press Escape", browsertest.Escape)
	browsertest.Run(t, ctx, "the dialog closes", chromedp.WaitNotPresent(chromedp.CSS(confirmBox+`[open]`)))
	if !browsertest.Focused(t, ctx, disconnect) {
		t.Error("after Escape, focus is not back on Disconnect")
	}
	if got := a.demo.Stats().Revocations; got != 0 {
		t.Fatalf("the provider saw %d revocations before the user confirmed", got)
	}

	browsertest.Press(t, ctx, "press Enter on Disconnect", browsertest.Enter)
	browsertest.Run(t, ctx, "the dialog asks again", chromedp.WaitVisible(chromedp.CSS(confirmBox+`[open]`)))
	if name := browsertest.TabTo(t, ctx, confirmBox+` [data-action="confirm"]`); name != "Disconnect Demo Cloud" {
		t.Errorf("the dialog's button is named %q, want Disconnect Demo Cloud", name)
	}
	browsertest.Press(t, ctx, "press Enter on the dialog's Disconnect", browsertest.Enter)
	waitStatus(t, ctx, "Disconnected Demo Cloud.")
	if r := readRow(t, ctx); r.Health != "none" || strings.Join(r.Buttons, ",") != "Connect Demo Cloud" {
		t.Errorf("the row shows %+v after disconnecting, want Demo Cloud not connected", r)
	}
	if !browsertest.Focused(t, ctx, demoName) {
		t.Error("after disconnecting, focus is not on Demo Cloud's row")
	}
	if got := a.demo.Stats().Revocations; got < 1 {
		t.Errorf("the provider saw %d revocations, want the disconnect's", got)
	}
	if a.demo.Active(stored.RefreshToken) || a.demo.Active(stored.AccessToken) {
		t.Error("the provider still honours the disconnected grant's tokens")
	}
	if _, err := a.mod.Tokens.GetTokens(t.Context(), user, demoID); err == nil {
		t.Error("the app still holds the disconnected tokens")
	}
}

func equalRows(a, b rowState) bool {
	return a.Health == b.Health && a.State == b.State && a.Account == b.Account && a.Reason == b.Reason &&
		strings.Join(a.Buttons, "|") == strings.Join(b.Buttons, "|")
}

// endGrant has the demo provider end the grant of tokens (a revocation of its
// refresh token, as the user would on the provider's own settings page).
func endGrant(t *testing.T, a *app, base string, tokens *oauthflow.StoredTokens) {
	t.Helper()
	creds := a.demo.Credentials(base + oauthflow.CallbackPath)
	req, err := http.NewRequest(http.MethodPost, base+demoPath+authserver.PathRevoke,
		strings.NewReader(url.Values{"token": {tokens.RefreshToken}}.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(creds.ClientID, creds.ClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || a.demo.Active(tokens.RefreshToken) {
		t.Fatalf("the provider answered the revocation %s and still honours the grant", resp.Status)
	}
}

// A connection whose grant the provider ended: the app learns it at its next
// read (the refresh is refused with invalid_grant, and the connection is
// gone), the widget then offers Demo Cloud to connect again, and connecting
// with the keyboard gives the app a grant the provider honours.
func TestBrowserAccountsReconnectAfterTheProviderEndedTheGrant(t *testing.T) {
	t.Parallel()
	a, base := serveApp(t, 30*time.Second) // inside the refresh window from the start: every read refreshes
	ctx := openAccounts(t, base, "none")
	connectWithKeyboard(t, ctx, demoConnect, "Connect Demo Cloud", "Connected Demo Cloud as demo-user.")
	user := userOf(t, ctx, base)
	ended, err := a.mod.Tokens.GetTokens(t.Context(), user, demoID)
	if err != nil {
		t.Fatal(err)
	}

	endGrant(t, a, base, ended)
	_, err = a.mod.Tokens.GetValidAccessToken(t.Context(), user, demoID)
	if !oauthflow.IsGrantDead(err) {
		t.Fatalf("the app's read after the grant ended: %v, want a dead grant", err)
	}
	browsertest.Run(t, ctx, "open the page again",
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(demoRow+`[data-health="none"]`)))
	if r := readRow(t, ctx); r.State != "Not connected" || strings.Join(r.Buttons, ",") != "Connect Demo Cloud" {
		t.Errorf("the row shows %+v, want Demo Cloud to connect again", r)
	}

	connectWithKeyboard(t, ctx, demoConnect, "Connect Demo Cloud", "Connected Demo Cloud as demo-user.")
	token, err := a.mod.Tokens.GetValidAccessToken(t.Context(), user, demoID)
	if err != nil || !a.demo.Active(token) || token == ended.AccessToken {
		t.Fatalf("after connecting again the app reads %v and the provider honours it: %t; want a new, live token", err, a.demo.Active(token))
	}
}

// A connection whose refreshes fail shows it, in words and in the reason's,
// with Reconnect; reconnecting with the keyboard mends it.
func TestBrowserAccountsReconnectAFailingConnection(t *testing.T) {
	t.Parallel()
	a, base := serveApp(t, 30*time.Second)
	ctx := openAccounts(t, base, "none")
	connectWithKeyboard(t, ctx, demoConnect, "Connect Demo Cloud", "Connected Demo Cloud as demo-user.")
	user := userOf(t, ctx, base)

	a.demo.FailNext(oauthflowtest.Failure{Grant: authserver.GrantRefreshToken, Status: http.StatusServiceUnavailable})
	if _, err := a.mod.Tokens.GetValidAccessToken(t.Context(), user, demoID); err == nil {
		t.Fatal("the refresh the provider refused succeeded")
	}
	browsertest.Run(t, ctx, "open the page again",
		chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(demoRow+`[data-health="refresh_failing"]`)))
	r := readRow(t, ctx)
	if r.State != "Renewal failing" || !strings.Contains(r.Reason, "Demo Cloud could not renew") ||
		strings.Join(r.Buttons, ",") != "Reconnect Demo Cloud,Disconnect Demo Cloud" {
		t.Errorf("the row shows %+v, want the failure in words, its reason, Reconnect and Disconnect", r)
	}
	browsertest.CheckAccessibility(t, ctx, "check the page with a failing connection")

	connectWithKeyboard(t, ctx, demoRow+` button[data-action="reconnect"]`, "Reconnect Demo Cloud", "Reconnected Demo Cloud as demo-user.")
	if r := readRow(t, ctx); r.Health != "healthy" || r.Reason != "" {
		t.Errorf("the row shows %+v after reconnecting, want it healthy", r)
	}
	if _, err := a.mod.Tokens.GetValidAccessToken(t.Context(), user, demoID); err != nil {
		t.Errorf("after reconnecting the app reads: %v", err)
	}
}

// The full-page flow (flow="page"): Connect takes the tab to the provider,
// the API's callback page sends it back to the page, and the widget says
// so, with the outcome gone from the address.
func TestBrowserAccountsFullPageConnect(t *testing.T) {
	t.Parallel()
	_, base := serveApp(t, time.Hour)
	ctx := openAccounts(t, base, "none")
	browsertest.Run(t, ctx, "use the full-page flow",
		chromedp.Evaluate[chromedp.Void](`document.querySelector('`+accounts+`').setAttribute("flow", "page")`))
	browsertest.TabTo(t, ctx, demoConnect)
	browsertest.Press(t, ctx, "press Enter on Connect", browsertest.Enter)
	browsertest.ConsentWithKeyboard(t, ctx, browsertest.Allow)
	browsertest.Run(t, ctx, "back on the page", chromedp.WaitVisible(chromedp.CSS(demoRow+`[data-health="healthy"]`)))
	waitStatus(t, ctx, "Connected Demo Cloud as demo-user.")
	var search string
	browsertest.Run(t, ctx, "read the address", browsertest.Into(chromedp.Evaluate[string](`location.search`), &search))
	if search != "" {
		t.Errorf("the address still has %q", search)
	}
}
