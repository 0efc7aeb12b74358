package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// The connections endpoint, as the app's own pages call it: the user is the
// one the app's login cookie names (Config.CurrentUser), writes come from
// the app's origin with the header a form cannot send.

// currentUserFromCookie is the test app's CurrentUser: the user its login
// cookie names; no cookie is an error, an empty one names nobody, and one
// ending in "!expired" names its user with an error (a session the app
// says has lapsed).
func currentUserFromCookie(r *http.Request) (string, error) {
	c, err := r.Cookie(appUserCookie)
	if err != nil {
		return "", err
	}
	if user, ok := strings.CutSuffix(c.Value, "!expired"); ok {
		return user, errors.New("the app's session has expired")
	}
	return c.Value, nil
}

// withConnections gives the module the test app's CurrentUser, and its
// demo provider the authorization server's userinfo, so that sign-ins
// learn the account.
func withConnections(o envOptions) envOptions {
	config := o.config
	o.config = func(c *oauthflow.Config) {
		c.CurrentUser = currentUserFromCookie
		if config != nil {
			config(c)
		}
	}
	demo := o.demo
	o.demo = func(c *providers.Config) {
		c.UserinfoURL, c.AccountField = strings.TrimSuffix(c.TokenURL, authserver.PathToken)+authserver.PathUserinfo, "preferred_username"
		if demo != nil {
			demo(c)
		}
	}
	return o
}

// appCall is one request to the endpoint: by user ("" sends no login
// cookie; nobody sends it empty), from origin ("" sends none; "api" is the
// API's own), with the write header or not.
type appCall struct {
	method, path string
	user         string
	nobody       bool
	origin       string
	noHeader     bool
	contentType  string
	body         string
}

// answer is the endpoint's answer: its status, headers and body.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	require.NoError(t, json.Unmarshal(a.body, &m), "%s", a.body)
	return m
}

