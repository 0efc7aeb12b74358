package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Interop: the whole flow through the library's own handlers, against panva's
// oidc-provider, an authorization server this project did not write.

type peerApp struct {
	peer   *oidcpeer.Peer
	mod    *oauthflow.Module
	api    *httptest.Server
	client string
	secret string
	events *eventLog
}

func newPeerApp(t *testing.T, peer *oidcpeer.Peer, client, secret string, style providers.AuthStyle) *peerApp {
	t.Helper()
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	prov, err := providers.Discover(context.Background(), "peer", peer.Issuer(),
		providers.Credentials{ClientID: client, ClientSecret: secret, RedirectURL: api.URL + oauthflow.CallbackPath},
		providers.WithAuthStyle(style))
	require.NoError(t, err, "metadata discovery builds the provider")
	require.Equal(t, peer.Issuer(), prov.Issuer(), "the peer supports RFC 9207 iss")
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(prov))
	events := &eventLog{}
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{KV: sharedRedisAny(t), Registry: reg,
		Logger: slog.New(slog.DiscardHandler), OnEvent: events.hook})
	require.NoError(t, err)
	mod.Mount(mux)
	return &peerApp{peer: peer, mod: mod, api: api, client: client, secret: secret, events: events}
}

// signIn starts a sign-in and returns the run, its prompt and the redirect the
// peer sends the browser to.
func (a *peerApp) signIn(t *testing.T, user string) (*oauthflow.Run, *oauthflow.OAuthPromptDocument, *url.URL) {
	t.Helper()
	run, doc, err := a.mod.StartSignIn(context.Background(), user, "peer", "openid", "offline_access", "read")
	require.NoError(t, err)
	return run, doc, a.peer.Authorize(t, doc.AuthURL, a.api.URL+oauthflow.CallbackPath)
}

func (a *peerApp) prompt(t *testing.T, runID string) oauthflow.OAuthPromptDocument {
	var doc oauthflow.OAuthPromptDocument
	require.NoError(t, a.mod.Engine.Document(context.Background(), runID, oauthflow.PromptDocumentName, &doc))
	return doc
}

func TestInteropClients(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{RTRotate: oidcpeer.RotateAlways})
	for _, c := range []struct {
		name, client, secret string
		style                providers.AuthStyle
	}{
		{"client_secret_basic", oidcpeer.BasicClient, oidcpeer.BasicSecret, ""},
		{"client_secret_post", oidcpeer.PostClient, oidcpeer.PostSecret, providers.AuthStyleParams},
		{"form-encoded secret", oidcpeer.EncClient, oidcpeer.EncSecret, ""},
		{"public client with PKCE", oidcpeer.PublicClient, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			app := newPeerApp(t, peer, c.client, c.secret, c.style)
			run, _, redirect := app.signIn(t, "alice")
			assert.Equal(t, peer.Issuer(), redirect.Query().Get("iss"))
			status, body, _ := get(t, redirect.String())
			require.Equal(t, http.StatusOK, status, "%s\npeer log:\n%s", body, peer.Output())
			assert.Equal(t, oauthflow.PromptSuccess, app.prompt(t, run.ID).Status)
			tok, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
			require.NoError(t, err)
			assert.NotEmpty(t, tok.RefreshToken)
			assert.True(t, peer.Introspect(t, tok.AccessToken, oidcpeer.BasicClient, oidcpeer.BasicSecret) ||
				peer.Introspect(t, tok.AccessToken, c.client, c.secret), "the stored access token is live at the peer")
		})
	}
}

func TestInteropRefresh(t *testing.T) {
	t.Parallel()
	for _, rotate := range []string{oidcpeer.RotateAlways, oidcpeer.RotateNever} {
		t.Run(rotate, func(t *testing.T) {
			t.Parallel()
			// Access tokens live 5 s, inside the 60 s skew: the first read refreshes.
			peer := oidcpeer.Start(t, oidcpeer.Options{RTRotate: rotate})
			app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
			_, _, redirect := app.signIn(t, "alice")
			status, _, _ := get(t, redirect.String())
			require.Equal(t, http.StatusOK, status)
			before, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
			require.NoError(t, err)
			access, err := app.mod.Tokens.GetValidAccessToken(context.Background(), "alice", "peer")
			require.NoError(t, err, "peer log:\n%s", peer.Output())
			assert.NotEqual(t, before.AccessToken, access)
			assert.True(t, peer.Introspect(t, access, oidcpeer.BasicClient, oidcpeer.BasicSecret))
			after, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
			require.NoError(t, err)
			if rotate == oidcpeer.RotateAlways {
				assert.NotEqual(t, before.RefreshToken, after.RefreshToken, "rotation replaces the refresh token")
			} else {
				assert.Equal(t, before.RefreshToken, after.RefreshToken, "no rotation keeps it")
			}
			assert.Contains(t, app.events.kinds(), oauthflow.EventTokensRefreshed)
		})
	}
}

