package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// do sends req with the client's cookies and no redirects followed, and
// returns the status, body and headers.
func do(t *testing.T, c *http.Client, req *http.Request) (int, string, http.Header) {
	t.Helper()
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := nc.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b), resp.Header
}

func newRequest(t *testing.T, method, u string, body string, header ...string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return req
}

// appUserCookie is the host app's own login cookie in these tests.
const appUserCookie = "app_user"

// A completion from a browser whose app login is another user's is refused
// on both endpoints, and for a provider's error redirect too: 403, an event,
// no code exchanged, nothing recorded on the run, and the sign-in still
// completes for the user who started it.
func TestVerifyUserOnBothEndpoints(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.VerifyUser = func(r *http.Request, userID string) error {
			if c, err := r.Cookie(appUserCookie); err == nil && c.Value == userID {
				return nil
			}
			return errors.New("not the app's user " + userID)
		}
	}})
	api := env.replicas[0].api.URL
	run, doc := env.startSignIn(0, "alice")
	callback := env.consent(doc.AuthURL, 0)
	q, _ := url.Parse(callback)
	as := func(user string, req *http.Request) *http.Request {
		req.AddCookie(&http.Cookie{Name: appUserCookie, Value: user})
		return req
	}

	status, body, _ := do(t, http.DefaultClient, as("mallory", newRequest(t, "GET", callback, "")))
	require.Equal(t, http.StatusForbidden, status)
	require.Contains(t, body, "This sign-in is not yours")
	e, ok := env.events.last(oauthflow.EventSignInRefused)
	require.True(t, ok, "a refusal is an event")
	require.Equal(t, "alice", e.UserID)
	require.ErrorIs(t, e.Err, oauthflow.ErrSignInRefused)

	complete := `{"code":"` + q.Query().Get("code") + `","state":"` + doc.State + `"}`
	status, body, _ = do(t, http.DefaultClient, as("mallory", newRequest(t, "POST", api+oauthflow.CompletePath, complete,
		"Content-Type", "application/json")))
	require.Equal(t, http.StatusForbidden, status)
	require.Equal(t, "forbidden", jsonField(t, body, "error"))
	status, _, _ = do(t, http.DefaultClient, newRequest(t, "GET", callback, "")) // no app login at all
	require.Equal(t, http.StatusForbidden, status)

	denial := api + oauthflow.CallbackPath + "?error=access_denied&state=" + doc.State
	status, _, _ = do(t, http.DefaultClient, as("mallory", newRequest(t, "GET", denial, "")))
	require.Equal(t, http.StatusForbidden, status, "nor may another user end the sign-in with an error")
	require.Equal(t, oauthflow.PromptPending, env.prompt(run.ID).Status, "nothing was recorded on the run")
	require.Zero(t, env.as.Stats().CodeRequests, "no code was sent to the provider")

	status, _, _ = do(t, http.DefaultClient, as("alice", newRequest(t, "GET", callback, "")))
	require.Equal(t, http.StatusOK, status, "the sign-in is still alice's to complete")
	_, err := env.mod(0).Tokens.GetValidAccessToken(t.Context(), "alice", "demo")
	require.NoError(t, err)
}

func jsonField(t *testing.T, body, name string) any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body), &m), body)
	return m[name]
}

