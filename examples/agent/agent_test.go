package main

import (
	"bufio"
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the app over HTTP with Go clients, no browser. The test
// kit's Browser follows sign-in links and answers the consent page; in terminal
// mode the frontend page /oauth/callback is answered as a browser that runs no
// script would: by submitting its <noscript> form, which sends the provider's
// answer to the API callback. The tests in headless Chromium cover the
// page's script and the widget themselves.

// waitLimit bounds every wait of a test; nothing asserts on time.
const waitLimit = time.Minute

func startApp(t *testing.T, cfg appConfig) (*app, *httptest.Server) {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	cfg.Base = "http://" + srv.Listener.Addr().String()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	a, err := newApp(context.Background(), cfg)
	require.NoError(t, err)
	srv.Config.Handler = a
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		_ = a.Close()
	})
	return a, srv
}

// browser is the user's browser: a cookie jar (one agent user) that follows
// redirects and answers the demo provider's consent page.
func browser() *oauthflowtest.Browser { return oauthflowtest.NewBrowser() }

// signIn follows a sign-in link in b as the user would, allowing access on the
// demo provider's consent page, and returns the page it ends on.
func signIn(t *testing.T, b *oauthflowtest.Browser, link string) *oauthflowtest.Page {
	t.Helper()
	page, err := b.SignIn(t.Context(), link)
	require.NoError(t, err)
	return page
}