// call sends c to replica 0.
func (env *flowEnv) call(c appCall) answer {
	env.t.Helper()
	api := env.replicas[0].api.URL
	req, err := http.NewRequest(c.method, api+c.path, strings.NewReader(c.body))
	require.NoError(env.t, err)
	if c.user != "" || c.nobody {
		req.Header.Set("Cookie", appUserCookie+"="+c.user)
	}
	switch c.origin {
	case "":
	case "api":
		req.Header.Set("Origin", api)
	default:
		req.Header.Set("Origin", c.origin)
	}
	if !c.noHeader && c.method != http.MethodGet {
		req.Header.Set("X-Requested-With", "oauthflow")
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	} else if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(env.t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(env.t, err)
	return answer{status: resp.StatusCode, header: resp.Header, body: b}
}

const connectionsPath = "/api/v1/oauth/connections"

// listing is GET's answer, decoded.
type listing struct {
	Connections []struct {
		Provider    string   `json:"provider"`
		DisplayName string   `json:"displayName"`
		Account     string   `json:"account"`
		Scopes      []string `json:"scopes"`
		Health      string   `json:"health"`
		Reason      string   `json:"reason"`
		ConnectedAt string   `json:"connectedAt"`
		LastUsed    string   `json:"lastUsed"`
		DPoP        bool     `json:"dpop"`
	} `json:"connections"`
	Providers []struct {
		ID          string `json:"id"`
		DisplayName string `json:"displayName"`
	} `json:"providers"`
}

func (env *flowEnv) list(user string) listing {
	env.t.Helper()
	a := env.call(appCall{method: http.MethodGet, path: connectionsPath, user: user})
	require.Equal(env.t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(env.t, "no-store", a.header.Get("Cache-Control"))
	var l listing
	require.NoError(env.t, json.Unmarshal(a.body, &l))
	return l
}

// connect starts a sign-in through POST and returns its prompt document.
func (env *flowEnv) connect(user, body string) oauthflow.OAuthPromptDocument {
	env.t.Helper()
	a := env.call(appCall{method: http.MethodPost, path: connectionsPath, user: user, origin: "api", body: body})
	require.Equal(env.t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(env.t, "no-store", a.header.Get("Cache-Control"))
	var doc oauthflow.OAuthPromptDocument
	require.NoError(env.t, json.Unmarshal(a.body, &doc))
	return doc
}

// signInThroughTheEndpoint connects user to demo: POST, then the
// provider's consent and its redirect to the callback.
func (env *flowEnv) signInThroughTheEndpoint(user string) {
	env.t.Helper()
	doc := env.connect(user, `{"provider":"demo"}`)
	require.Equal(env.t, oauthflow.PromptPending, doc.Status)
	status, body, _ := get(env.t, env.consent(doc.AuthURL, 0))
	require.Equal(env.t, http.StatusOK, status, body)
}

// grantOnlyProvider is reached by a grant of the app's own (client
// credentials, say): it has no sign-in in a browser.
type grantOnlyProvider struct{ *fakeProvider }

func (grantOnlyProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string { return "" }

// longNamed is a provider whose display name is far too long to show.
type longNamed struct{ *fakeProvider }

func (longNamed) DisplayName() string { return strings.Repeat("Long ", 100) }

// registerOthers adds "other" (a browser sign-in), "robot" (a grant of the
// app's own) and "long" (a display name too long to show) to m's registry,
// "found-one", which a resolver built (an MCP server's, say), and a
// resolver of "stored-" providers whose store is down.
func registerOthers(m *oauthflow.Module) {
	_ = m.Registry.Register(newFakeProvider("other"))
	_ = m.Registry.Register(longNamed{newFakeProvider("long")})
	_ = m.Registry.Register(grantOnlyProvider{newFakeProvider("robot")})
	m.Registry.AddResolver("found-", func(id string) (oauthflow.Provider, error) { return newFakeProvider(id), nil })
	_, _ = m.Registry.Get("found-one")
	m.Registry.AddResolver("stored-", func(string) (oauthflow.Provider, error) {
		return nil, fmt.Errorf("read the server's record: %w", oauthflow.ErrStoreUnavailable)
	})
}

// A listing shows each connection of the user with its display name,
// account, scopes and health in words, and the providers the app offers:
// its own that a browser signs in to.
func TestConnectionsListing(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{setup: registerOthers}))
	ctx := context.Background()
	empty := env.list("alice")
	assert.Empty(t, empty.Connections)
	assert.NotNil(t, empty.Connections, "an empty list, not null")

	env.signInThroughTheEndpoint("alice")
	l := env.list("alice")
	require.Len(t, l.Connections, 1)
	c := l.Connections[0]
	assert.Equal(t, "demo", c.Provider)
	assert.Equal(t, "Demo <Cloud>", c.DisplayName)
	assert.Equal(t, authserver.DefaultUser, c.Account)
	assert.Equal(t, []string{"read"}, c.Scopes)
	assert.Equal(t, oauthflow.HealthHealthy, c.Health)
	assert.Empty(t, c.Reason)
	assert.False(t, c.DPoP)
	require.Len(t, l.Providers, 3, "demo, long and other; robot has no sign-in in a browser, and a resolver built found-one")
	assert.Equal(t, "demo", l.Providers[0].ID)
	assert.Equal(t, "Demo <Cloud>", l.Providers[0].DisplayName)
	assert.Equal(t, "long", l.Providers[1].ID)
	assert.Len(t, l.Providers[1].DisplayName, 128, "bounded")
	assert.Equal(t, "other", l.Providers[2].ID)
	assert.Empty(t, env.list("bob").Connections, "bob sees none of alice's")

	// A failing refresh: the access token expired and the provider is down.
	const providerText = "secret-looking provider text"
	stored, err := env.mod(0).Tokens.GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	expired := *stored
	expired.ExpiresAt = time.Now().Add(-time.Hour).UnixMilli()
	require.NoError(t, env.mod(0).Tokens.StoreTokens(ctx, "alice", "demo", expired))
	env.as.FailNext(authserver.Failure{Grant: authserver.GrantRefreshToken, Status: http.StatusServiceUnavailable, Description: providerText})
	_, err = env.mod(0).Tokens.GetValidAccessToken(ctx, "alice", "demo")
	require.True(t, oauthflow.IsTransient(err), "%v", err)
	for _, kind := range []oauthflow.EventKind{oauthflow.EventRefreshFailed, oauthflow.EventConnectionFailing} {
		ev, ok := env.events.last(kind)
		require.True(t, ok, kind)
		assert.False(t, ev.GrantDead, "failing, not gone")
		assert.Equal(t, "The provider could not renew this connection's access. It is tried again on its own; reconnect if this goes on.",
			ev.Reason, "%s says what an app tells its user", kind)
	}
	// An unreadable record.
	require.NoError(t, env.kv.Set(ctx, "oauth:alice:other", []byte("{not a record"), time.Hour))

	// A connection to a provider whose name is too long.
	require.NoError(t, env.mod(0).Tokens.StoreTokens(ctx, "alice", "long", oauthflow.StoredTokens{AccessToken: "a"}))

	l = env.list("alice")
	require.Len(t, l.Connections, 3)
	failing, long, broken := l.Connections[0], l.Connections[1], l.Connections[2]
	assert.Len(t, long.DisplayName, 128, "bounded")
	assert.Equal(t, oauthflow.HealthRefreshFailing, failing.Health)
	assert.Contains(t, failing.Reason, "Demo <Cloud> could not renew")
	for _, leak := range []string{providerText, "503", "temporarily_unavailable"} {
		assert.NotContains(t, failing.Reason, leak, "the reason is in the library's words")
	}
	assert.Equal(t, "other", broken.Provider)
	assert.Equal(t, oauthflow.HealthUnreadable, broken.Health)
	assert.Contains(t, broken.Reason, "cannot be read")
	assert.Empty(t, broken.ConnectedAt, "an unknown time is left out")
	assert.Empty(t, broken.LastUsed)
	assert.Equal(t, []string{}, broken.Scopes)
}

// A listing says, in RFC 3339, when each connection was made and, with
// refresh ahead on, when it was last used, as the user's index notes them.
func TestConnectionsListingTimes(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("acme")))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg, Now: clock.Now,
		RefreshAhead: 10 * time.Minute, WorkerInterval: time.Hour, CurrentUser: currentUserFromCookie, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	mux := http.NewServeMux()
	m.Mount(mux)
	list := func() map[string]any {
		req := httptest.NewRequest(http.MethodGet, connectionsPath, nil)
		req.AddCookie(&http.Cookie{Name: appUserCookie, Value: "alice"})
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var l struct{ Connections []map[string]any }
		require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &l))
		require.Len(t, l.Connections, 1)
		return l.Connections[0]
	}
	ctx := context.Background()
	require.NoError(t, m.Tokens.StoreTokens(ctx, "alice", "acme", oauthflow.StoredTokens{AccessToken: "a", RefreshToken: "r",
		ExpiresAt: clock.Now().Add(time.Hour).UnixMilli()}))
	c := list()
	assert.Equal(t, "2027-01-15T08:00:00Z", c["connectedAt"], "epoch, in UTC")
	assert.Equal(t, "2027-01-15T08:00:00Z", c["lastUsed"], "a sign-in counts as a use")

	clock.Advance(22 * time.Hour) // past RefreshAheadIdle/8: the next read is noted
	_, err = m.Tokens.GetValidAccessToken(ctx, "alice", "acme")
	require.NoError(t, err)
	c = list()
	assert.Equal(t, "2027-01-15T08:00:00Z", c["connectedAt"])
	assert.Equal(t, "2027-01-16T06:00:00Z", c["lastUsed"])
}