func TestInteropDeleteRevokes(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
	_, _, redirect := app.signIn(t, "alice")
	status, _, _ := get(t, redirect.String())
	require.Equal(t, http.StatusOK, status)
	tok, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	require.True(t, peer.Introspect(t, tok.RefreshToken, oidcpeer.BasicClient, oidcpeer.BasicSecret))
	require.NoError(t, app.mod.Tokens.DeleteTokens(context.Background(), "alice", "peer"))
	assert.False(t, peer.Introspect(t, tok.RefreshToken, oidcpeer.BasicClient, oidcpeer.BasicSecret), "revoked at the peer")
	_, err = app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)
	assert.NotContains(t, app.events.kinds(), oauthflow.EventRevokeFailed)
}

func TestInteropDeniedConsent(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.DenyClient, oidcpeer.DenySecret, "")
	run, _, redirect := app.signIn(t, "alice")
	assert.Equal(t, "access_denied", redirect.Query().Get("error"))
	status, body, _ := get(t, redirect.String())
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "Sign-in not completed")
	doc := app.prompt(t, run.ID)
	assert.Equal(t, oauthflow.PromptError, doc.Status)
	assert.NotEmpty(t, doc.Message)
}

func TestInteropTamperedIssuerRejected(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
	run, _, redirect := app.signIn(t, "alice")
	status, body, _ := get(t, setParam(redirect.String(), "iss", "http://127.0.0.1:1/evil"))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "unexpected issuer")
	_, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken, "nothing stored")
	assert.Equal(t, oauthflow.PromptError, app.prompt(t, run.ID).Status)

	// A missing iss is refused too when the provider announces one.
	_, _, redirect = app.signIn(t, "bob")
	status, _, _ = get(t, dropParam(redirect.String(), "iss"))
	assert.Equal(t, http.StatusBadRequest, status)

	// And on an error redirect a mismatched iss records nothing.
	run, doc, err := app.mod.StartSignIn(context.Background(), "carol", "peer", "read")
	require.NoError(t, err)
	u, _ := url.Parse(app.api.URL + oauthflow.CallbackPath)
	u.RawQuery = url.Values{"error": {"access_denied"}, "state": {doc.State}, "iss": {"http://evil.example"}}.Encode()
	status, body, _ = get(t, u.String())
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "unexpected issuer")
	assert.Equal(t, oauthflow.PromptPending, app.prompt(t, run.ID).Status)
}

// Interop with pushed authorization requests (RFC 9126): oidc-provider
// configured to require them, found by discovery. The sign-in pushes its
// request (the peer refuses any other) and sends the browser with client_id
// and request_uri alone; the grant it makes is refreshed and revoked
// through the library like any other.
func TestInteropPARRequired(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{PAR: oidcpeer.PARRequired, RTRotate: oidcpeer.RotateAlways})
	app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
	p, err := app.mod.Registry.Get("peer")
	require.NoError(t, err)
	cfg := p.(*providers.OAuth2).Config()
	require.Equal(t, peer.Issuer()+"/request", cfg.PushedAuthURL, "discovery found the PAR endpoint")
	require.True(t, cfg.RequirePAR, "and that the peer requires it")

	run, doc, redirect := app.signIn(t, "alice")
	u, err := url.Parse(openLink(t, doc.AuthURL))
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"client_id", "request_uri"}, slices.Collect(maps.Keys(u.Query())),
		"the browser carries client_id and request_uri only: %s", u)
	require.Equal(t, doc.State, redirect.Query().Get("state"), "the pushed state came back")
	status, body, _ := get(t, redirect.String())
	require.Equal(t, http.StatusOK, status, "%s\npeer log:\n%s", body, peer.Output())
	require.Equal(t, oauthflow.PromptSuccess, app.prompt(t, run.ID).Status)

	before, err := app.mod.Tokens.GetTokens(t.Context(), "alice", "peer")
	require.NoError(t, err)
	access, err := app.mod.Tokens.GetValidAccessToken(t.Context(), "alice", "peer") // 5 s tokens: inside the skew
	require.NoError(t, err, "peer log:\n%s", peer.Output())
	require.NotEqual(t, before.AccessToken, access, "refreshed")
	after, err := app.mod.Tokens.GetTokens(t.Context(), "alice", "peer")
	require.NoError(t, err)
	require.True(t, peer.Introspect(t, after.RefreshToken, oidcpeer.BasicClient, oidcpeer.BasicSecret))

	require.NoError(t, app.mod.Tokens.DeleteTokens(t.Context(), "alice", "peer"))
	require.False(t, peer.Introspect(t, after.RefreshToken, oidcpeer.BasicClient, oidcpeer.BasicSecret), "revoked at the peer")
	require.NotContains(t, app.events.kinds(), oauthflow.EventRevokeFailed)

	front := p.BuildAuthURL([]string{"openid"}, "s")
	refused := peer.Authorize(t, front, app.api.URL+oauthflow.CallbackPath)
	require.Equal(t, "invalid_request", refused.Query().Get("error"), "the peer refuses a request that was not pushed: %v", refused)
}