func do(t *testing.T, c *http.Client, method, url, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

func readView(t *testing.T, c *http.Client, method, url string) (runView, []byte) {
	t.Helper()
	want, body := http.StatusOK, ""
	if method == http.MethodPost {
		want, body = http.StatusCreated, "{}"
	}
	status, b := do(t, c, method, url, "application/json", body)
	require.Equal(t, want, status, string(b))
	var v runView
	require.NoError(t, json.Unmarshal(b, &v))
	return v, b
}

var (
	getForm     = regexp.MustCompile(`<form method="get" action="([^"]*)">`)
	hiddenField = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// submitForm submits the one GET form of page, found at pageURL, as a browser
// that runs no script would, and returns where it ended and what it showed.
func submitForm(t *testing.T, pageURL *url.URL, page []byte) (*url.URL, int, []byte) {
	t.Helper()
	require.Equal(t, 1, strings.Count(string(page), "<form"), "one form:\n%s", page)
	m := getForm.FindSubmatch(page)
	require.NotNil(t, m, "a GET form:\n%s", page)
	action, err := pageURL.Parse(html.UnescapeString(string(m[1])))
	require.NoError(t, err)
	fields := url.Values{}
	for _, f := range hiddenField.FindAllSubmatch(page, -1) {
		fields.Add(html.UnescapeString(string(f[1])), html.UnescapeString(string(f[2])))
	}
	action.RawQuery = fields.Encode()
	status, body := do(t, http.DefaultClient, http.MethodGet, action.String(), "", "")
	return action, status, body
}

func userOf(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	u, err := url.Parse(base)
	require.NoError(t, err)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == "agent_user" {
			return ck.Value
		}
	}
	t.Fatal("no agent_user cookie")
	return ""
}

func assertDemoRepos(t *testing.T, repos []repo) {
	t.Helper()
	var names []string
	for _, r := range repos {
		names = append(names, r.FullName)
	}
	assert.Equal(t, []string{"demo-user/hello-world", "demo-user/oauthflow-demo", "demo-user/dotfiles"}, names)
}

func TestWebRunWaitsForSignInThenListsRepos(t *testing.T) {
	t.Parallel()
	a, srv := startApp(t, appConfig{})
	b := browser()

	v, _ := readView(t, b.Client, http.MethodPost, srv.URL+"/app/runs")
	assert.Equal(t, oauthflow.RunWaiting, v.Status)
	assert.Equal(t, oauthflow.StateAwaitingAuth, v.State)
	require.NotNil(t, v.Child, "the run launched the oauth child")
	assert.Equal(t, "inline", v.Child.Show)
	require.NotNil(t, v.Prompt, "the child's prompt is shown inline")
	assert.Equal(t, oauthflow.PromptPending, v.Prompt.Status)
	assert.Equal(t, "demo", v.Prompt.Provider)
	assert.Equal(t, "Demo Cloud", v.ProviderName)
	assert.True(t, strings.HasPrefix(v.Prompt.AuthURL, srv.URL+"/demo/authorize?"), v.Prompt.AuthURL)
	assert.Empty(t, v.Repos)

	// The user signs in; the demo redirects to the API callback, which completes
	// the sign-in, and the engine resumes the run.
	page := signIn(t, b, v.Prompt.AuthURL)
	assert.Equal(t, http.StatusOK, page.StatusCode)
	assert.Equal(t, oauthflow.CallbackPath, page.URL.Path)

	done, body := readView(t, b.Client, http.MethodGet, srv.URL+"/app/runs/"+v.ID)
	assert.Equal(t, oauthflow.RunCompleted, done.Status)
	assert.Equal(t, oauthflow.StateEnd, done.State)
	assert.Nil(t, done.Prompt)
	assert.Empty(t, done.Error)
	assertDemoRepos(t, done.Repos)

	tok, err := a.mod.Tokens.GetTokens(context.Background(), userOf(t, b.Client, srv.URL), "demo")
	require.NoError(t, err)
	assert.NotContains(t, string(body), tok.AccessToken, "the page never gets a token")
	assert.NotContains(t, string(body), tok.RefreshToken)

	// A second run finds the token and lists at once, without a prompt.
	again, _ := readView(t, b.Client, http.MethodPost, srv.URL+"/app/runs")
	assert.Equal(t, oauthflow.RunCompleted, again.Status)
	assert.Nil(t, again.Child)
	assertDemoRepos(t, again.Repos)
}

func TestWebDeniedConsentCanBeRetried(t *testing.T) {
	t.Parallel()
	a, srv := startApp(t, appConfig{})
	b := browser()
	v, _ := readView(t, b.Client, http.MethodPost, srv.URL+"/app/runs")
	require.NotNil(t, v.Prompt)

	a.demo.DenyNext() // the user clicks Deny
	page := signIn(t, b, v.Prompt.AuthURL)
	assert.Equal(t, http.StatusBadRequest, page.StatusCode)
	denied, _ := readView(t, b.Client, http.MethodGet, srv.URL+"/app/runs/"+v.ID)
	assert.Equal(t, oauthflow.RunWaiting, denied.Status, "a denial keeps the run waiting")
	require.NotNil(t, denied.Prompt)
	assert.Equal(t, oauthflow.PromptError, denied.Prompt.Status)
	assert.NotEmpty(t, denied.Prompt.Message)

	signIn(t, b, v.Prompt.AuthURL) // the widget's "Try again" reopens the same link
	done, _ := readView(t, b.Client, http.MethodGet, srv.URL+"/app/runs/"+v.ID)
	assert.Equal(t, oauthflow.RunCompleted, done.Status)
	assertDemoRepos(t, done.Repos)
}

func TestWebRunsBelongToTheirUser(t *testing.T) {
	t.Parallel()
	_, srv := startApp(t, appConfig{})
	v, _ := readView(t, browser().Client, http.MethodPost, srv.URL+"/app/runs")
	for _, path := range []string{"/app/runs/" + v.ID, "/app/runs/nope"} {
		status, _ := do(t, browser().Client, http.MethodGet, srv.URL+path, "", "")
		assert.Equal(t, http.StatusNotFound, status, path)
	}
}

func TestWebRejectsBadRequests(t *testing.T) {
	t.Parallel()
	_, srv := startApp(t, appConfig{})
	tests := []struct {
		name, method, path, contentType, body string
		want                                  int
	}{
		{"form post", http.MethodPost, "/app/runs", "application/x-www-form-urlencoded", "a=b", http.StatusUnsupportedMediaType},
		{"no content type", http.MethodPost, "/app/runs", "", "{}", http.StatusUnsupportedMediaType},
		{"unknown field", http.MethodPost, "/app/runs", "application/json", `{"provider":"demo"}`, http.StatusBadRequest},
		{"not json", http.MethodPost, "/app/runs", "application/json", "nope", http.StatusBadRequest},
		{"json with charset", http.MethodPost, "/app/runs", "application/json; charset=utf-8", "{}", http.StatusCreated},
		{"wrong method", http.MethodDelete, "/app/runs/x", "", "", http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body := do(t, browser().Client, tt.method, srv.URL+tt.path, tt.contentType, tt.body)
			assert.Equal(t, tt.want, status, string(body))
		})
	}
}

