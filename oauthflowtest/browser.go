package oauthflowtest

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
)

// maxPage bounds what a Browser reads of a page.
const maxPage = 1 << 20

// signInLimit bounds a whole SignIn, so that a test that never completes one
// fails with a message instead of waiting for the run's timeout.
const signInLimit = time.Minute

// Browser plays a user's browser in a test: it keeps cookies, follows
// redirects, and answers a [Server]'s consent page. Use one per user.
type Browser struct {
	// Client sends the browser's requests and keeps its cookies in its Jar.
	// Put the app's own login cookie there when the app checks who completes
	// a sign-in ([oauthflow.Config].VerifyUser).
	Client *http.Client
}

// NewBrowser returns a browser with an empty cookie jar, ready for
// [Browser.SignIn].
func NewBrowser() *Browser {
	jar, _ := cookiejar.New(nil) // never fails without options
	return &Browser{Client: &http.Client{Jar: jar}}
}

// Page is the page a [Browser] ended on.
type Page struct {
	URL        *url.URL // where the browser ended, after every redirect
	StatusCode int
	Body       string // the page's first MiB
}

// SignIn opens link, a sign-in's authorization link or a page of the app
// that redirects to one, and follows it as the user would: through the
// server's consent page, where it clicks Allow, to the page the server sends
// the user back to, the app's callback. To have the user refuse, call
// [Server.DenyNext] first. The browser runs no script: a frontend page that
// completes the sign-in by script is where it stops. The error is for a page
// that could not be reached; the page's own status is the Page's.
func (b *Browser) SignIn(ctx context.Context, link string) (*Page, error) {
	page, err := b.do(ctx, http.MethodGet, link, nil)
	if err != nil {
		return nil, err
	}
	m := consentField.FindStringSubmatch(page.Body)
	if m == nil {
		return page, nil
	}
	decision := page.URL.ResolveReference(&url.URL{Path: "authorize/decision"})
	form := url.Values{"consent": {html.UnescapeString(m[1])}, "decision": {"allow"}}
	return b.do(ctx, http.MethodPost, decision.String(), form)
}

// consentField finds the pending request's ID on a Server's consent page.
var consentField = regexp.MustCompile(`<form method="post" action="authorize/decision">\s*<input type="hidden" name="consent" value="([^"]+)">`)

// do sends a request, a form when form is not nil, and reads the page it ends on.
func (b *Browser) do(ctx context.Context, method, target string, form url.Values) (*Page, error) {
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, fmt.Errorf("oauthflowtest: %w", err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := b.Client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("oauthflowtest: %w", err)
	}
	defer resp.Body.Close()
	page, err := io.ReadAll(io.LimitReader(resp.Body, maxPage))
	if err != nil {
		return nil, fmt.Errorf("oauthflowtest: read %s: %w", where(resp.Request.URL), err)
	}
	return &Page{URL: resp.Request.URL, StatusCode: resp.StatusCode, Body: string(page)}, nil
}

// SignIn runs a whole sign-in in a test: it starts one for userID with the
// provider providerID ([oauthflow.Module.StartSignIn]), lets a new [Browser]
// follow its link, and returns the tokens the Module stored. It fails t when
// the sign-in cannot start, when the browser does not end on a page that
// answers 200 within a minute, or when no tokens were stored. The app must
// serve the Module's callback where the provider's redirect URL points, as
// [oauthflow.Module.Mount] does. A Module that checks who completes a sign-in
// (VerifyUser, BindSignIns) needs a Browser that carries the app's cookies
// instead.
func SignIn(t testing.TB, m *oauthflow.Module, userID, providerID string, scopes ...string) *oauthflow.StoredTokens {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), signInLimit)
	defer cancel()
	_, prompt, err := m.StartSignIn(ctx, userID, providerID, scopes...)
	if err != nil {
		t.Fatalf("oauthflowtest: start a sign-in of %q with %q: %v", userID, providerID, err)
	}
	page, err := NewBrowser().SignIn(ctx, prompt.AuthURL)
	if err != nil {
		t.Fatalf("oauthflowtest: sign-in of %q with %q: %v", userID, providerID, err)
	}
	if page.StatusCode != http.StatusOK {
		t.Fatalf("oauthflowtest: sign-in of %q with %q ended at %s with HTTP %d: %s",
			userID, providerID, where(page.URL), page.StatusCode, pageText(page.Body))
	}
	tok, err := m.Tokens.GetTokens(ctx, userID, providerID)
	if err != nil {
		t.Fatalf("oauthflowtest: sign-in of %q with %q ended at %s, but: %v", userID, providerID, where(page.URL), err)
	}
	return tok
}

// where is u without its query, which may carry a code.
func where(u *url.URL) string { return u.Scheme + "://" + u.Host + u.Path }

var (
	tags   = regexp.MustCompile(`(?s)<(script|style|title)\b.*?</(script|style|title)>|<[^>]*>`)
	spaces = regexp.MustCompile(`\s+`)
)

// pageText is the readable text of an HTML page, its first 300 bytes.
func pageText(page string) string {
	text := strings.TrimSpace(spaces.ReplaceAllString(html.UnescapeString(tags.ReplaceAllString(page, " ")), " "))
	if len(text) > 300 {
		text = text[:300] + "…"
	}
	return text
}
