package oauthflow_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Reconnect links: an app hears that a connection is gone, sends its user
// a link, and the user opens it signed in to the app.

const linkGone = "This link has expired or was already used."

// openReconnect opens link as user ("" without a login), without following the
// redirect, with c's cookies (nil: none kept).
func openReconnect(t *testing.T, c *http.Client, link, user string) (int, string, http.Header) {
	t.Helper()
	req := newRequest(t, http.MethodGet, link, "")
	if user != "" {
		req.AddCookie(&http.Cookie{Name: appUserCookie, Value: user})
	}
	if c == nil {
		c = http.DefaultClient
	}
	return do(t, c, req)
}

// reconnectEnv is an app with connected accounts, on a clock the test moves.
func reconnectEnv(t *testing.T, o envOptions) (*flowEnv, *fakeclock.Clock) {
	t.Helper()
	clock := fakeclock.New(time.Now())
	config := o.config
	o.config = func(c *oauthflow.Config) {
		c.Now = clock.Now
		if config != nil {
			config(c)
		}
	}
	return newFlowEnv(t, withConnections(o)), clock
}

// The provider ends a grant; the refresh that learns it is an event that
// says so in words; the app sends a reconnect link; the user opens it,
// signs in again, and is connected; the link is then spent.
func TestReconnectLinkAfterTheGrantEnded(t *testing.T) {
	t.Parallel()
	env, _ := reconnectEnv(t, envOptions{})
	ctx := context.Background()
	env.signInThroughTheEndpoint("alice")
	endGrant(t, env, "alice")
	ev, ok := env.events.last(oauthflow.EventRefreshFailed)
	require.True(t, ok)
	assert.Equal(t, "alice", ev.UserID)
	assert.Equal(t, "demo", ev.ProviderID)
	assert.True(t, ev.GrantDead, "the connection is gone")
	assert.Contains(t, ev.Reason, "ended this connection")

	link, err := env.mod(0).ReconnectLink(ctx, ev.UserID, ev.ProviderID, 0)
	require.NoError(t, err)
	u, err := url.Parse(link)
	require.NoError(t, err)
	api, _ := url.Parse(env.replicas[0].api.URL)
	assert.Equal(t, api.Host, u.Host, "on the API's origin")
	assert.Equal(t, "/api/v1/oauth/reconnect", u.Path)
	assert.Len(t, u.Query().Get("token"), 43)

	status, body, h := openReconnect(t, nil, link, "alice")
	require.Equal(t, http.StatusSeeOther, status, body)
	assert.Equal(t, "no-store", h.Get("Cache-Control"))
	assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
	to := h.Get("Location")
	require.True(t, strings.HasPrefix(to, env.as.AuthURL()), to)
	status, body, _ = get(t, env.consent(to, 0))
	require.Equal(t, http.StatusOK, status, body)
	l := env.list("alice")
	require.Len(t, l.Connections, 1)
	assert.Equal(t, oauthflow.HealthHealthy, l.Connections[0].Health)

	status, body, h = openReconnect(t, nil, link, "alice")
	assert.Equal(t, http.StatusGone, status, "used once")
	assert.Contains(t, body, linkGone)
	assertPageHeaders(t, h)
}

// A link is refused, and left for its user, when whoever opens it is not
// signed in to the app, is another user, or is turned down by VerifyUser.
func TestReconnectLinkOpenedByAnotherUser(t *testing.T) {
	t.Parallel()
	var refuse atomic.Bool
	env, _ := reconnectEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.VerifyUser = func(*http.Request, string) error {
			if refuse.Load() {
				return errors.New("the app's second factor is missing")
			}
			return nil
		}
	}})
	link, err := env.mod(0).ReconnectLink(context.Background(), "alice", "demo", time.Hour)
	require.NoError(t, err)

	status, body, _ := openReconnect(t, nil, link, "")
	assert.Equal(t, http.StatusUnauthorized, status, "not signed in to the app")
	assert.Contains(t, body, "Sign in to the app")

	status, body, h := openReconnect(t, nil, link, "mallory")
	assert.Equal(t, http.StatusForbidden, status, "a forwarded link")
	assert.Contains(t, body, "This link is not yours")
	assertPageHeaders(t, h)
	ev, ok := env.events.last(oauthflow.EventSignInRefused)
	require.True(t, ok, "a refusal is an event")
	assert.Equal(t, "alice", ev.UserID)
	assert.Equal(t, "demo", ev.ProviderID)

	refuse.Store(true)
	status, _, _ = openReconnect(t, nil, link, "alice")
	assert.Equal(t, http.StatusForbidden, status, "VerifyUser has the last word")
	refuse.Store(false)
	assert.Zero(t, env.as.Stats().Authorizations)

	status, body, h = openReconnect(t, nil, link, "alice")
	require.Equal(t, http.StatusSeeOther, status, "none of the refusals spent the link: %s", body)
	status, body, _ = get(t, env.consent(h.Get("Location"), 0))
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, env.list("alice").Connections, 1)
	assert.Empty(t, env.list("mallory").Connections)
}

