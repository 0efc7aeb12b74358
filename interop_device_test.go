package oauthflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/providers"
)

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

// newDeviceApp discovers the peer as provider "peer" for the device-only
// client (no redirect URL) and starts a Module on space.
func newDeviceApp(t *testing.T, peer *oidcpeer.Peer, space *deviceSpace) *deviceApp {
	t.Helper()
	p, err := providers.Discover(context.Background(), "peer", peer.Issuer(),
		providers.Credentials{ClientID: oidcpeer.DeviceBasicClient, ClientSecret: oidcpeer.DeviceBasicSecret})
	require.NoError(t, err)
	require.Equal(t, peer.DeviceAuthURL(), p.Config().DeviceAuthURL, "from device_authorization_endpoint")
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
		apps := []*deviceApp{newDeviceApp(t, peer, space), newDeviceApp(t, peer, space), newDeviceApp(t, peer, space)}
		codes := &deviceCodeSpy{}
		spyOn(t, apps[0], codes)
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
		a, b := newDeviceApp(t, peer, space), newDeviceApp(t, peer, space)
		codes := &deviceCodeSpy{}
		spyOn(t, a, codes)
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

// spyOn has app's provider note the device codes it is given.
func spyOn(t *testing.T, app *deviceApp, spy *deviceCodeSpy) {
	t.Helper()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(&spyingDevice{deviceProvider: mustGet(t, app.mod.Registry, "peer").(deviceProvider), spy: spy}))
	app.mod.Registry = reg
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