// Interop with the device authorization grant (RFC 8628): oidc-provider
// with features.deviceFlow, found by discovery, a user who approves or
// denies on the peer's /device pages, and instances sharing a real Redis
// whose workers poll on the real clock. The peer answers slow_down to any
// poll that comes sooner than its interval, so a well-behaved client never
// hears one unless the peer announced a shorter interval than it enforces.

// deviceWorkerInterval is how often the instances' workers look for due
// polls: well under the peer's interval, so that several instances race
// for each poll.
const deviceWorkerInterval = 50 * time.Millisecond

// deviceApp is one instance signing users in with the device grant only.
type deviceApp struct {
	mod *oauthflow.Module
}

// deviceSpace is what a test's instances share: a keyspace in the real
// Redis and the key ring its records are sealed with.
type deviceSpace struct {
	*redisSpace
	ring *oauthflow.KeyRing
}

func newDeviceSpace(t *testing.T) *deviceSpace {
	return &deviceSpace{redisSpace: realRedisSpace(t), ring: keyRing(t, newKey(t, "k1"))}
}

// newDeviceApp starts a Module on space that signs in with the peer.
func newDeviceApp(t *testing.T, peer *oidcpeer.Peer, space *deviceSpace) *deviceApp {
	t.Helper()
	return newDeviceAppWith(t, space, discoverDevicePeer(t, peer))
}

// discoverDevicePeer discovers the peer as provider "peer" for the
// device-only client (no redirect URL).
func discoverDevicePeer(t *testing.T, peer *oidcpeer.Peer) *providers.OAuth2 {
	t.Helper()
	p, err := providers.Discover(context.Background(), "peer", peer.Issuer(),
		providers.Credentials{ClientID: oidcpeer.DeviceBasicClient, ClientSecret: oidcpeer.DeviceBasicSecret})
	require.NoError(t, err)
	require.Equal(t, peer.DeviceAuthURL(), p.Config().DeviceAuthURL, "from device_authorization_endpoint")
	return p
}

// newDeviceAppWith starts a Module on space that signs in with p.
func newDeviceAppWith(t *testing.T, space *deviceSpace, p oauthflow.Provider) *deviceApp {
	t.Helper()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(p))
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{KV: space.kv, Registry: reg,
		Encryption: space.ring, Logger: slog.New(slog.DiscardHandler), WorkerInterval: deviceWorkerInterval})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close() })
	return &deviceApp{mod: mod}
}

func (a *deviceApp) start(t *testing.T) (*oauthflow.Run, *oauthflow.OAuthPromptDocument) {
	t.Helper()
	run, doc, err := a.mod.StartDeviceSignIn(context.Background(), "alice", "peer", "openid", "offline_access")
	require.NoError(t, err)
	require.Equal(t, oauthflow.PromptPending, doc.Status)
	return run, doc
}

// ended waits, on the real clock, until run runID has ended.
func (a *deviceApp) ended(t *testing.T, runID string) *oauthflow.Run {
	t.Helper()
	var r *oauthflow.Run
	require.Eventually(t, func() bool {
		var err error
		r, err = a.mod.Engine.Get(context.Background(), runID)
		require.NoError(t, err)
		return r.Status == oauthflow.RunCompleted || r.Status == oauthflow.RunFailed
	}, time.Minute, 20*time.Millisecond, "the device sign-in never ended")
	return r
}

func (a *deviceApp) prompt(t *testing.T, runID string) oauthflow.OAuthPromptDocument {
	t.Helper()
	var doc oauthflow.OAuthPromptDocument
	require.NoError(t, a.mod.Engine.Document(context.Background(), runID, oauthflow.PromptDocumentName, &doc))
	return doc
}

// requirePolledApart checks that no two consecutive polls the peer recorded
// came closer than interval.
func requirePolledApart(t *testing.T, polls []time.Time, interval time.Duration) {
	t.Helper()
	for i := 1; i < len(polls); i++ {
		assert.GreaterOrEqual(t, polls[i].Sub(polls[i-1]), interval, "polls %d and %d", i-1, i)
	}
}