// A grant bound to a key shows as such.
func TestConnectionsListingShowsDPoP(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{dpop: true, as: authserver.Options{DPoP: true}}))
	env.signInThroughTheEndpoint("alice")
	l := env.list("alice")
	require.Len(t, l.Connections, 1)
	assert.True(t, l.Connections[0].DPoP)
	assert.Empty(t, l.Connections[0].LastUsed, "refresh ahead is off: nothing notes the last read")
}

// POST starts a sign-in for the current user and answers the prompt
// document the oauth-prompt widget shows; the sign-in completes as any
// other, for that user only.
func TestConnectionsConnect(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{}))
	doc := env.connect("alice", `{"provider":"demo"}`)
	assert.Equal(t, "demo", doc.Provider)
	assert.Equal(t, oauthflow.PromptPending, doc.Status)
	assert.Len(t, doc.State, 43)
	assert.True(t, strings.HasPrefix(doc.AuthURL, env.as.AuthURL()), doc.AuthURL)
	status, body, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, env.list("alice").Connections, 1)
	assert.Empty(t, env.list("bob").Connections)
	ev, ok := env.events.last(oauthflow.EventConnected)
	require.True(t, ok)
	assert.Equal(t, "alice", ev.UserID)

	t.Run("a full-page sign-in returns to the app", func(t *testing.T) {
		back := env.replicas[0].api.URL + "/settings"
		doc := env.connect("alice", `{"provider":"demo","returnTo":"`+back+`"}`)
		status, body, _ := get(t, env.consent(doc.AuthURL, 0))
		require.Equal(t, http.StatusOK, status)
		assert.Contains(t, body, `data-return-to="`+back+`?oauth=success`)
	})
}

