package oauthflow_test

import (
	"errors"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// textBrowser is a user's browser that runs no script (a text browser, or
// JavaScript turned off): it follows redirects, keeps cookies, reads pages,
// and submits the one form a page shows, <noscript> content included.
type textBrowser struct {
	t       *testing.T
	c       *http.Client
	cookies []*http.Cookie // sent with every request (the app's own login)
}

func newTextBrowser(t *testing.T, cookies ...*http.Cookie) *textBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &textBrowser{t: t, c: &http.Client{Jar: jar}, cookies: cookies}
}

// textPage is a page as the text browser shows it.
type textPage struct {
	url    *url.URL
	status int
	body   string
}

var (
	formTag  = regexp.MustCompile(`<form\s[^>]*>`)
	inputTag = regexp.MustCompile(`<input\s[^>]*>`)
	attr     = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	heading  = regexp.MustCompile(`(?s)<h1[^>]*>(.*?)</h1>`)
)

// open requests u (a POST sends form, from the page's origin) and reads the page.
func (b *textBrowser) open(method, u string, form url.Values) textPage {
	b.t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(b.t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", req.URL.Scheme+"://"+req.URL.Host) // the app's own page holds the form
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer func() { _ = resp.Body.Close() }()
	page, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(b.t, err)
	return textPage{url: resp.Request.URL, status: resp.StatusCode, body: string(page)}
}

// attrs reads a tag's attributes, unescaped.
func attrs(tag string) map[string]string {
	m := map[string]string{}
	for _, a := range attr.FindAllStringSubmatch(tag, -1) {
		m[a[1]] = html.UnescapeString(a[2])
	}
	return m
}

// submit sends the page's one form as the browser would: its fields to its
// action, resolved against the page's address, with its method.
func (b *textBrowser) submit(p textPage) textPage {
	b.t.Helper()
	forms := formTag.FindAllStringIndex(p.body, -1)
	require.Len(b.t, forms, 1, "the page shows one form:\n%s", p.body)
	form := attrs(p.body[forms[0][0]:forms[0][1]])
	end := strings.Index(p.body[forms[0][1]:], "</form>")
	require.GreaterOrEqual(b.t, end, 0, "the form is closed")
	fields := url.Values{}
	for _, in := range inputTag.FindAllString(p.body[forms[0][1]:forms[0][1]+end], -1) {
		a := attrs(in)
		fields.Add(a["name"], a["value"])
	}
	action, err := p.url.Parse(form["action"])
	require.NoError(b.t, err)
	if strings.EqualFold(form["method"], "post") {
		return b.open(http.MethodPost, action.String(), fields)
	}
	action.RawQuery = fields.Encode()
	return b.open(http.MethodGet, action.String(), nil)
}

func (p textPage) title() string {
	m := heading.FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(strings.TrimSpace(m[1]))
}

// noJSApp is a host app whose provider redirects to the frontend callback
// page, served beside the API on one origin, as the agent's -terminal mode does.
func noJSApp(t *testing.T, o envOptions) (*flowEnv, *oauthflow.Module, string) {
	t.Helper()
	config := o.config
	o.config = nil
	env := newFlowEnv(t, o)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mod := env.newModule(srv.URL+"/oauth/callback", nil, config)
	mod.Mount(mux)
	mux.Handle("GET /oauth/", mod.FrontendHandler(""))
	t.Cleanup(func() { _ = mod.Close() })
	return env, mod, srv.URL
}

// A user whose browser runs no script follows the sign-in link to the end:
// the provider sends them to the frontend callback page, whose form sends the
// answer to the API callback, whose page says the account is connected.
func TestSignInCompletesWithoutJavaScript(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	b := newTextBrowser(t)
	page := b.open(http.MethodGet, doc.AuthURL, nil)
	require.Equal(t, "/oauth/callback", page.url.Path, "the provider sent the browser to the frontend page")
	require.Equal(t, http.StatusOK, page.status)
	done := b.submit(page)
	require.Equal(t, oauthflow.CallbackPath, done.url.Path)
	require.Equal(t, http.StatusOK, done.status, done.body)
	require.Equal(t, "Demo <Cloud> account connected", done.title())
	_, err = mod.Tokens.GetValidAccessToken(t.Context(), "alice", "demo")
	require.NoError(t, err, "the tokens are stored")

	again := b.submit(page) // the same answer twice: the code is spent
	require.Equal(t, http.StatusBadRequest, again.status)
	require.Equal(t, "This sign-in link has expired or was already used", again.title())
}

// A denial at the provider reaches the run through the same form, and the
// page says the sign-in was not completed.
func TestSignInDenialWithoutJavaScript(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{as: authserver.Options{DenyAll: true}})
	run, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	b := newTextBrowser(t)
	done := b.submit(b.open(http.MethodGet, doc.AuthURL, nil))
	require.Equal(t, oauthflow.CallbackPath, done.url.Path)
	require.Equal(t, "Sign-in not completed", done.title(), done.body)
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, mod.Engine.Document(t.Context(), run.ID, oauthflow.PromptDocumentName, &prompt))
	require.Equal(t, oauthflow.PromptError, prompt.Status, "the run knows")
}