func TestInteropDevice(t *testing.T) {
	t.Parallel()
	t.Run("approved, polled by three instances", func(t *testing.T) {
		t.Parallel()
		peer := oidcpeer.Start(t, oidcpeer.Options{UserinfoTokens: true, ATTTL: time.Hour})
		space := newDeviceSpace(t)
		codes := &deviceCodeSpy{}
		apps := []*deviceApp{newDeviceAppWith(t, space, spyingPeer(t, peer, codes)), newDeviceApp(t, peer, space), newDeviceApp(t, peer, space)}
		run, doc := apps[0].start(t)
		assert.Equal(t, peer.Issuer()+"/device", doc.VerificationURI, "as the peer gave it")
		assert.Contains(t, doc.VerificationURIComplete, doc.UserCode)

		// Let several polls find the user has not acted, then approve.
		require.Eventually(t, func() bool { return len(peer.DevicePolls(t, codes.code)) >= 3 }, time.Minute, 50*time.Millisecond)
		peer.ApproveDevice(t, doc.UserCode)
		r := apps[1].ended(t, run.ID)
		require.Equal(t, oauthflow.RunCompleted, r.Status, apps[1].prompt(t, run.ID).Message)
		assert.JSONEq(t, `{"authenticated":true}`, string(r.Result))
		assert.Equal(t, oauthflow.PromptSuccess, apps[2].prompt(t, run.ID).Status)

		polls := peer.DevicePolls(t, codes.code)
		requirePolledApart(t, polls, time.Second)
		n := len(polls)
		for _, a := range apps {
			oauthflow.WorkOnce(context.Background(), a.mod)
		}
		assert.Len(t, peer.DevicePolls(t, codes.code), n, "polling stopped at the tokens: the code was redeemed once")

		conns, err := apps[2].mod.Tokens.Connections(context.Background(), "alice")
		require.NoError(t, err)
		require.Len(t, conns, 1)
		assert.Equal(t, "peer", conns[0].ProviderID)
		assert.True(t, conns[0].HasRefreshToken)
		resp, err := apps[2].mod.Tokens.Client(context.Background(), "alice", "peer").Get(peer.UserinfoURL())
		require.NoError(t, err)
		_ = resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode, "another instance calls the API with the stored grant")
	})
	t.Run("denied", func(t *testing.T) {
		t.Parallel()
		peer := oidcpeer.Start(t, oidcpeer.Options{})
		a := newDeviceApp(t, peer, newDeviceSpace(t))
		run, doc := a.start(t)
		peer.DenyDevice(t, doc.UserCode)
		r := a.ended(t, run.ID)
		assert.Equal(t, oauthflow.RunFailed, r.Status)
		assert.JSONEq(t, `{"authenticated":false}`, string(r.Result))
		p := a.prompt(t, run.ID)
		assert.Equal(t, oauthflow.PromptError, p.Status)
		assert.Equal(t, "The sign-in was denied.", p.Message)
	})
	t.Run("expired", func(t *testing.T) {
		t.Parallel()
		peer := oidcpeer.Start(t, oidcpeer.Options{DeviceCodeTTL: 2 * time.Second})
		a := newDeviceApp(t, peer, newDeviceSpace(t))
		run, doc := a.start(t)
		assert.InDelta(t, time.Now().Add(2*time.Second).UnixMilli(), doc.ExpiresAt, 1000)
		r := a.ended(t, run.ID)
		assert.Equal(t, oauthflow.RunFailed, r.Status)
		assert.Equal(t, "The sign-in code expired. Start the sign-in again.", a.prompt(t, run.ID).Message)
	})
	t.Run("slow_down lengthens the interval for good", func(t *testing.T) {
		t.Parallel()
		// The peer announces 1 s and holds clients to 2 s: the first poll
		// hears slow_down, and every later one comes 1 + 5 s apart.
		peer := oidcpeer.Start(t, oidcpeer.Options{DeviceInterval: 2 * time.Second, DeviceAnnouncedInterval: time.Second})
		space := newDeviceSpace(t)
		codes := &deviceCodeSpy{}
		a, b := newDeviceAppWith(t, space, spyingPeer(t, peer, codes)), newDeviceApp(t, peer, space)
		run, doc := a.start(t)
		require.Eventually(t, func() bool { return len(peer.DevicePolls(t, codes.code)) >= 2 }, time.Minute, 50*time.Millisecond)
		peer.ApproveDevice(t, doc.UserCode)
		require.Equal(t, oauthflow.RunCompleted, b.ended(t, run.ID).Status)
		polls := peer.DevicePolls(t, codes.code)
		require.GreaterOrEqual(t, len(polls), 3)
		requirePolledApart(t, polls[1:], 6*time.Second)
	})
	t.Run("the instance that started it closes; another finishes", func(t *testing.T) {
		t.Parallel()
		peer := oidcpeer.Start(t, oidcpeer.Options{})
		space := newDeviceSpace(t)
		a := newDeviceApp(t, peer, space)
		run, doc := a.start(t)
		require.NoError(t, a.mod.Close()) // before its first poll is due
		b := newDeviceApp(t, peer, space)
		peer.ApproveDevice(t, doc.UserCode)
		require.Equal(t, oauthflow.RunCompleted, b.ended(t, run.ID).Status, b.prompt(t, run.ID).Message)
		tok, err := b.mod.Tokens.GetValidAccessToken(context.Background(), "alice", "peer")
		require.NoError(t, err)
		assert.NotEmpty(t, tok)
	})
	t.Run("a consumer workflow is resumed", func(t *testing.T) {
		t.Parallel()
		peer := oidcpeer.Start(t, oidcpeer.Options{UserinfoTokens: true, ATTTL: time.Hour})
		space := newDeviceSpace(t)
		a, b := newDeviceApp(t, peer, space), newDeviceApp(t, peer, space)
		for _, app := range []*deviceApp{a, b} {
			require.NoError(t, app.mod.Engine.Register(reposWorkflowWith(whoamiTool(app.mod, peer.UserinfoURL()),
				oauthflow.OAuthWorkflowArgs{Provider: "peer", Scopes: []string{"openid", "offline_access"}, Grant: oauthflow.GrantDevice})))
		}
		parent, err := a.mod.Engine.Launch(context.Background(), "alice", "repos", nil, oauthflow.RunOptions{})
		require.NoError(t, err)
		require.Equal(t, oauthflow.StateAwaitingAuth, parent.State)
		doc := a.prompt(t, parent.Children[0])
		require.NotEmpty(t, doc.UserCode)
		peer.ApproveDevice(t, doc.UserCode)
		parent = b.ended(t, parent.ID)
		require.Equal(t, oauthflow.RunCompleted, parent.Status)
		var me struct {
			Sub string `json:"sub"`
		}
		require.NoError(t, json.Unmarshal(parent.Result, &me), string(parent.Result))
		assert.NotEmpty(t, me.Sub, "the resumed tool called userinfo as the user who approved")
	})
}