// With {"grant":"device"}, POST starts a device sign-in where the provider
// offers one: the document carries the code to type.
func TestConnectionsConnectWithACode(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{device: true}))
	doc := env.connect("alice", `{"provider":"demo","grant":"device"}`)
	assert.Equal(t, oauthflow.PromptPending, doc.Status)
	assert.NotEmpty(t, doc.UserCode)
	assert.NotEmpty(t, doc.VerificationURI)
	assert.Empty(t, doc.AuthURL)
}

// DELETE disconnects the current user: the record is gone and the provider
// was told (RFC 7009).
func TestConnectionsDisconnect(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{}))
	ctx := context.Background()
	env.signInThroughTheEndpoint("alice")
	stored, err := env.mod(0).Tokens.GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	require.True(t, env.as.Active(stored.RefreshToken))

	a := env.call(appCall{method: http.MethodDelete, path: connectionsPath + "/demo", user: "alice", origin: "api"})
	require.Equal(t, http.StatusNoContent, a.status, "%s", a.body)
	assert.Equal(t, "no-store", a.header.Get("Cache-Control"))
	assert.Empty(t, env.list("alice").Connections)
	assert.EqualValues(t, 1, env.as.Stats().Revocations)
	assert.False(t, env.as.Active(stored.RefreshToken), "the provider ended the grant")
	ev, ok := env.events.last(oauthflow.EventTokensDeleted)
	require.True(t, ok)
	assert.Equal(t, "alice", ev.UserID)

	a = env.call(appCall{method: http.MethodDelete, path: connectionsPath + "/demo", user: "alice", origin: "api"})
	assert.Equal(t, http.StatusNotFound, a.status, "not connected any more")
	assert.Equal(t, "not_connected", a.json(t)["error"])
}

// A connection whose grant the provider ended is gone from the listing;
// POST connects again, and the listing shows it healthy.
func TestConnectionsReconnectAfterTheGrantEnded(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{}))
	env.signInThroughTheEndpoint("alice")
	endGrant(t, env, "alice")
	assert.Empty(t, env.list("alice").Connections, "a dead grant is gone")

	env.signInThroughTheEndpoint("alice")
	l := env.list("alice")
	require.Len(t, l.Connections, 1)
	assert.Equal(t, oauthflow.HealthHealthy, l.Connections[0].Health)
	_, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
	assert.NoError(t, err)
}

// endGrant has the authorization server end user's grant (a revocation of
// its refresh token, as the user would at the provider's settings) and has
// a read with the access token expired learn it.
func endGrant(t *testing.T, env *flowEnv, user string) {
	t.Helper()
	ctx := context.Background()
	stored, err := env.mod(0).Tokens.GetTokens(ctx, user, "demo")
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, env.as.RevokeURL(), strings.NewReader(url.Values{"token": {stored.RefreshToken}}.Encode()))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(authserver.DefaultClientID, authserver.DefaultClientSecret)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	expired := *stored
	expired.ExpiresAt = time.Now().Add(-time.Hour).UnixMilli()
	require.NoError(t, env.mod(0).Tokens.StoreTokens(ctx, user, "demo", expired))
	_, err = env.mod(0).Tokens.GetValidAccessToken(ctx, user, "demo")
	require.ErrorIs(t, err, oauthflow.ErrNoToken)
	require.True(t, oauthflow.IsGrantDead(err), "%v", err)
}