// Without script the checks of who may complete a sign-in hold as they do
// for the API callback: Config.VerifyUser refuses another user's browser,
// consuming nothing, and the user who started it then completes it.
func TestSignInWithoutJavaScriptKeepsVerifyUser(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{config: func(c *oauthflow.Config) {
		c.VerifyUser = func(r *http.Request, userID string) error {
			if c, err := r.Cookie(appUserCookie); err == nil && c.Value == userID {
				return nil
			}
			return errors.New("not the app's user " + userID)
		}
	}})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	mallory := newTextBrowser(t, &http.Cookie{Name: appUserCookie, Value: "mallory"})
	page := mallory.open(http.MethodGet, doc.AuthURL, nil)
	refused := mallory.submit(page)
	require.Equal(t, http.StatusForbidden, refused.status)
	require.Equal(t, "This sign-in is not yours", refused.title())
	_, err = mod.Tokens.GetValidAccessToken(t.Context(), "mallory", "demo")
	require.ErrorIs(t, err, oauthflow.ErrNoToken)

	alice := newTextBrowser(t, &http.Cookie{Name: appUserCookie, Value: "alice"})
	done := alice.submit(page) // the answer mallory's browser was shown: nothing was consumed
	require.Equal(t, http.StatusOK, done.status, done.body)
	_, err = mod.Tokens.GetValidAccessToken(t.Context(), "alice", "demo")
	require.NoError(t, err)
}

// A bound sign-in still needs its cookie: the browser that opened it through
// the app's form to POST /start completes it without script; a browser that
// only followed the link is refused.
func TestSignInWithoutJavaScriptKeepsTheBindingCookie(t *testing.T) {
	t.Parallel()
	_, mod, base := noJSApp(t, envOptions{config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)
	require.NotEmpty(t, doc.Binding)

	linkOnly := newTextBrowser(t)
	page := linkOnly.open(http.MethodGet, doc.AuthURL, nil)
	refused := linkOnly.submit(page)
	require.Equal(t, http.StatusForbidden, refused.status)
	require.Equal(t, "This sign-in is not yours", refused.title())

	opener := newTextBrowser(t) // the app's page holds a form that posts to /start
	own := opener.open(http.MethodPost, base+oauthflow.StartPath, url.Values{"state": {doc.State}, "binding": {doc.Binding}})
	require.Equal(t, "/oauth/callback", own.url.Path, "on to the provider and back to the frontend page")
	done := opener.submit(own)
	require.Equal(t, http.StatusOK, done.status, done.body)
	require.Equal(t, "Demo <Cloud> account connected", done.title())
}

// Without script, the frontend page's form carries the redirect's parameters
// the provider keeps with the tokens (QuickBooks' realmId) with the answer,
// and the API keeps them; the redirect's other parameters stay behind.
func TestSignInWithoutJavaScriptKeepsDeclaredFields(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{demo: func(c *providers.Config) { c.CallbackFields = []string{"realmId"} }})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(doc.AuthURL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	redirect, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	q := redirect.Query()
	q.Set("realmId", "4620816365")
	q.Set("other", "LEAKED")
	redirect.RawQuery = q.Encode()

	b := newTextBrowser(t)
	page := b.open(http.MethodGet, redirect.String(), nil)
	require.Equal(t, "/oauth/callback", page.url.Path)
	require.NotContains(t, page.body, "LEAKED")
	done := b.submit(page)
	require.Equal(t, http.StatusOK, done.status, done.body)
	conns, err := mod.Tokens.Connections(t.Context(), "alice")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	assert.Equal(t, map[string]string{"realmId": "4620816365"}, conns[0].Metadata)
}