// spyingPeer is the peer's provider noting the device codes it is given.
func spyingPeer(t *testing.T, peer *oidcpeer.Peer, spy *deviceCodeSpy) oauthflow.Provider {
	t.Helper()
	return &spyingDevice{deviceProvider: discoverDevicePeer(t, peer), spy: spy}
}

// whoamiTool is a consumer tool: it calls the peer's userinfo with the
// user's token and returns the claims.
func whoamiTool(m *oauthflow.Module, userinfo string) *oauthflow.Tool {
	return oauthflow.NewTool("whoami", "Says who the user is.",
		oauthflow.Schema{Type: "object", Properties: map[string]oauthflow.Property{}},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			resp, err := m.Tokens.Client(ctx, tc.UserID, "peer").Get(userinfo)
			if err != nil {
				return nil, err
			}
			defer func() { _ = resp.Body.Close() }()
			var claims map[string]any
			if err := json.NewDecoder(resp.Body).Decode(&claims); err != nil {
				return nil, err
			}
			return claims, nil
		})
}

// Interop with DPoP (RFC 9449): oidc-provider binds a sign-in's grant to the
// key the library made for it, and its userinfo endpoint, the one resource
// the peer protects itself, checks the binding on every call. Two instances
// share a real Redis, their records sealed at rest.

// dpopCase is one provider set-up TestInteropDPoP runs the flow with.
type dpopCase struct {
	name           string
	dpop           string // the peer's policy: oidcpeer.DPoPOptional, DPoPNonce or DPoPOff
	client, secret string
	catalog        bool // a catalog-style Config with DPoP: true; false: Discover, DPoP from the metadata
}

func TestInteropDPoP(t *testing.T) {
	t.Parallel()
	for _, tc := range []dpopCase{
		{"discovered confidential client", oidcpeer.DPoPOptional, oidcpeer.BasicClient, oidcpeer.BasicSecret, false},
		{"catalog public client", oidcpeer.DPoPOptional, oidcpeer.PublicClient, "", true},
		{"nonces/discovered confidential client", oidcpeer.DPoPNonce, oidcpeer.BasicClient, oidcpeer.BasicSecret, false},
		{"nonces/catalog public client", oidcpeer.DPoPNonce, oidcpeer.PublicClient, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testInteropDPoP(t, tc)
		})
	}
}

// testInteropDPoP signs alice in on instance A and uses the grant from B.
func testInteropDPoP(t *testing.T, tc dpopCase) {
	// Access tokens live an hour, past the store's skew: reads use the
	// sign-in's token until the test expires it in the store.
	peer := oidcpeer.Start(t, oidcpeer.Options{DPoP: tc.dpop, ATTTL: time.Hour, UserinfoTokens: true})
	space := realRedisSpace(t)
	ring := keyRing(t, newKey(t, "k1"))
	a, b := newDPoPApp(t, peer, tc, space, ring), newDPoPApp(t, peer, tc, space, ring)

	jkt := a.signIn(t)
	require.NotEmpty(t, jkt, "the authorization request names the key")
	stored := b.tokens(t)
	require.Equal(t, "DPoP", stored.TokenType, "the peer answered token_type DPoP")
	require.Equal(t, jkt, thumbprintOf(t, stored.DPoPKey), "the stored key is the one the authorization request named")
	require.Equal(t, jkt, peer.BoundTo(t, stored.AccessToken, tc.client, tc.secret), "the peer bound the token to that key")
	requireSealed(t, space, stored)

	assert.Equal(t, http.StatusOK, b.userinfo(t), "B sends the token A stored with a proof of its key")
	refusedWithoutProof(t, peer, stored.AccessToken)

	refreshed := b.forceRefresh(t, stored)
	require.Equal(t, stored.DPoPKey, refreshed.DPoPKey, "a refresh keeps the grant's key")
	require.Equal(t, jkt, peer.BoundTo(t, refreshed.AccessToken, tc.client, tc.secret), "the refresh proved the same key")
	refusedWithoutProof(t, peer, refreshed.AccessToken)
	requireSealed(t, space, refreshed)

	challenges := 0
	if tc.dpop == oidcpeer.DPoPNonce {
		challenges = 1 // A's first request (its push, or its code exchange); B's first call to userinfo
	}
	a.wire.requireAnswered(t, challenges, "A")
	b.wire.requireAnswered(t, challenges, "B") // the peer's log is printed if the test failed (oidcpeer.Start)
}