// Every refusal: no user, a write from another site or without the header
// a form cannot send, a body that is not JSON, a provider the app does not
// offer, a grant that is not one. Each is JSON, no-store, and leaves the
// user's connection as it was.
func TestConnectionsRefusals(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{setup: registerOthers}))
	env.signInThroughTheEndpoint("alice")
	post, del := http.MethodPost, http.MethodDelete
	demo := connectionsPath + "/demo"
	for _, tt := range []struct {
		name   string
		call   appCall
		status int
		code   string
	}{
		{"no login cookie", appCall{method: http.MethodGet, path: connectionsPath}, http.StatusUnauthorized, "unauthorized"},
		{"a login cookie naming nobody", appCall{method: http.MethodGet, path: connectionsPath, nobody: true}, http.StatusUnauthorized, "unauthorized"},
		{"a session the app says has expired", appCall{method: http.MethodGet, path: connectionsPath, user: "alice!expired"}, http.StatusUnauthorized, "unauthorized"},
		{"a user ID no record can hold", appCall{method: http.MethodGet, path: connectionsPath, user: strings.Repeat("u", 513)}, http.StatusUnauthorized, "unauthorized"},
		{"no user on POST", appCall{method: post, path: connectionsPath, origin: "api", body: `{"provider":"demo"}`}, http.StatusUnauthorized, "unauthorized"},
		{"no user on DELETE", appCall{method: del, path: demo, origin: "api"}, http.StatusUnauthorized, "unauthorized"},
		{"POST from another site", appCall{method: post, path: connectionsPath, user: "alice", origin: "https://evil.example", body: `{"provider":"demo"}`}, http.StatusForbidden, "cross_site"},
		{"POST without Origin", appCall{method: post, path: connectionsPath, user: "alice", body: `{"provider":"demo"}`}, http.StatusForbidden, "cross_site"},
		{"POST without the header", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", noHeader: true, body: `{"provider":"demo"}`}, http.StatusForbidden, "cross_site"},
		{"a form POST", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", noHeader: true,
			contentType: "application/x-www-form-urlencoded", body: "provider=demo"}, http.StatusForbidden, "cross_site"},
		{"DELETE from another site", appCall{method: del, path: demo, user: "alice", origin: "https://evil.example"}, http.StatusForbidden, "cross_site"},
		{"DELETE without the header", appCall{method: del, path: demo, user: "alice", origin: "api", noHeader: true}, http.StatusForbidden, "cross_site"},
		{"POST of text", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", contentType: "text/plain", body: `{"provider":"demo"}`}, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		{"an unknown provider", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"nope"}`}, http.StatusNotFound, "unknown_provider"},
		{"a provider its resolver cannot read now", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"stored-one"}`}, http.StatusServiceUnavailable, "store_unavailable"},
		{"a provider without a browser sign-in", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"robot"}`}, http.StatusNotFound, "unknown_provider"},
		{"a grant that is not one", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"demo","grant":"password"}`}, http.StatusBadRequest, "invalid_request"},
		{"a code where the provider offers none", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"demo","grant":"device"}`}, http.StatusBadRequest, "device_unsupported"},
		{"no provider", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{}`}, http.StatusBadRequest, "invalid_request"},
		{"an unknown field", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"demo","user":"bob"}`}, http.StatusBadRequest, "invalid_request"},
		{"two objects", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"demo"}{}`}, http.StatusBadRequest, "invalid_request"},
		{"a body too large", appCall{method: post, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"` + strings.Repeat("a", 5000) + `"}`}, http.StatusRequestEntityTooLarge, "request_too_large"},
		{"DELETE of an invalid provider ID", appCall{method: del, path: connectionsPath + "/a:b", user: "alice", origin: "api"}, http.StatusNotFound, "not_connected"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			a := env.call(tt.call)
			assert.Equal(t, tt.status, a.status, "%s", a.body)
			assert.Equal(t, "no-store", a.header.Get("Cache-Control"))
			body := a.json(t)
			assert.Equal(t, tt.code, body["error"])
			assert.NotEmpty(t, body["message"])
		})
	}
	l := env.list("alice")
	require.Len(t, l.Connections, 1, "alice's connection is as it was")
	assert.Zero(t, env.as.Stats().Revocations)
}