func TestIndexPageHasHooksAndCSP(t *testing.T) {
	t.Parallel()
	_, srv := startApp(t, appConfig{})
	resp, err := http.Get(srv.URL + "/")
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	page, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	csp := resp.Header.Get("Content-Security-Policy")
	assert.Contains(t, csp, "script-src 'self'")
	assert.NotContains(t, csp, "unsafe-inline")
	for _, hook := range []string{`id="run"`, `data-role="prompt"`, `data-role="repos"`, `data-action="start"`,
		`src="/oauth/oauth-prompt.js"`, `src="/static/app.js"`} {
		assert.Contains(t, string(page), hook)
	}
	assert.NotContains(t, string(page), "<script>", "no inline script")
	for _, asset := range []string{"/static/app.js", "/static/app.css", "/oauth/oauth-prompt.js", "/oauth/callback"} {
		status, _ := do(t, http.DefaultClient, http.MethodGet, srv.URL+asset, "", "")
		assert.Equal(t, http.StatusOK, status, asset)
	}
}

// lineReader collects what the terminal mode prints and hands over the first
// line that is a link.
type lineReader struct {
	link    chan string   // the first link printed
	printed chan struct{} // holds a signal once a line was printed since the last read
	done    chan struct{}

	mu    sync.Mutex
	lines []string // everything printed so far
}

func readLines(r io.Reader) *lineReader {
	lr := &lineReader{link: make(chan string, 1), printed: make(chan struct{}, 1), done: make(chan struct{})}
	go func() {
		defer close(lr.done)
		sent := false
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if line := strings.TrimSpace(sc.Text()); strings.HasPrefix(line, "http") && !sent {
				lr.link <- line
				sent = true
			}
			lr.mu.Lock()
			lr.lines = append(lr.lines, sc.Text())
			lr.mu.Unlock()
			select {
			case lr.printed <- struct{}{}:
			default:
			}
		}
	}()
	return lr
}

// text is everything printed so far.
func (lr *lineReader) text() string {
	lr.mu.Lock()
	defer lr.mu.Unlock()
	return strings.Join(lr.lines, "\n")
}

// waitText waits until the output holds want and returns it.
func (lr *lineReader) waitText(ctx context.Context, t *testing.T, want string) string {
	t.Helper()
	for {
		text := lr.text()
		if strings.Contains(text, want) {
			return text
		}
		select {
		case <-lr.printed:
		case <-lr.done:
			if text = lr.text(); !strings.Contains(text, want) {
				t.Fatalf("the output ended without %q:\n%s", want, text)
			}
			return text
		case <-ctx.Done():
			t.Fatalf("gave up waiting for %q (%v):\n%s", want, ctx.Err(), lr.text())
		}
	}
}

// runInTerminal starts runTerminal for user, printing into a pipe.
func runInTerminal(ctx context.Context, a *app, user string) (*lineReader, <-chan error) {
	pr, pw := io.Pipe()
	out := readLines(pr)
	errc := make(chan error, 1)
	go func() {
		err := runTerminal(ctx, a, user, pw)
		_ = pw.Close()
		errc <- err
	}()
	return out, errc
}

func waitFor[T any](ctx context.Context, t *testing.T, c <-chan T) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-ctx.Done():
		t.Fatal("gave up waiting:", ctx.Err())
		panic("unreachable")
	}
}

