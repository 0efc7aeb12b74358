// Package browsertest drives a real headless Chromium from tests through
// github.com/chromedp/chromedp: it finds the browser, starts it with a fresh
// profile and popups allowed, and helps with what the oauthflow pages need
// (following a sign-in popup, answering the demo provider's consent page,
// taking screenshots).
//
// A test that cannot find Chromium is skipped, except under CI=true, where a
// missing browser is a failure: CI must run the browser tests, not skip them.
//
//	ctx := browsertest.New(t)
//	browsertest.Run(t, ctx, "open the page", chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS(`#app`)))
package browsertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// StepTimeout bounds one Run: generous, so a slow shared machine under -race
// passes, while a broken page still fails instead of hanging the test binary.
const StepTimeout = 30 * time.Second

// candidates are the browser commands tried, in order, after CHROMIUM_PATH.
var candidates = []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome", "google-chrome-stable"}

// FindChromium returns the browser to run: CHROMIUM_PATH when set (it must
// exist), else the first of /usr/bin/chromium, chromium, chromium-browser and
// google-chrome found.
func FindChromium() (string, error) {
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("CHROMIUM_PATH=%s: %w", p, err)
		}
		return p, nil
	}
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found: install Debian's chromium package or set CHROMIUM_PATH")
}

// New starts a headless Chromium for t with a fresh profile and returns the
// context of its first tab. The browser stops when t ends. Without a browser
// it skips t, or fails it under CI=true.
func New(t testing.TB) context.Context {
	t.Helper()
	path, err := FindChromium()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("browser tests need Chromium in CI: %v", err)
		}
		t.Skipf("skipping browser test: %v", err)
	}
	profile, err := os.MkdirTemp("", "browsertest-profile-")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(profile),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-popup-blocking", true), // window.open from the widget
		chromedp.WindowSize(1024, 768),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		closeBrowser(t, ctx)
		cancel()
		cancelAlloc()
		removeProfile(t, profile)
	})
	// The first run starts the browser; it gets no step timeout, since the
	// browser lives as long as the context of that first run.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", path, err)
	}
	return ctx
}

// closeBrowser asks the browser to close and waits for it to exit, so that
// its helper processes are done with the profile before it is removed.
func closeBrowser(t testing.TB, ctx context.Context) {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := chromedp.Cancel(cctx); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("closing the browser: %v", err)
	}
}

// removeProfile removes the browser's profile, retrying briefly: a helper
// process of the browser may still be writing to it as the browser exits.
// A profile left behind in the temp folder is logged, not a test failure.
func removeProfile(t testing.TB, dir string) {
	var err error
	for range 20 {
		if err = os.RemoveAll(dir); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("removing the browser profile %s: %v", dir, err)
}

// Run runs actions in ctx, in order, as one named step with StepTimeout, and
// fails t with the step's name when they fail or time out. An action that
// returns a value joins a step through Into.
func Run(t testing.TB, ctx context.Context, step string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	if err := chromedp.Do(sctx, actions...); err != nil {
		t.Fatalf("%s: %v", step, err)
	}
}

// Into returns an action that runs a and stores its value in *dst, so that a
// step of Run can read values between its other actions:
//
//	var title string
//	browsertest.Run(t, ctx, "read the title", chromedp.Navigate(url), browsertest.Into(chromedp.Title(), &title))
func Into[T any](a chromedp.Action[T], dst *T) chromedp.Action[chromedp.Void] {
	return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
		v, err := a(ctx, tg)
		if err != nil {
			return chromedp.Void{}, err
		}
		*dst = v
		return chromedp.Void{}, nil
	}
}

// Screenshot writes a full-page PNG of ctx's tab to path, creating its folder.
func Screenshot(t testing.TB, ctx context.Context, path string) {
	t.Helper()
	var png []byte
	Run(t, ctx, "screenshot "+path, Into(chromedp.FullScreenshot(100), &png))
	writePNG(t, path, png)
}

func writePNG(t testing.TB, path string, png []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ScreenshotOf writes a PNG of the element sel in ctx's tab to path, creating its folder.
func ScreenshotOf(t testing.TB, ctx context.Context, sel, path string) {
	t.Helper()
	var png []byte
	Run(t, ctx, "screenshot "+sel, Into(chromedp.Screenshot(chromedp.CSS(sel)), &png))
	writePNG(t, path, png)
}