// The endpoint acts for the current user only: no request names another.
// Alice deleting a provider she is not connected to is 404, and bob's
// connection to it is untouched.
func TestConnectionsActForTheCurrentUserOnly(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{}))
	env.signInThroughTheEndpoint("bob")
	a := env.call(appCall{method: http.MethodDelete, path: connectionsPath + "/demo", user: "alice", origin: "api"})
	assert.Equal(t, http.StatusNotFound, a.status, "%s", a.body)
	assert.Equal(t, "not_connected", a.json(t)["error"])
	_, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "bob", "demo")
	require.NoError(t, err, "bob's connection is untouched")
	assert.Zero(t, env.as.Stats().Revocations)
	assert.Empty(t, env.list("alice").Connections)
	require.Len(t, env.list("bob").Connections, 1)
}

// A frontend on another origin (Config.FrontendOrigins) calls the endpoint
// with its cookies: the preflight allows its methods, the write header and
// credentials; every answer carries its CORS headers. Any other origin gets
// none, and its writes are refused.
func TestConnectionsFromAFrontend(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, withConnections(envOptions{config: func(c *oauthflow.Config) { c.FrontendOrigins = []string{frontend} }}))
	for _, path := range []string{connectionsPath, connectionsPath + "/demo"} {
		a := env.call(appCall{method: http.MethodOptions, path: path, origin: frontend, noHeader: true})
		assert.Equal(t, http.StatusNoContent, a.status)
		assert.Equal(t, http.Header{
			"Access-Control-Allow-Origin":      {frontend},
			"Access-Control-Allow-Credentials": {"true"},
			"Access-Control-Allow-Methods":     {"GET, POST, DELETE"},
			"Access-Control-Allow-Headers":     {"Content-Type, X-Requested-With"},
			"Access-Control-Max-Age":           {"600"},
		}, corsHeaders(a.header))
		assert.Equal(t, "no-store", a.header.Get("Cache-Control"))

		a = env.call(appCall{method: http.MethodOptions, path: path, origin: "https://evil.example", noHeader: true})
		assert.Equal(t, http.StatusForbidden, a.status)
		assert.Empty(t, corsHeaders(a.header))
	}

	a := env.call(appCall{method: http.MethodPost, path: connectionsPath, user: "alice", origin: frontend, body: `{"provider":"demo"}`})
	require.Equal(t, http.StatusOK, a.status, "%s", a.body)
	assert.Equal(t, frontend, a.header.Get("Access-Control-Allow-Origin"))
	assert.Equal(t, "true", a.header.Get("Access-Control-Allow-Credentials"))

	a = env.call(appCall{method: http.MethodGet, path: connectionsPath, origin: frontend})
	assert.Equal(t, http.StatusUnauthorized, a.status)
	assert.Equal(t, frontend, a.header.Get("Access-Control-Allow-Origin"), "errors too, so the frontend reads them")

	a = env.call(appCall{method: http.MethodGet, path: connectionsPath, user: "alice", origin: "https://evil.example"})
	assert.Equal(t, http.StatusOK, a.status)
	assert.Empty(t, corsHeaders(a.header), "the browser withholds the answer from another site")
}

// Without Config.CurrentUser the endpoint is not available: 501, JSON.
func TestConnectionsNeedCurrentUser(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	for _, c := range []appCall{
		{method: http.MethodGet, path: connectionsPath, user: "alice"},
		{method: http.MethodPost, path: connectionsPath, user: "alice", origin: "api", body: `{"provider":"demo"}`},
		{method: http.MethodDelete, path: connectionsPath + "/demo", user: "alice", origin: "api"},
	} {
		a := env.call(c)
		assert.Equal(t, http.StatusNotImplemented, a.status, c.method)
		assert.Equal(t, "not_configured", a.json(t)["error"])
		assert.Equal(t, "no-store", a.header.Get("Cache-Control"))
	}
}
