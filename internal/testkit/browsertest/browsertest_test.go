package browsertest_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oauthflow/oauthflow/internal/testkit/browsertest"
)

func TestFindChromiumHonoursCHROMIUM_PATH(t *testing.T) {
	t.Setenv("CHROMIUM_PATH", filepath.Join(t.TempDir(), "no-such-browser"))
	if p, err := browsertest.FindChromium(); err == nil {
		t.Fatalf("FindChromium() = %q, want an error for a missing CHROMIUM_PATH", p)
	}
}

// A page that opens a consent popup like the demo provider's; the popup's
// decision page reports the decision to its opener and closes.
const (
	openerPage = `<!doctype html><button id="open">Open</button><p id="got"></p><script>
document.getElementById("open").onclick = function () { window.open("/demo/authorize", "consent", "popup,width=400,height=400"); };
window.addEventListener("message", function (e) { document.getElementById("got").textContent = e.data; });
</script>`
	consentPage = `<!doctype html><form method="post" action="authorize/decision">
<button type="submit" id="allow" name="decision" value="allow">Allow</button>
<button type="submit" id="deny" name="decision" value="deny">Deny</button></form>`
	decisionPage = `<!doctype html><script>window.opener.postMessage(%q, location.origin); window.close();</script>`
)

func TestPopupConsentAndScreenshot(t *testing.T) {
	srv := consentServer(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, "open the page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open")))
	popup := browsertest.Popup(t, ctx, "open the popup", chromedp.Click(chromedp.CSS("#open")))
	browsertest.Consent(t, popup, browsertest.Deny)
	browsertest.WaitClosed(t, ctx, popup)
	var got string
	browsertest.Run(t, ctx, "read the answer",
		chromedp.Poll[chromedp.Void](`document.getElementById("got").textContent !== ""`, chromedp.WithPollingTimeout(0)),
		browsertest.Into(chromedp.Text(chromedp.CSS("#got")), &got))
	if got != "decision=deny" {
		t.Errorf("the opener got %q, want decision=deny", got)
	}

	path := filepath.Join(t.TempDir(), "shots", "page.png")
	browsertest.Screenshot(t, ctx, path)
	png, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("%s is not a PNG (%d bytes)", path, len(png))
	}
}

// consentServer serves openerPage, and a consent popup like the demo
// provider's whose decision page reports the decision to its opener.
func consentServer(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, openerPage) })
	mux.HandleFunc("GET /demo/authorize", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, consentPage) })
	mux.HandleFunc("POST /demo/authorize/decision", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, decisionPage, "decision="+r.PostFormValue("decision"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// The same popup with the keyboard only: Tab to the button, Enter opens the
// popup, and the consent page is answered with Tab and Enter too.
func TestKeyboardPopupConsent(t *testing.T) {
	srv := consentServer(t)
	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, "open the page", chromedp.Navigate(srv.URL+"/"), chromedp.WaitVisible(chromedp.CSS("#open")))
	if name := browsertest.TabTo(t, ctx, "#open"); name != "Open" {
		t.Errorf("the focused button is named %q, want Open", name)
	}
	popup := browsertest.Popup(t, ctx, "press Enter on Open", chromedp.KeyEvent(browsertest.Enter))
	browsertest.ConsentWithKeyboard(t, popup, browsertest.Allow)
	browsertest.WaitClosed(t, ctx, popup)
	var got string
	browsertest.Run(t, ctx, "read the answer",
		chromedp.Poll[chromedp.Void](`document.getElementById("got").textContent !== ""`, chromedp.WithPollingTimeout(0)),
		browsertest.Into(chromedp.Text(chromedp.CSS("#got")), &got))
	if got != "decision=allow" {
		t.Errorf("the opener got %q, want decision=allow", got)
	}
	if !browsertest.Focused(t, ctx, "#open") {
		t.Error("focus left the Open button")
	}
}

// The accessibility check finds what a page breaks (an image without a text,
// a button without a name, too little contrast) and nothing on a page that
// breaks nothing.
func TestAccessibilityCheck(t *testing.T) {
	t.Parallel()
	pages := map[string]string{
		"/bad": `<!doctype html><html lang="en"><head><title>Bad</title></head><body><main>
<img src="/x.png"><button></button><p style="color:#bbb;background:#fff">faint</p></main></body></html>`,
		"/good": `<!doctype html><html lang="en"><head><title>Good</title></head><body><main>
<h1>Good</h1><img src="/x.png" alt="A cat"><button>Send</button></main></body></html>`,
	}
	mux := http.NewServeMux()
	for path, page := range pages {
		mux.HandleFunc("GET "+path, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, page) })
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	ctx := browsertest.New(t)
	browsertest.Run(t, ctx, "open the bad page", chromedp.Navigate(srv.URL+"/bad"), chromedp.WaitVisible(chromedp.CSS("main")))
	var ids []string
	for _, v := range browsertest.AxeViolations(t, ctx, "check the bad page") {
		ids = append(ids, v.ID)
	}
	for _, want := range []string{"image-alt", "button-name", "color-contrast"} {
		if !slices.Contains(ids, want) {
			t.Errorf("axe found %v on the bad page, want %s among them", ids, want)
		}
	}
	browsertest.Run(t, ctx, "open the good page", chromedp.Navigate(srv.URL+"/good"), chromedp.WaitVisible(chromedp.CSS("main")))
	browsertest.CheckAccessibility(t, ctx, "check the good page")
}