// With DPoP off at the peer the same flow stores a bearer token, and
// userinfo accepts it as one: what refuses a bound token without its proof
// is the binding, not the endpoint.
func TestInteropDPoPOffStaysBearer(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{DPoP: oidcpeer.DPoPOff, ATTTL: time.Hour, UserinfoTokens: true})
	tc := dpopCase{dpop: oidcpeer.DPoPOff, client: oidcpeer.BasicClient, secret: oidcpeer.BasicSecret}
	space := realRedisSpace(t)
	a, b := newDPoPApp(t, peer, tc, space, nil), newDPoPApp(t, peer, tc, space, nil)

	require.Empty(t, a.signIn(t), "no dpop_jkt")
	stored := b.tokens(t)
	require.Empty(t, stored.TokenType, "a bearer token")
	require.Empty(t, stored.DPoPKey)
	require.Empty(t, peer.BoundTo(t, stored.AccessToken, tc.client, tc.secret), "the peer bound it to no key")
	assert.Equal(t, http.StatusOK, b.userinfo(t))
	assert.Equal(t, http.StatusOK, userinfoAs(t, peer, "Bearer "+stored.AccessToken, nil).StatusCode)
	assert.Zero(t, a.wire.count(http.MethodPost, "/token")+b.wire.count(http.MethodGet, "/me"), "no proof was sent")
}

// realRedisSpace is a keyspace of the test's own in the real Redis (required
// under CI=true).
func realRedisSpace(t *testing.T) *redisSpace {
	c := redistest.Real(t)
	prefix := redistest.Prefix(t, c)
	return &redisSpace{c: c, prefix: prefix, kv: oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), prefix)}
}

// dpopApp is one instance: a Module with its own callback server, and the
// wire between it and the peer.
type dpopApp struct {
	peer *oidcpeer.Peer
	mod  *oauthflow.Module
	api  *httptest.Server
	wire *dpopWire
}

func newDPoPApp(t *testing.T, peer *oidcpeer.Peer, tc dpopCase, space *redisSpace, ring *oauthflow.KeyRing) *dpopApp {
	t.Helper()
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	wire := &dpopWire{}
	creds := providers.Credentials{ClientID: tc.client, ClientSecret: tc.secret, RedirectURL: api.URL + oauthflow.CallbackPath}
	prov := dpopProvider(t, peer, tc, creds, providers.WithHTTPClient(&http.Client{Transport: wire, Timeout: 10 * time.Second}))
	require.Equal(t, tc.dpop != oidcpeer.DPoPOff, prov.UsesDPoP(), "DPoP from the metadata or the config")
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(prov))
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{KV: space.kv, Registry: reg,
		Encryption: ring, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close() })
	mod.Mount(mux)
	return &dpopApp{peer: peer, mod: mod, api: api, wire: wire}
}

// dpopProvider builds the case's provider: discovered, so DPoP comes from
// dpop_signing_alg_values_supported, or written out as a catalog entry is.
func dpopProvider(t *testing.T, peer *oidcpeer.Peer, tc dpopCase, creds providers.Credentials, opt providers.Option) *providers.OAuth2 {
	t.Helper()
	iss := peer.Issuer()
	if !tc.catalog {
		p, err := providers.Discover(context.Background(), "peer", iss, creds, opt)
		require.NoError(t, err)
		return p
	}
	p, err := providers.NewOAuth2(providers.Config{ID: "peer", DisplayName: "oidc-provider",
		AuthURL: iss + "/auth", TokenURL: iss + "/token", RevocationURL: iss + "/token/revocation",
		Issuer: iss, PKCE: providers.PKCERequired, DPoP: true}, creds, opt)
	require.NoError(t, err)
	return p
}