// A provider without the device grant gets a sign-in link in the terminal.
func TestTerminalPrintsLinkWaitsAndListsRepos(t *testing.T) {
	t.Parallel()
	a, srv := startApp(t, appConfig{Terminal: true, NoDeviceGrant: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out, errc := runInTerminal(ctx, a, "terminal")

	link := waitFor(ctx, t, out.link)
	assert.True(t, strings.HasPrefix(link, srv.URL+"/demo/authorize?"), link)
	// The provider redirects to the frontend page, not to the API callback.
	page := signIn(t, browser(), link)
	assert.Equal(t, srv.URL+frontendCallbackPath, page.URL.Scheme+"://"+page.URL.Host+page.URL.Path)
	require.Equal(t, http.StatusOK, page.StatusCode)
	assert.Contains(t, page.Body, `id="oauth-callback"`, "the frontend callback page")

	// The user's browser runs no script: it submits the page's form.
	done, status, body := submitForm(t, page.URL, []byte(page.Body))
	require.Equal(t, http.StatusOK, status, string(body))
	assert.Equal(t, srv.URL+oauthflow.CallbackPath, done.Scheme+"://"+done.Host+done.Path, "the API callback completed it")
	assert.Contains(t, string(body), "<h1>Demo Cloud account connected</h1>")

	require.NoError(t, waitFor(ctx, t, errc))
	waitFor(ctx, t, out.done)
	text := out.text()
	assert.NotContains(t, text, "enter the code")
	assert.Contains(t, text, "Your Demo Cloud repositories (3):")
	assert.Contains(t, text, "demo-user/hello-world — My first repository")
	assert.Contains(t, text, "demo-user/oauthflow-demo (private)")
	tok, err := a.mod.Tokens.GetTokens(ctx, "terminal", "demo")
	require.NoError(t, err)
	assert.NotContains(t, text, tok.AccessToken, "no token is printed")

	// Signed in already: the next run prints the repositories without a link.
	again, errc := runInTerminal(ctx, a, "terminal")
	require.NoError(t, waitFor(ctx, t, errc))
	waitFor(ctx, t, again.done)
	text = again.text()
	assert.NotContains(t, text, "/demo/authorize", "no sign-in link this time")
	assert.Contains(t, text, "demo-user/dotfiles")
}

// A denial through the frontend callback page reaches the run (the iss goes
// with it), and the terminal mode says so once and ends with an error.
func TestTerminalReportsADenialAndFails(t *testing.T) {
	t.Parallel()
	a, srv := startApp(t, appConfig{Terminal: true, NoDeviceGrant: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out, errc := runInTerminal(ctx, a, "terminal")
	link := waitFor(ctx, t, out.link)
	a.demo.DenyNext() // the user clicks Deny
	page := signIn(t, browser(), link)
	q := page.URL.Query()
	require.Equal(t, "access_denied", q.Get("error"))
	require.NotEmpty(t, q.Get("iss"), "the provider names itself on the error redirect (RFC 9207)")
	// A browser that runs no script submits the frontend page's form.
	done, _, body := submitForm(t, page.URL, []byte(page.Body))
	assert.Equal(t, srv.URL+oauthflow.CallbackPath, done.Scheme+"://"+done.Host+done.Path)
	assert.Contains(t, string(body), "<h1>Sign-in not completed</h1>")

	assert.ErrorIs(t, waitFor(ctx, t, errc), errSignInNotCompleted, "the terminal mode ends with an error")
	waitFor(ctx, t, out.done)
	text := out.text()
	assert.Equal(t, 1, strings.Count(text, "Sign-in not completed"), text)
	assert.NotContains(t, text, "Sign-in not completed: Sign-in not completed")
}

func TestTerminalStopsWithItsContext(t *testing.T) {
	t.Parallel()
	a, _ := startApp(t, appConfig{Terminal: true})
	limit, cancelLimit := context.WithTimeout(context.Background(), waitLimit)
	defer cancelLimit()
	ctx, cancel := context.WithCancel(limit)
	out, errc := runInTerminal(ctx, a, "terminal")
	waitFor(limit, t, out.link) // nobody signs in
	cancel()
	assert.ErrorIs(t, waitFor(limit, t, errc), context.Canceled)
}

// devicePrompt is what the terminal printed for a sign-in with a code.
type devicePrompt struct {
	uri, code, complete string
}

// indented matches the lines the terminal sets apart for the user to read.
var indented = regexp.MustCompile(`(?m)^  (\S+)$`)

// waitDevicePrompt waits for the terminal to print a sign-in with a code and
// reads its address, its code and its complete address.
func waitDevicePrompt(ctx context.Context, t *testing.T, out *lineReader) devicePrompt {
	t.Helper()
	text := out.waitText(ctx, t, "Waiting for you to approve")
	assert.Contains(t, text, "The agent needs your Demo Cloud account")
	assert.NotContains(t, text, "/demo/authorize", "a code, not a link")
	m := indented.FindAllStringSubmatch(text, -1)
	require.Len(t, m, 3, "the address, the code and the complete address:\n%s", text)
	return devicePrompt{uri: m[0][1], code: m[1][1], complete: m[2][1]}
}

var (
	userCodeField  = regexp.MustCompile(`name="user_code" value="([^"]*)"`)
	loginHintField = regexp.MustCompile(`name="login_hint" value="([^"]*)"`)
)

// decideOnDevicePage opens page, the demo provider's verification page, types
// code into it when it shows none, and answers its form with decision ("allow"
// or "deny"), as the user would on another device.
func decideOnDevicePage(t *testing.T, page, code, decision string) string {
	t.Helper()
	c := browser().Client
	status, body := do(t, c, http.MethodGet, page, "", "")
	require.Equal(t, http.StatusOK, status, string(body))
	shown := userCodeField.FindSubmatch(body)
	require.NotNil(t, shown, "the page asks for the code:\n%s", body)
	hint := loginHintField.FindSubmatch(body)
	require.NotNil(t, hint)
	if len(shown[1]) == 0 {
		shown[1] = []byte(code)
	}
	action, err := url.Parse(page)
	require.NoError(t, err)
	action, err = action.Parse("device") // the form's action
	require.NoError(t, err)
	form := url.Values{"user_code": {html.UnescapeString(string(shown[1]))}, "login_hint": {html.UnescapeString(string(hint[1]))},
		"decision": {decision}}
	status, body = do(t, c, http.MethodPost, action.String(), "application/x-www-form-urlencoded", form.Encode())
	require.Equal(t, http.StatusOK, status, string(body))
	return form.Get("user_code")
}

// A provider with the device grant gets a code in the terminal: the user enters
// it on the provider's page on any device, and the Module's worker, polling the
// provider, hears the approval and resumes the run.
func TestTerminalSignsInWithACode(t *testing.T) {
	t.Parallel()
	a, srv := startApp(t, appConfig{Terminal: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out, errc := runInTerminal(ctx, a, "terminal")
	p := waitDevicePrompt(ctx, t, out)
	assert.Equal(t, srv.URL+"/demo/device", p.uri, "the verification URI as the server gave it")
	assert.Regexp(t, `^[B-DF-HJ-NP-TV-XZ]{4}-[B-DF-HJ-NP-TV-XZ]{4}$`, p.code, "the user code as the server gave it")
	assert.Equal(t, p.uri+"?user_code="+p.code, p.complete)

	shown := decideOnDevicePage(t, p.complete, "", "allow")
	assert.Equal(t, p.code, shown, "the complete address carries the printed code")

	require.NoError(t, waitFor(ctx, t, errc))
	waitFor(ctx, t, out.done)
	text := out.text()
	assert.Contains(t, text, "Your Demo Cloud repositories (3):")
	assert.Contains(t, text, "demo-user/oauthflow-demo (private)")
	tok, err := a.mod.Tokens.GetTokens(ctx, "terminal", "demo")
	require.NoError(t, err)
	assert.NotContains(t, text, tok.AccessToken, "no token is printed")
	assert.NotContains(t, text, tok.RefreshToken)
}

// A denial on the provider's page ends the run: the terminal says so once and
// ends with an error.
func TestTerminalReportsADeniedCode(t *testing.T) {
	t.Parallel()
	a, _ := startApp(t, appConfig{Terminal: true})
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	out, errc := runInTerminal(ctx, a, "terminal")
	p := waitDevicePrompt(ctx, t, out)
	decideOnDevicePage(t, p.uri, p.code, "deny") // the user types the code

	assert.ErrorIs(t, waitFor(ctx, t, errc), errSignInNotCompleted)
	waitFor(ctx, t, out.done)
	text := out.text()
	assert.Equal(t, 1, strings.Count(text, "denied"), text)
	assert.NotContains(t, text, "repositories (")
	_, err := a.mod.Tokens.GetTokens(ctx, "terminal", "demo")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)
}

// The web page's runs keep the link even where the terminal signs in with a code.
func TestWebRunsOfATerminalAppUseTheLink(t *testing.T) {
	t.Parallel()
	_, srv := startApp(t, appConfig{Terminal: true})
	v, _ := readView(t, browser().Client, http.MethodPost, srv.URL+"/app/runs")
	require.NotNil(t, v.Prompt)
	assert.True(t, strings.HasPrefix(v.Prompt.AuthURL, srv.URL+"/demo/authorize?"), v.Prompt.AuthURL)
	assert.Empty(t, v.Prompt.UserCode)
}

func TestGitHubReposDecode(t *testing.T) {
	t.Parallel()
	body := `[{"id":1,"name":"x","full_name":"octo/x","private":true,"description":null,"owner":{"login":"octo"}},
		{"name":"y","full_name":"octo/y","private":false,"description":"why"}]`
	repos, err := githubRepoAPI().Decode(strings.NewReader(body))
	require.NoError(t, err)
	assert.Equal(t, []repo{{Name: "x", FullName: "octo/x", Private: true}, {Name: "y", FullName: "octo/y", Description: "why"}}, repos)
}