// A link expires on the module's clock (Config.Now).
func TestReconnectLinkExpires(t *testing.T) {
	t.Parallel()
	env, clock := reconnectEnv(t, envOptions{})
	link, err := env.mod(0).ReconnectLink(context.Background(), "alice", "demo", time.Minute)
	require.NoError(t, err)
	clock.Advance(time.Minute)
	status, body, _ := openReconnect(t, nil, link, "alice")
	assert.Equal(t, http.StatusGone, status)
	assert.Contains(t, body, linkGone)
	assert.Zero(t, env.as.Stats().Authorizations)
}

// A token that is not one the module issues is refused before the store is
// touched; one that names nothing is gone; a store that is down says so.
func TestReconnectLinkTokens(t *testing.T) {
	t.Parallel()
	env, _ := reconnectEnv(t, envOptions{})
	base := env.replicas[0].api.URL + "/api/v1/oauth/reconnect"
	env.kv.down.Store(true)
	for _, token := range []string{"", "short", unknownState + "A", strings.Repeat("!", 43)} {
		status, body, _ := openReconnect(t, nil, base+"?token="+url.QueryEscape(token), "alice")
		assert.Equal(t, http.StatusGone, status, "%q", token)
		assert.Contains(t, body, linkGone)
	}
	status, body, _ := openReconnect(t, nil, base+"?token="+unknownState, "alice")
	assert.Equal(t, http.StatusServiceUnavailable, status, "a token of the right form is looked up")
	assert.Contains(t, body, "Temporarily unavailable")
	env.kv.down.Store(false)
	status, _, _ = openReconnect(t, nil, base+"?token="+unknownState, "alice")
	assert.Equal(t, http.StatusGone, status)
}

// ReconnectLink refuses what cannot make a working link.
func TestReconnectLinkArguments(t *testing.T) {
	t.Parallel()
	env, _ := reconnectEnv(t, envOptions{setup: registerOthers})
	m := env.mod(0)
	front := frontendRedirecting(t, env)
	ctx := context.Background()
	for _, tt := range []struct {
		name, user, provider string
		ttl                  time.Duration
		want                 error
	}{
		{"a life under a minute", "alice", "demo", 30 * time.Second, oauthflow.ErrInvalidArgument},
		{"a life over a week", "alice", "demo", 8 * 24 * time.Hour, oauthflow.ErrInvalidArgument},
		{"a negative life", "alice", "demo", -time.Hour, oauthflow.ErrInvalidArgument},
		{"no user", "", "demo", 0, oauthflow.ErrInvalidArgument},
		{"an unknown provider", "alice", "nope", 0, oauthflow.ErrUnknownProvider},
		{"a provider without a browser sign-in", "alice", "robot", 0, oauthflow.ErrInvalidArgument},
		{"a provider without a redirect URI", "alice", "other", 0, oauthflow.ErrInvalidArgument},
		{"a provider redirecting to the frontend", "alice", front, 0, oauthflow.ErrInvalidArgument},
	} {
		link, err := m.ReconnectLink(ctx, tt.user, tt.provider, tt.ttl)
		assert.ErrorIs(t, err, tt.want, tt.name)
		assert.Empty(t, link, tt.name)
	}
	for _, ttl := range []time.Duration{time.Minute, 7 * 24 * time.Hour} {
		_, err := m.ReconnectLink(ctx, "alice", "demo", ttl)
		assert.NoError(t, err, "the bounds are allowed: %v", ttl)
	}

	bare := newFlowEnv(t, envOptions{})
	_, err := bare.mod(0).ReconnectLink(ctx, "alice", "demo", 0)
	assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument, "without CurrentUser nobody can open it")
	status, _, _ := openReconnect(t, nil, bare.replicas[0].api.URL+"/api/v1/oauth/reconnect?token="+unknownState, "alice")
	assert.Equal(t, http.StatusNotImplemented, status)
}