// signIn runs alice's sign-in through the peer's login and consent to this
// instance's callback, and returns the thumbprint of the key the
// authorization request named ("" for none): its dpop_jkt, in the pushed
// request for a discovered provider (the peer offers PAR, and the push also
// proves the key), in the URL for the catalog one.
func (a *dpopApp) signIn(t *testing.T) string {
	t.Helper()
	run, doc, err := a.mod.StartSignIn(context.Background(), "alice", "peer", "openid", "offline_access")
	require.NoError(t, err)
	authURL, err := url.Parse(doc.AuthURL)
	require.NoError(t, err)
	pending, err := oauthflow.PeekSession(a.mod.Sessions, context.Background(), doc.State)
	require.NoError(t, err)
	var jkt string
	if pending.DPoPKey != "" {
		jkt = thumbprintOf(t, pending.DPoPKey)
	}
	if authURL.Query().Has("request_uri") {
		require.Equal(t, jkt != "", a.wire.count(http.MethodPost, "/request") > 0, "the push proved the key")
	} else {
		require.Equal(t, jkt, authURL.Query().Get("dpop_jkt"), "the URL names the key")
	}
	redirect := a.peer.Authorize(t, doc.AuthURL, a.api.URL+oauthflow.CallbackPath)
	status, body, _ := get(t, redirect.String())
	require.Equal(t, http.StatusOK, status, "%s\npeer log:\n%s", body, a.peer.Output())
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, a.mod.Engine.Document(context.Background(), run.ID, oauthflow.PromptDocumentName, &prompt))
	require.Equal(t, oauthflow.PromptSuccess, prompt.Status)
	return jkt
}

func (a *dpopApp) tokens(t *testing.T) *oauthflow.StoredTokens {
	t.Helper()
	tok, err := a.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	return tok
}

// userinfo calls the peer's userinfo endpoint as alice through the store's
// transport (what Tokens.Client sends with) over the wire, and returns the
// status.
func (a *dpopApp) userinfo(t *testing.T) int {
	t.Helper()
	c := &http.Client{Transport: a.mod.Tokens.Transport(context.Background(), "alice", "peer", a.wire), Timeout: 10 * time.Second}
	resp, err := c.Get(a.peer.UserinfoURL())
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var claims struct {
		Sub string `json:"sub"`
	}
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&claims))
		require.NotEmpty(t, claims.Sub, "userinfo names the user")
	}
	return resp.StatusCode
}

// forceRefresh expires the stored token and calls userinfo, which refreshes
// it (with a proof of the grant's key) before the call; it returns the
// record the refresh stored.
func (a *dpopApp) forceRefresh(t *testing.T, stored *oauthflow.StoredTokens) *oauthflow.StoredTokens {
	t.Helper()
	expired := *stored
	expired.ExpiresAt = time.Now().Add(-time.Minute).UnixMilli()
	require.NoError(t, a.mod.Tokens.StoreTokens(context.Background(), "alice", "peer", expired))
	refreshes := a.wire.count(http.MethodPost, "/token")
	require.Equal(t, http.StatusOK, a.userinfo(t), "the refreshed token is accepted with a proof")
	require.Greater(t, a.wire.count(http.MethodPost, "/token"), refreshes, "the call refreshed the token at the peer")
	fresh := a.tokens(t)
	require.NotEqual(t, stored.AccessToken, fresh.AccessToken, "a new access token")
	require.Equal(t, "DPoP", fresh.TokenType)
	return fresh
}

// refusedWithoutProof checks the peer refuses a bound token sent without a
// proof of its key: as a Bearer token (401 invalid_token), as a DPoP token
// with no DPoP header (400 invalid_request, RFC 6750 §3.1) and with a proof
// of another key (401 invalid_token).
func refusedWithoutProof(t *testing.T, peer *oidcpeer.Peer, access string) {
	t.Helper()
	other, err := dpop.NewKey()
	require.NoError(t, err)
	proof, err := other.Proof(http.MethodGet, peer.UserinfoURL(), time.Now(), access, "")
	require.NoError(t, err)
	// In nonce mode that proof is refused for want of a nonce: the answer's
	// nonce makes one refused for its key alone.
	if nonce := userinfoAs(t, peer, "DPoP "+access, http.Header{"DPoP": {proof}}).Header.Get("DPoP-Nonce"); nonce != "" {
		proof, err = other.Proof(http.MethodGet, peer.UserinfoURL(), time.Now(), access, nonce)
		require.NoError(t, err)
	}
	for _, tt := range []struct {
		name, auth, proof string
		status            int
		error             string
	}{
		{"as a Bearer token", "Bearer " + access, "", http.StatusUnauthorized, "invalid_token"},
		{"as DPoP without a proof", "DPoP " + access, "", http.StatusBadRequest, "invalid_request"},
		{"with a proof of another key", "DPoP " + access, proof, http.StatusUnauthorized, "invalid_token"},
	} {
		resp := userinfoAs(t, peer, tt.auth, http.Header{"DPoP": {tt.proof}})
		assert.Equal(t, tt.status, resp.StatusCode, tt.name)
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), `error="`+tt.error+`"`, tt.name)
	}
}

