package browsertest

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"testing"
)

var consentField = regexp.MustCompile(`name="consent" value="([^"]+)"`)

// ConsentOverHTTP answers the demo provider's consent page for authURL with d,
// as a plain HTTP client rather than the browser, and returns the query of the
// redirect the provider answers with, without following it: what a test hands
// to a callback page it opens itself (the frontend callback page opened
// directly, as from a link a terminal printed).
func ConsentOverHTTP(t testing.TB, authURL string, d Decision) url.Values {
	t.Helper()
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Get(authURL)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	m := consentField.FindSubmatch(page)
	if m == nil {
		t.Fatalf("GET %s answered %s without a consent form", authURL, resp.Status)
	}
	u, err := url.Parse(authURL)
	if err != nil {
		t.Fatal(err)
	}
	decision := u.ResolveReference(&url.URL{Path: "authorize/decision"})
	resp, err = client.PostForm(decision.String(), url.Values{"consent": {string(m[1])}, "decision": {string(d)}})
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc, err := resp.Location()
	if err != nil {
		t.Fatalf("the consent decision answered %s without a redirect", resp.Status)
	}
	return loc.Query()
}