// frontendRedirecting registers the demo provider again as "front",
// redirecting to the frontend's callback page, and returns its ID.
func frontendRedirecting(t *testing.T, env *flowEnv) string {
	t.Helper()
	p, err := env.mod(0).Registry.Get("demo")
	require.NoError(t, err)
	cfg := p.(*providers.OAuth2).Config()
	cfg.ID = "front"
	front, err := providers.NewOAuth2(cfg, providers.Credentials{ClientID: authserver.DefaultClientID,
		ClientSecret: authserver.DefaultClientSecret, RedirectURL: "http://127.0.0.1:1/oauth/callback"})
	require.NoError(t, err)
	require.NoError(t, env.mod(0).Registry.Register(front))
	return "front"
}

// A link's record is sealed at rest when records are: it names no user.
func TestReconnectLinkSealed(t *testing.T) {
	t.Parallel()
	env, _ := reconnectEnv(t, envOptions{config: func(c *oauthflow.Config) { c.Encryption = keyRing(t, newKey(t, "k1")) }})
	link, err := env.mod(0).ReconnectLink(context.Background(), "alice-the-user", "demo", 0)
	require.NoError(t, err)
	u, _ := url.Parse(link)
	raw, err := env.kv.Get(context.Background(), "oauth:sys:reconnect:"+u.Query().Get("token"))
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "alice-the-user")
	status, body, _ := openReconnect(t, nil, link, "alice-the-user")
	assert.Equal(t, http.StatusSeeOther, status, body)
}

// For a module that binds sign-ins to their browser (Config.BindSignIns), a
// link sets the sign-in's cookie as POST /start would, and the sign-in
// completes in the browser that opened it.
func TestReconnectLinkBindsTheSignIn(t *testing.T) {
	t.Parallel()
	env, _ := reconnectEnv(t, envOptions{config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	link, err := env.mod(0).ReconnectLink(context.Background(), "alice", "demo", 0)
	require.NoError(t, err)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	status, body, h := openReconnect(t, browser, link, "alice")
	require.Equal(t, http.StatusSeeOther, status, body)
	require.Contains(t, h.Get("Set-Cookie"), "HttpOnly")
	callback := env.consent(h.Get("Location"), 0)

	status, _, _ = do(t, http.DefaultClient, newRequest(t, http.MethodGet, callback, ""))
	assert.Equal(t, http.StatusForbidden, status, "another browser cannot complete it")
	status, body, _ = do(t, browser, newRequest(t, http.MethodGet, callback, ""))
	require.Equal(t, http.StatusOK, status, body)
	require.Len(t, env.list("alice").Connections, 1)
}

// A link whose sign-in cannot start (the provider's push fails) says so
// and stays usable: the user tries again.
func TestReconnectLinkKeptWhenTheSignInCannotStart(t *testing.T) {
	t.Parallel()
	env, _ := reconnectEnv(t, envOptions{as: authserver.Options{RequirePAR: true}, demo: pushedDemo,
		config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	link, err := env.mod(0).ReconnectLink(context.Background(), "alice", "demo", 0)
	require.NoError(t, err)
	env.as.FailNextPAR(authserver.Failure{Status: http.StatusServiceUnavailable})
	status, body, _ := openReconnect(t, nil, link, "alice")
	assert.Equal(t, http.StatusBadGateway, status, body)
	status, body, _ = openReconnect(t, nil, link, "alice")
	assert.Equal(t, http.StatusSeeOther, status, "the link was put back: %s", body)
}
