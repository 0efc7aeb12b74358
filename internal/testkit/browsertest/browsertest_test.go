package browsertest_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, openerPage) })
	mux.HandleFunc("GET /demo/authorize", func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, consentPage) })
	mux.HandleFunc("POST /demo/authorize/decision", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, decisionPage, "decision="+r.PostFormValue("decision"))
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

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