// With BindSignIns, a sign-in completes only in the browser that opened it
// through POST /start from the app; a forwarded link is refused and stays
// usable, and /start refuses other origins and a wrong secret.
func TestBoundSignIn(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.BindSignIns, c.FrontendOrigins = true, []string{app}
	}})
	api := env.replicas[0].api.URL
	run, doc := env.startSignIn(0, "alice")
	require.NotEmpty(t, doc.Binding, "the prompt carries the sign-in's secret")
	require.NotContains(t, doc.AuthURL, doc.Binding, "and no link does")
	form := func(binding string) string {
		return url.Values{"state": {doc.State}, "binding": {binding}}.Encode()
	}
	start := func(c *http.Client, origin, binding string) (int, http.Header) {
		status, _, h := do(t, c, newRequest(t, "POST", api+oauthflow.StartPath, form(binding),
			"Content-Type", "application/x-www-form-urlencoded", "Origin", origin))
		return status, h
	}

	for name, tc := range map[string]struct{ origin, binding string }{
		"another origin": {"https://evil.example", doc.Binding},
		"no origin":      {"", doc.Binding},
		"wrong secret":   {app, doc.Binding[:len(doc.Binding)-1] + "x"},
		"no secret":      {app, ""},
	} {
		status, h := start(http.DefaultClient, tc.origin, tc.binding)
		require.Equal(t, http.StatusForbidden, status, name)
		require.Empty(t, h.Values("Set-Cookie"), name)
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	status, h := start(browser, app, doc.Binding)
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, doc.AuthURL, h.Get("Location"), "the browser goes on to the provider")
	cookie := h.Get("Set-Cookie")
	for _, attr := range []string{"oauthflow_signin_" + doc.State + "=", "Path=/api/v1/oauth/", "HttpOnly", "SameSite=Lax", "Max-Age="} {
		require.Contains(t, cookie, attr)
	}
	status, _ = start(&http.Client{}, api, doc.Binding)
	require.Equal(t, http.StatusSeeOther, status, "the API's own origin may start it too")
	_, _, h = do(t, http.DefaultClient, newRequest(t, "POST", api+oauthflow.StartPath, form(doc.Binding),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", app, "X-Forwarded-Proto", "https"))
	require.Contains(t, h.Get("Set-Cookie"), "Secure", "behind a TLS proxy the cookie is Secure")
	require.NotContains(t, cookie, "Secure", "over plain HTTP (loopback) it cannot be")

	callback := env.consent(doc.AuthURL, 0)
	status, _, _ = do(t, http.DefaultClient, newRequest(t, "GET", callback, "")) // the forwarded link
	require.Equal(t, http.StatusForbidden, status)
	forged := newRequest(t, "GET", callback, "")
	forged.AddCookie(&http.Cookie{Name: "oauthflow_signin_" + doc.State, Value: "a-guess"})
	status, _, _ = do(t, http.DefaultClient, forged)
	require.Equal(t, http.StatusForbidden, status, "a cookie must hold the sign-in's own secret")
	_, ok := env.events.last(oauthflow.EventSignInRefused)
	require.True(t, ok)
	q, _ := url.Parse(callback)
	status, _, _ = do(t, http.DefaultClient, newRequest(t, "POST", api+oauthflow.CompletePath,
		`{"code":"`+q.Query().Get("code")+`","state":"`+doc.State+`"}`, "Content-Type", "application/json"))
	require.Equal(t, http.StatusForbidden, status)
	require.Zero(t, env.as.Stats().CodeRequests, "no code was sent to the provider")

	status, _, _ = do(t, browser, newRequest(t, "GET", callback, ""))
	require.Equal(t, http.StatusOK, status, "the browser that opened it completes it")
	_, err := env.mod(0).Tokens.GetValidAccessToken(t.Context(), "alice", "demo")
	require.NoError(t, err)
	done := env.prompt(run.ID)
	require.Equal(t, oauthflow.PromptSuccess, done.Status)
	require.Equal(t, doc.State, done.State, "the state still names the sign-in")
	require.Empty(t, done.AuthURL, "the spent link is not kept")
	require.Empty(t, done.Binding, "nor its secret")
}

// A bound sign-in of a DPoP provider opened through POST /start goes to the
// authorization URL build_oauth_url made, dpop_jkt included: the code is
// bound to the sign-in's key (RFC 9449 §10), and the exchange proves it.
func TestBoundSignInStartKeepsDPoPKeyThumbprint(t *testing.T) {
	t.Parallel()
	const app = "https://app.example"
	env := newFlowEnv(t, envOptions{dpop: true, as: authserver.Options{DPoP: true}, config: func(c *oauthflow.Config) {
		c.BindSignIns, c.FrontendOrigins = true, []string{app}
	}})
	api := env.replicas[0].api.URL
	_, doc := env.startSignIn(0, "alice")
	s, err := oauthflow.PeekSession(env.mod(0).Sessions, t.Context(), doc.State)
	require.NoError(t, err)
	require.NotEmpty(t, s.DPoPKey)
	jkt := thumbprintOf(t, s.DPoPKey)

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	status, _, h := do(t, browser, newRequest(t, "POST", api+oauthflow.StartPath,
		url.Values{"state": {doc.State}, "binding": {doc.Binding}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", app))
	require.Equal(t, http.StatusSeeOther, status)
	loc, err := url.Parse(h.Get("Location"))
	require.NoError(t, err)
	require.Equal(t, jkt, loc.Query().Get("dpop_jkt"), "the code is bound to the sign-in's key")
	require.Equal(t, doc.AuthURL, loc.String(), "the URL build_oauth_url made")

	status, _, _ = do(t, browser, newRequest(t, "GET", env.consent(loc.String(), 0), ""))
	require.Equal(t, http.StatusOK, status)
	tok, err := env.mod(0).Tokens.GetTokens(t.Context(), "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, jkt, thumbprintOf(t, tok.DPoPKey), "the grant is bound to the key the code was")
}

// boundStart opens alice's bound sign-in through POST /start on target's
// scheme and host, and returns the cookie /start set and the sign-in's state.
func boundStart(t *testing.T, m *oauthflow.Module, target string) (*http.Cookie, string) {
	t.Helper()
	_, doc, err := m.StartSignIn(context.Background(), "alice", "acme")
	require.NoError(t, err)
	require.NotEmpty(t, doc.Binding)
	form := url.Values{"state": {doc.State}, "binding": {doc.Binding}}.Encode()
	req := httptest.NewRequest(http.MethodPost, target+oauthflow.StartPath, strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", target)
	rec := httptest.NewRecorder()
	mux := http.NewServeMux()
	m.Mount(mux)
	mux.ServeHTTP(rec, req)
	require.Equal(t, http.StatusSeeOther, rec.Code, rec.Body.String())
	cookies := rec.Result().Cookies()
	require.Len(t, cookies, 1)
	return cookies[0], doc.State
}

// boundCallback completes the sign-in under state at target with cookie.
func boundCallback(m *oauthflow.Module, target, state string, cookie *http.Cookie) int {
	req := httptest.NewRequest(http.MethodGet, target+oauthflow.CallbackPath+"?code=c&state="+state, nil)
	req.AddCookie(cookie)
	rec := httptest.NewRecorder()
	m.CallbackHandler().ServeHTTP(rec, req)
	return rec.Code
}

func boundModule(t *testing.T) *oauthflow.Module {
	t.Helper()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("acme")))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		BindSignIns: true, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

// Served over https, the sign-in's cookie is a __Host- cookie (Secure,
// Path=/, no Domain), which no sibling subdomain and no plain-http page can
// set: a cookie of the old name is refused there, so nobody can plant their
// own sign-in's secret in the user's browser. Over plain http (loopback, in
// development) the prefix cannot be used; the cookie keeps its old name.
func TestBindingCookieIsHostPrefixedOverHTTPS(t *testing.T) {
	t.Parallel()
	m := boundModule(t)
	const api = "https://api.example"
	c, state := boundStart(t, m, api)
	assert.Equal(t, "__Host-oauthflow_signin_"+state, c.Name)
	assert.True(t, c.Secure && c.HttpOnly && c.Path == "/" && c.Domain == "", "%+v", c)
	assert.Equal(t, http.SameSiteLaxMode, c.SameSite)

	planted := &http.Cookie{Name: "oauthflow_signin_" + state, Value: c.Value}
	assert.Equal(t, http.StatusForbidden, boundCallback(m, api, state, planted), "the unprefixed name over https")
	assert.Equal(t, http.StatusOK, boundCallback(m, api, state, c))

	const dev = "http://127.0.0.1:8080"
	c, state = boundStart(t, m, dev)
	assert.Equal(t, "oauthflow_signin_"+state, c.Name)
	assert.False(t, c.Secure)
	assert.Equal(t, "/api/v1/oauth/", c.Path)
	assert.Equal(t, http.StatusOK, boundCallback(m, dev, state, c))
}

// Every check of who may complete a sign-in fails closed (issue 21, hole 5):
// when the pending sign-in cannot be read for the check, the completion is
// refused before anything is consumed, though the consume right after would
// succeed. The sign-in stays pending for the browser that started it.
func TestSignInCheckFailsClosed(t *testing.T) {
	t.Parallel()
	checks := map[string]func(*oauthflow.Config){
		"VerifyUser": func(c *oauthflow.Config) {
			c.VerifyUser = func(r *http.Request, userID string) error {
				if c, err := r.Cookie(appUserCookie); err == nil && c.Value == userID {
					return nil
				}
				return errors.New("not the app's user " + userID)
			}
		},
		"BindSignIns": func(c *oauthflow.Config) { c.BindSignIns = true },
	}
	for name, check := range checks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kv := &sessionReadBlipKV{KV: oauthflow.NewMemoryKV()}
			cfg := oauthflow.Config{KV: kv, WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
			check(&cfg)
			f := newSignInFixtureWith(t, newFakeProvider("acme"), cfg)
			kv.failNext.Store(true)
			rec := httptest.NewRecorder()
			f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet,
				oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil)) // another browser: no login, no cookie
			assert.False(t, kv.failNext.Load(), "the check's read failed")
			assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "a check that cannot read the sign-in refuses")
			_, err := f.m.Tokens.GetTokens(ctx, "alice", "acme")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken, "no account was attached to alice")
			_, err = oauthflow.PeekSession(f.m.Sessions, ctx, f.prompt.State)
			assert.NoError(t, err, "the sign-in is still pending for the browser that started it")
		})
	}
}

// sessionReadBlipKV fails the next read (GET) of a pending sign-in, once.
type sessionReadBlipKV struct {
	oauthflow.KV
	failNext atomic.Bool
}

func (k *sessionReadBlipKV) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "oauth:session:") && k.failNext.Swap(false) {
		return nil, errBlip
	}
	return k.KV.Get(ctx, key)
}
