package oauthflow_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
	m.StartHandler().ServeHTTP(rec, req)
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
