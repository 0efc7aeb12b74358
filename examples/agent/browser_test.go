package main

import (
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oauthflow/oauthflow/internal/testkit/browsertest"
)

// TestBrowserAgentResumesAfterSignIn drives the agent page in headless Chromium:
// "List my repositories" starts a run that has no token, so it waits in
// awaiting_auth with the "oauth" child's prompt shown inline; the user connects
// through the widget's popup and consents; the server resumes the run on its
// own, and the page lists the repositories.
func TestBrowserAgentResumesAfterSignIn(t *testing.T) {
	t.Parallel()
	_, srv := startApp(t, appConfig{})
	ctx := browsertest.New(t)
	const (
		prompt  = `#run [data-role="prompt"] [data-oauthflow="prompt"]`
		connect = prompt + `[data-status="pending"] [data-action="connect"]`
	)
	browsertest.Run(t, ctx, "open the agent page and start a run",
		chromedp.Navigate(srv.URL+"/"),
		chromedp.Click(chromedp.CSS(`[data-action="start"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#run[data-status="waiting"][data-state="awaiting_auth"]`)),
		chromedp.WaitVisible(chromedp.CSS(connect)))
	var repos int
	browsertest.Run(t, ctx, "no repositories before sign-in",
		browsertest.Into(chromedp.Evaluate[int](`document.querySelectorAll('ul[data-role="repos"] li').length`), &repos))
	if repos != 0 {
		t.Fatalf("%d repositories listed before sign-in", repos)
	}

	popup := browsertest.Popup(t, ctx, "click Connect in the inline prompt", chromedp.Click(chromedp.CSS(connect)))
	browsertest.Consent(t, popup, browsertest.Allow)
	browsertest.WaitClosed(t, ctx, popup)
	browsertest.Run(t, ctx, "the run resumes and lists the repositories",
		chromedp.WaitVisible(chromedp.CSS(`#run[data-status="completed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`ul[data-role="repos"] li`)),
		browsertest.Into(chromedp.Evaluate[int](`document.querySelectorAll('ul[data-role="repos"] li').length`), &repos))
	if repos == 0 {
		t.Fatal("the completed run lists no repositories")
	}
	var status chromedp.AttributeResult
	browsertest.Run(t, ctx, "the inline prompt says connected",
		browsertest.Into(chromedp.AttributeValue(chromedp.CSS(prompt), "data-status"), &status))
	if status.Value != "success" {
		t.Fatalf("the inline prompt ends %q, want success", status.Value)
	}
}
