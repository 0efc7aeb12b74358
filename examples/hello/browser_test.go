package main

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// A sign-in in a real browser: open /connect/local, allow on the provider's
// consent page, land on oauthflow's callback page, then read /me/local with
// the stored token. Without Chromium the test is skipped, except under
// CI=true, where it fails.
func TestSignInInABrowser(t *testing.T) {
	chromium := findChromium(t)
	_, _, app := startHello(t, oauthflowtest.Options{ConsentPage: true})

	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox)
	alloc, cancel := chromedp.NewExecAllocator(t.Context(), opts...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, time.Minute)
	defer cancel()
	step := func(what string, a chromedp.Action[chromedp.Void]) {
		t.Helper()
		if _, err := chromedp.Run(ctx, a); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	read := func(what string, a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return v
	}
	step("open /connect/local", chromedp.Navigate(app.URL+"/connect/local"))
	step("wait for the consent page", chromedp.WaitVisible(chromedp.CSS(`#allow`)))
	step("allow", chromedp.Click(chromedp.CSS(`#allow`)))
	for { // the consent page's form posts, then redirects to the callback
		path, err := chromedp.Run(ctx, chromedp.Evaluate[string](`location.pathname`))
		if err == nil && path == oauthflow.CallbackPath {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the browser never reached the callback (last at %q, %v)", path, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
	landed := read("read where the browser landed", chromedp.Evaluate[string](`location.href`))
	step("open /me/local", chromedp.Navigate(app.URL+"/me/local"))
	me := read("read /me/local", chromedp.Text(chromedp.CSS(`body`)))
	if !strings.HasPrefix(landed, app.URL+oauthflow.CallbackPath) {
		t.Errorf("the consent landed on %s, want the app's callback", landed)
	}
	if !strings.Contains(me, `"sub":"demo-user"`) {
		t.Errorf("GET /me/local after the sign-in shows %q", me)
	}
}

// findChromium returns the browser to drive: CHROMIUM_PATH, or the first of
// the usual names on PATH.
func findChromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the browser test needs Chromium in CI: install Debian's chromium package or set CHROMIUM_PATH")
	}
	t.Skip("no Chromium found: install Debian's chromium package or set CHROMIUM_PATH")
	return ""
}