// userinfoAs calls userinfo with the Authorization header auth and extra
// headers (an empty value is left out), and returns the closed answer.
func userinfoAs(t *testing.T, peer *oidcpeer.Peer, auth string, extra http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, peer.UserinfoURL(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", auth)
	for k, vs := range extra {
		if vs[0] != "" {
			req.Header.Set(k, vs[0])
		}
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	discardBody(resp)
	return resp
}

func discardBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}

// thumbprintOf is the RFC 7638 thumbprint of a key as StoredTokens.DPoPKey
// holds it.
func thumbprintOf(t *testing.T, enc string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(enc)
	require.NoError(t, err)
	k, err := dpop.ParseKey(b)
	require.NoError(t, err)
	return k.Thumbprint()
}

// requireSealed checks the record is sealed at rest and that no value in the
// keyspace holds the grant's key (its encoded form, or its private scalar in
// any usual encoding) or the tokens in the clear.
func requireSealed(t *testing.T, space *redisSpace, tok *oauthflow.StoredTokens) {
	t.Helper()
	values := space.dump(t)
	require.True(t, strings.HasPrefix(values["oauth:alice:peer"], "enc2:k1:"), "the token record is sealed")
	raw, err := base64.RawURLEncoding.DecodeString(tok.DPoPKey)
	require.NoError(t, err)
	d := raw[1:33] // the private scalar, after the encoding's version byte
	secrets := map[string]string{
		"the key": tok.DPoPKey, "the access token": tok.AccessToken, "the refresh token": tok.RefreshToken,
		"the private scalar": string(d), "the private scalar in hex": hex.EncodeToString(d),
		"the private scalar in base64url": base64.RawURLEncoding.EncodeToString(d),
		"the private scalar in base64":    base64.StdEncoding.EncodeToString(d),
	}
	for key, v := range values {
		for what, secret := range secrets {
			require.NotContains(t, v, secret, "%s is in the clear at %s", what, key)
		}
	}
}

// dpopWire is a transport that records each request an instance sends to
// the peer with a DPoP proof, and how the peer answered it.
type dpopWire struct {
	mu    sync.Mutex
	calls []dpopCall
}

type dpopCall struct {
	method, path string
	nonce        string // the nonce the proof carried
	status       int
	challenge    string // the nonce of a use_dpop_nonce answer, "" for any other
}

func (w *dpopWire) RoundTrip(req *http.Request) (*http.Response, error) {
	proof := req.Header.Get("DPoP")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || proof == "" {
		return resp, err
	}
	call := dpopCall{method: req.Method, path: req.URL.Path, nonce: proofNonce(proof), status: resp.StatusCode}
	if useNonce(resp) {
		call.challenge = resp.Header.Get("DPoP-Nonce")
	}
	w.mu.Lock()
	w.calls = append(w.calls, call)
	w.mu.Unlock()
	return resp, nil
}

// useNonce reports whether resp is a use_dpop_nonce challenge: a token
// endpoint's error (400, RFC 9449 §8) or a resource's (401, §9). It leaves
// the body readable.
func useNonce(resp *http.Response) bool {
	if resp.StatusCode == http.StatusUnauthorized {
		return strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="use_dpop_nonce"`)
	}
	if resp.StatusCode != http.StatusBadRequest {
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var answer struct {
		Error string `json:"error"`
	}
	return json.Unmarshal(body, &answer) == nil && answer.Error == "use_dpop_nonce"
}

// proofNonce is the nonce claim of a proof, read without checking it.
func proofNonce(proof string) string {
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Nonce string `json:"nonce"`
	}
	_ = json.Unmarshal(payload, &claims)
	return claims.Nonce
}

// count is how many proofs were sent to method and path.
func (w *dpopWire) count(method, path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		if c.method == method && c.path == path {
			n++
		}
	}
	return n
}

// requireAnswered checks the peer challenged the instance's proofs want
// times, and that each challenge was answered by one retry with the nonce it
// gave, which the peer accepted; every other proof was accepted.
func (w *dpopWire) requireAnswered(t *testing.T, want int, instance string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	challenged := 0
	for i, c := range w.calls {
		if c.challenge == "" {
			require.True(t, c.status == http.StatusOK || c.status == http.StatusCreated, // 201: a PAR answer
				"%s: %s %s was refused (%d)", instance, c.method, c.path, c.status)
			continue
		}
		challenged++
		require.Less(t, i+1, len(w.calls), "%s: the challenge to %s %s got no retry", instance, c.method, c.path)
		retry := w.calls[i+1]
		require.Equal(t, c.path, retry.path, "%s: the retry follows its challenge", instance)
		require.Equal(t, c.challenge, retry.nonce, "%s: the retry carries the challenge's nonce", instance)
		require.Empty(t, retry.challenge, "%s: the retry is not challenged again", instance)
	}
	require.Equal(t, want, challenged, "%s: use_dpop_nonce challenges", instance)
}
