package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// deviceEnv is a flowEnv whose demo provider offers the device grant, on a
// clock the test moves: the server's and every replica's. Polls happen only
// when the test runs a worker pass (WorkOnce).
type deviceEnv struct {
	*flowEnv
	clock *fakeclock.Clock
}

const deviceInterval = 5 * time.Second // the test server's interval

func newDeviceEnv(t *testing.T, o envOptions) *deviceEnv {
	t.Helper()
	clock := fakeclock.New(time.Now()) // near the real clock, which DPoP proofs are dated by
	o.device = true
	o.as.Now, o.as.DeviceInterval = clock.Now, deviceInterval
	next := o.config
	o.config = func(c *oauthflow.Config) {
		c.Now, c.WorkerInterval = clock.Now, time.Hour // no tick: the test runs the passes
		if next != nil {
			next(c)
		}
	}
	return &deviceEnv{flowEnv: newFlowEnv(t, o), clock: clock}
}

// withDemo is a Config hook: the registry holds wrap(demo) as "demo", in
// place of the demo provider itself.
func withDemo(t *testing.T, wrap func(demo oauthflow.Provider) oauthflow.Provider) func(*oauthflow.Config) {
	t.Helper()
	return func(c *oauthflow.Config) {
		p := wrap(mustGet(t, c.Registry, "demo"))
		c.Registry = oauthflow.NewRegistry()
		require.NoError(t, c.Registry.Register(p))
	}
}

// startDevice starts a device sign-in for user on replica i.
func (env *deviceEnv) startDevice(i int, user string) (*oauthflow.Run, *oauthflow.OAuthPromptDocument) {
	env.t.Helper()
	r, doc, err := env.mod(i).StartDeviceSignIn(context.Background(), user, "demo")
	require.NoError(env.t, err)
	require.NotEmpty(env.t, doc.UserCode)
	return r, doc
}

// pass moves the clock by d and runs a worker pass on replica i.
func (env *deviceEnv) pass(i int, d time.Duration) {
	env.clock.Advance(d)
	oauthflow.WorkOnce(context.Background(), env.mod(i))
}

// passAll moves the clock by d and runs a worker pass on every replica at once.
func (env *deviceEnv) passAll(d time.Duration) {
	env.clock.Advance(d)
	var wg sync.WaitGroup
	for _, rep := range env.replicas {
		wg.Go(func() { oauthflow.WorkOnce(context.Background(), rep.mod) })
	}
	waitfor.Group(env.t, &wg, "the replicas' worker passes")
}

func (env *deviceEnv) polls() int64 { return env.as.Stats().DevicePolls }

func TestDeviceSignInApproved(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{})
	r, doc := env.startDevice(0, "alice")
	assert.Equal(t, oauthflow.RunWaiting, r.Status)
	assert.Equal(t, oauthflow.PromptPending, doc.Status)
	assert.Equal(t, env.as.DeviceURL(), doc.VerificationURI, "shown as the server gave it")
	assert.True(t, strings.HasPrefix(doc.VerificationURIComplete, env.as.DeviceURL()+"?"), doc.VerificationURIComplete)
	assert.Equal(t, env.clock.Now().Add(authserver.DefaultDeviceCodeTTL).UnixMilli(), doc.ExpiresAt)
	assert.Empty(t, doc.AuthURL)
	assert.Empty(t, doc.State)

	env.pass(0, deviceInterval-time.Second)
	assert.Zero(t, env.polls(), "no poll before the interval")
	env.pass(0, time.Second)
	assert.EqualValues(t, 1, env.polls())
	assert.EqualValues(t, 1, env.as.Stats().DevicePending)
	assert.Equal(t, oauthflow.PromptPending, env.prompt(r.ID).Status)

	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(0, deviceInterval)
	require.EqualValues(t, 2, env.polls())
	r = env.run(r.ID)
	assert.Equal(t, oauthflow.RunCompleted, r.Status)
	assert.JSONEq(t, `{"authenticated":true}`, string(r.Result))
	assert.Equal(t, oauthflow.PromptSuccess, env.prompt(r.ID).Status)
	_, connected := env.events.last(oauthflow.EventConnected)
	assert.True(t, connected)

	tok, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
	require.NoError(t, err)
	assert.NotEmpty(t, tok)
	conns, err := env.mod(0).Tokens.Connections(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, conns, 1, "listed like any other connection")
	assert.Equal(t, "demo", conns[0].ProviderID)

	for range 3 {
		env.pass(0, time.Minute)
	}
	assert.EqualValues(t, 2, env.polls(), "the code is redeemed once: polling stops at the first final answer")
	assert.Zero(t, env.as.Stats().DeviceRedeemedPolls)
}

func TestDeviceSignInDenied(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{})
	r, doc := env.startDevice(0, "alice")
	require.NoError(t, env.as.DenyDevice(doc.UserCode))
	env.pass(0, deviceInterval)
	r = env.run(r.ID)
	assert.Equal(t, oauthflow.RunFailed, r.Status)
	assert.JSONEq(t, `{"authenticated":false}`, string(r.Result))
	p := env.prompt(r.ID)
	assert.Equal(t, oauthflow.PromptError, p.Status)
	assert.Equal(t, "The sign-in was denied.", p.Message)
	env.pass(0, time.Minute)
	assert.EqualValues(t, 1, env.polls(), "a denial ends the polling")
}

func TestDeviceSignInExpires(t *testing.T) {
	t.Parallel()
	t.Run("the server says expired_token", func(t *testing.T) {
		t.Parallel()
		env := newDeviceEnv(t, envOptions{})
		r, _ := env.startDevice(0, "alice")
		env.pass(0, deviceInterval)
		env.as.FailNext(authserver.Failure{Grant: authserver.GrantDeviceCode, Error: "expired_token"})
		env.pass(0, deviceInterval)
		require.EqualValues(t, 2, env.polls(), "the server said it, before the code's lifetime by our clock")
		p := env.prompt(r.ID)
		assert.Equal(t, oauthflow.PromptError, p.Status)
		assert.Equal(t, "The sign-in code expired. Start the sign-in again.", p.Message)
		assert.Equal(t, oauthflow.RunFailed, env.run(r.ID).Status)
	})
	t.Run("the code's lifetime passes while the server is down", func(t *testing.T) {
		t.Parallel()
		env := newDeviceEnv(t, envOptions{as: authserver.Options{DeviceCodeTTL: 20 * time.Second}})
		r, _ := env.startDevice(0, "alice")
		for range 10 {
			env.as.FailNext(authserver.Failure{Grant: authserver.GrantDeviceCode, Status: 503})
		}
		for range 8 {
			env.pass(0, deviceInterval)
		}
		p := env.prompt(r.ID)
		assert.Equal(t, oauthflow.PromptError, p.Status)
		assert.Contains(t, p.Message, "expired")
	})
}

// The code's expiry ends the sign-in whichever of its two due entries is
// lost (a store that dropped it, say): the lapse, or the poll, which then
// does not send the dead code.
func TestDeviceSignInEndsAtExpiryWhateverIsLost(t *testing.T) {
	t.Parallel()
	for _, lost := range []string{"lapse", "device"} {
		t.Run(lost, func(t *testing.T) {
			t.Parallel()
			env := newDeviceEnv(t, envOptions{as: authserver.Options{DeviceCodeTTL: 30 * time.Second}})
			r, _ := env.startDevice(0, "alice")
			env.pass(0, deviceInterval)
			require.EqualValues(t, 1, env.polls())
			require.NoError(t, env.kv.Unschedule(context.Background(), "oauth:sys:due", lost+":"+r.ID))
			env.clock.Advance(time.Minute)
			if lost == "lapse" {
				// The poll's entry is due long since: a poll that had not
				// heard of the lapse would send the dead code.
				require.NoError(t, env.kv.Schedule(context.Background(), "oauth:sys:due", "device:"+r.ID, env.clock.Now()))
			}
			env.pass(0, 0)
			p := env.prompt(r.ID)
			assert.Equal(t, oauthflow.PromptError, p.Status)
			assert.Equal(t, "The sign-in code expired. Start the sign-in again.", p.Message)
			assert.EqualValues(t, 1, env.polls(), "a dead code is not sent")
		})
	}
}

// A device code is polled for an hour at most, whatever lifetime the server
// names (RFC 8628 §3.2 expires_in): ten days would keep a sign-in pending,
// and its code polled, for days.
func TestDeviceSignInLifetimeCappedAtAnHour(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{as: authserver.Options{DeviceCodeTTL: 10 * 24 * time.Hour}})
	r, doc := env.startDevice(0, "alice")
	assert.Equal(t, env.clock.Now().Add(time.Hour).UnixMilli(), doc.ExpiresAt, "an hour ahead, not ten days")
	env.pass(0, deviceInterval)
	require.EqualValues(t, 1, env.polls())
	env.pass(0, time.Hour)
	r = env.run(r.ID)
	assert.Equal(t, oauthflow.RunFailed, r.Status)
	p := env.prompt(r.ID)
	assert.Equal(t, oauthflow.PromptError, p.Status)
	assert.Equal(t, "The sign-in code expired. Start the sign-in again.", p.Message)
	for range 3 {
		env.pass(0, time.Hour)
	}
	assert.EqualValues(t, 1, env.polls(), "no poll reaches the token endpoint past the hour")
}

// A server that names no lifetime is not taken to mean "expired at once".
func TestDeviceSignInWithoutExpiresIn(t *testing.T) {
	t.Parallel()
	demo := &answeringDevice{auth: oauthflow.DeviceAuthorization{
		DeviceCode: "dc", UserCode: "ABCD-EFGH", VerificationURI: "https://example.com/device"}}
	env := newDeviceEnv(t, envOptions{config: withDemo(t, demo.wrap)})
	_, doc, err := env.mod(0).StartDeviceSignIn(context.Background(), "alice", "demo")
	require.NoError(t, err)
	assert.Equal(t, env.clock.Now().Add(10*time.Minute).UnixMilli(), doc.ExpiresAt, "the sign-in's own lifetime")
}

// answeringDevice is a provider whose device authorization answer is auth.
type answeringDevice struct {
	oauthflow.Provider
	auth oauthflow.DeviceAuthorization
}

// wrap answers for demo.
func (a *answeringDevice) wrap(demo oauthflow.Provider) oauthflow.Provider {
	a.Provider = demo
	return a
}

func (*answeringDevice) SupportsDeviceAuth() bool { return true }
func (a *answeringDevice) DeviceAuth(context.Context, []string) (*oauthflow.DeviceAuthorization, error) {
	auth := a.auth
	return &auth, nil
}
func (*answeringDevice) DeviceToken(context.Context, string) (*oauthflow.TokenSet, error) {
	return nil, &oauthflow.ProviderError{ProviderID: "demo", Code: "authorization_pending"}
}

func TestDeviceSignInRefusesWhatCannotBeShown(t *testing.T) {
	t.Parallel()
	dev := &answeringDevice{}
	env := newDeviceEnv(t, envOptions{config: withDemo(t, dev.wrap)})
	m := env.mod(0)
	for name, auth := range map[string]oauthflow.DeviceAuthorization{
		"script URI":        {DeviceCode: "dc", UserCode: "ABCD", VerificationURI: "javascript:alert(1)"},
		"script complete":   {DeviceCode: "dc", UserCode: "ABCD", VerificationURI: "https://x.example/d", VerificationURIComplete: "data:text/html,x"},
		"no device code":    {UserCode: "ABCD", VerificationURI: "https://x.example/d"},
		"no user code":      {DeviceCode: "dc", VerificationURI: "https://x.example/d"},
		"control in code":   {DeviceCode: "dc", UserCode: "AB\nCD", VerificationURI: "https://x.example/d"},
		"C1 in code":        {DeviceCode: "dc", UserCode: "AB\u009bCD", VerificationURI: "https://x.example/d"},
		"bidi in code":      {DeviceCode: "dc", UserCode: "AB\u202eCD", VerificationURI: "https://x.example/d"},
		"bidi in URI":       {DeviceCode: "dc", UserCode: "ABCD", VerificationURI: "https://x.example/\u202elpmaxe.live"},
		"C1 in complete":    {DeviceCode: "dc", UserCode: "ABCD", VerificationURI: "https://x.example/d", VerificationURIComplete: "https://x.example/d?\u009b"},
		"relative URI":      {DeviceCode: "dc", UserCode: "ABCD", VerificationURI: "/device"},
		"a page of a code":  {DeviceCode: "dc", UserCode: strings.Repeat("A", 65), VerificationURI: "https://x.example/d"},
		"a novel of a link": {DeviceCode: "dc", UserCode: "ABCD", VerificationURI: "https://x.example/" + strings.Repeat("d", 2048)},
	} {
		dev.auth = auth
		r, doc, err := m.StartDeviceSignIn(context.Background(), "alice", "demo")
		require.Error(t, err, name)
		assert.Nil(t, doc, name)
		require.NotNil(t, r, name)
		assert.Equal(t, oauthflow.RunFailed, r.Status, name)
	}
}

func TestDeviceSignInSlowDownIsDurable(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{replicas: 2})
	r, doc := env.startDevice(0, "alice")
	env.as.SlowDownNext()
	env.pass(0, deviceInterval)
	require.EqualValues(t, 1, env.as.Stats().DeviceSlowDowns)

	// The other replica carries on, at the interval the server raised.
	env.pass(1, deviceInterval)
	assert.EqualValues(t, 1, env.polls(), "slow_down added 5 s")
	env.pass(1, slowDownStep)
	assert.EqualValues(t, 2, env.polls())
	env.pass(1, deviceInterval)
	assert.EqualValues(t, 2, env.polls(), "for good: after a pending answer too")
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(1, slowDownStep)
	assert.EqualValues(t, 3, env.polls())
	assert.Equal(t, oauthflow.RunCompleted, env.run(r.ID).Status)
	gap, ok := env.as.DevicePollGap()
	require.True(t, ok)
	assert.GreaterOrEqual(t, gap, deviceInterval+slowDownStep)
	assert.EqualValues(t, 1, env.as.Stats().DeviceSlowDowns, "never polled too soon after it")
}

const slowDownStep = 5 * time.Second

func TestDeviceSignInRidesOutTransientFailures(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{})
	r, doc := env.startDevice(0, "alice")
	env.as.FailNext(authserver.Failure{Grant: authserver.GrantDeviceCode, Status: 503},
		authserver.Failure{Grant: authserver.GrantDeviceCode, Status: 429, Error: "slow_down_please"},
		authserver.Failure{Grant: authserver.GrantDeviceCode, Status: 502, Body: "<html>bad gateway</html>"})
	env.pass(0, deviceInterval)
	require.EqualValues(t, 1, env.polls())
	env.pass(0, deviceInterval-time.Second)
	assert.EqualValues(t, 1, env.polls(), "a backoff never polls sooner than the interval")
	for range 2 {
		env.pass(0, time.Minute) // the backoff is at most a minute
	}
	require.EqualValues(t, 3, env.polls())
	assert.Equal(t, oauthflow.RunWaiting, env.run(r.ID).Status, "a transient failure never ends the sign-in")
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(0, time.Minute)
	assert.Equal(t, oauthflow.RunCompleted, env.run(r.ID).Status)
}

func TestDeviceSignInOtherRefusalEndsIt(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{})
	r, _ := env.startDevice(0, "alice")
	env.as.FailNext(authserver.Failure{Grant: authserver.GrantDeviceCode, Error: "invalid_client"})
	env.pass(0, deviceInterval)
	r = env.run(r.ID)
	assert.Equal(t, oauthflow.RunFailed, r.Status)
	assert.Contains(t, env.prompt(r.ID).Message, "invalid_client")
}

// Work claimed early (a lease that lapsed under a paused instance, a stale
// entry) never polls sooner than the interval since the last poll.
func TestDeviceSignInNeverPollsSoonerThanTheInterval(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{})
	r, _ := env.startDevice(0, "alice")
	env.pass(0, deviceInterval)
	require.EqualValues(t, 1, env.polls())
	ctx := context.Background()
	require.NoError(t, env.kv.Schedule(ctx, "oauth:sys:due", "device:"+r.ID, env.clock.Now()))
	env.pass(0, time.Second)
	assert.EqualValues(t, 1, env.polls(), "due again at once, yet the interval has not passed")
	env.pass(0, deviceInterval)
	assert.EqualValues(t, 2, env.polls(), "and the poll still comes when it is due")
}

func TestDeviceSignInTwoInstancesPollOnce(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{replicas: 3})
	r, doc := env.startDevice(0, "alice")
	for round := range 4 {
		env.passAll(deviceInterval)
		assert.EqualValues(t, round+1, env.polls(), "one poll per interval between three instances")
	}
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.passAll(deviceInterval)
	assert.EqualValues(t, 1, env.as.Stats().DeviceTokens)
	assert.Zero(t, env.as.Stats().DeviceRedeemedPolls, "redeemed once")
	assert.Zero(t, env.as.Stats().DeviceSlowDowns)
	assert.Equal(t, oauthflow.RunCompleted, env.run(r.ID).Status)
}

// An instance that started a sign-in and closed leaves its polls to the others.
func TestDeviceSignInOutlivesItsInstance(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{replicas: 2})
	r, doc := env.startDevice(0, "alice")
	require.NoError(t, env.mod(0).Close())
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(1, deviceInterval)
	assert.Equal(t, oauthflow.RunCompleted, env.run(r.ID).Status)
}

// An approval the provider has answered with tokens is the server's to
// finish, whatever stops the worker: the code is spent (RFC 8628 §3.5), so
// tokens dropped by a Close are a sign-in lost. Close stops the worker
// while the token endpoint's answer is in hand, and waits for the
// completion: the record is stored, the run and the prompt end as success.
func TestDeviceApprovalOutlivesClose(t *testing.T) {
	t.Parallel()
	held := &heldDevice{answered: make(chan struct{}), release: make(chan struct{})}
	env := newDeviceEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.WorkerInterval = 5 * time.Millisecond // the worker's own passes, under the context Close cancels
		held.DeviceAuthorizer = mustGet(t, c.Registry, "demo").(oauthflow.DeviceAuthorizer)
		held.Provider = mustGet(t, c.Registry, "demo")
		c.Registry = oauthflow.NewRegistry()
		require.NoError(t, c.Registry.Register(held))
	}})
	m := env.mod(0)
	r, doc := env.startDevice(0, "alice")
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.clock.Advance(deviceInterval)
	waitfor.Recv(t, held.answered, "the token endpoint's answer")
	oauthflow.StopWork(m) // Close's first step: the worker's context ends
	close(held.release)
	require.NoError(t, m.Close())

	assert.EqualValues(t, 1, env.as.Stats().DeviceTokens, "the code was redeemed once")
	if tok, err := m.Tokens.GetTokens(context.Background(), "alice", "demo"); assert.NoError(t, err, "the tokens are stored") {
		assert.NotEmpty(t, tok.AccessToken)
	}
	r = env.run(r.ID)
	assert.Equal(t, oauthflow.RunCompleted, r.Status)
	assert.JSONEq(t, `{"authenticated":true}`, string(r.Result))
	assert.Equal(t, oauthflow.PromptSuccess, env.prompt(r.ID).Status)
	_, connected := env.events.last(oauthflow.EventConnected)
	assert.True(t, connected)
	_, failed := env.events.last(oauthflow.EventFlowFailed)
	assert.False(t, failed)
}

// A store blip at the token write of a device approval loses nothing: the
// provider has redeemed the code (RFC 8628 §3.5), so the write is tried
// again until it lands, and the sign-in ends connected.
func TestDeviceApprovalSurvivesAStoreBlip(t *testing.T) {
	t.Parallel()
	kv := &blipKV{KV: sharedRedisAny(t)}
	env := newDeviceEnv(t, envOptions{kv: kv})
	r, doc := env.startDevice(0, "alice")
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	kv.key.Store("oauth:alice:demo")
	kv.fails.Store(2)
	env.pass(0, deviceInterval)
	assert.EqualValues(t, 1, env.as.Stats().DeviceTokens, "the code was redeemed once")
	assert.EqualValues(t, -1, kv.fails.Load(), "three writes: two failed, the third landed")
	if tok, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo"); assert.NoError(t, err, "the tokens are stored") {
		assert.NotEmpty(t, tok.AccessToken)
	}
	r = env.run(r.ID)
	assert.Equal(t, oauthflow.RunCompleted, r.Status)
	assert.JSONEq(t, `{"authenticated":true}`, string(r.Result))
	assert.Equal(t, oauthflow.PromptSuccess, env.prompt(r.ID).Status)
}

// heldDevice is a device provider that holds the token endpoint's first
// answer with tokens until release.
type heldDevice struct {
	oauthflow.Provider
	oauthflow.DeviceAuthorizer
	answered, release chan struct{}
	once              sync.Once
}

func (h *heldDevice) DeviceToken(ctx context.Context, code string) (*oauthflow.TokenSet, error) {
	ts, err := h.DeviceAuthorizer.DeviceToken(ctx, code)
	if err == nil {
		h.once.Do(func() { close(h.answered) })
		if _, werr := waitfor.RecvErr(h.release, "the test's release"); werr != nil {
			return nil, werr
		}
	}
	return ts, err
}

func TestDeviceSignInResumesTheConsumer(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{replicas: 2})
	for _, rep := range env.replicas {
		require.NoError(t, rep.mod.Engine.Register(reposWorkflowWith(listReposTool(rep.mod, env.as.APIURL()),
			oauthflow.OAuthWorkflowArgs{Provider: "demo", Grant: oauthflow.GrantDevice})))
	}
	parent, err := env.mod(0).Engine.Launch(context.Background(), "alice", "repos", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, oauthflow.StateAwaitingAuth, parent.State)
	doc := env.prompt(parent.Children[0])
	require.NotEmpty(t, doc.UserCode, "the child's prompt is a device sign-in's")
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(1, deviceInterval)
	parent = env.run(parent.ID)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status, "the callback resumed the parent and the tool succeeded")
	var repos []authserver.Repo
	require.NoError(t, json.Unmarshal(parent.Result, &repos))
	assert.NotEmpty(t, repos)
}

func TestDeviceSignInBoundWithDPoP(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{dpop: true, as: authserver.Options{DPoP: true}, demo: func(c *providers.Config) {
		c.UserinfoURL, c.AccountField = strings.TrimSuffix(c.AuthURL, authserver.PathAuthorize)+authserver.PathAPI, "user"
	}})
	r, doc := env.startDevice(0, "alice")
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(0, deviceInterval)
	require.Equal(t, oauthflow.RunCompleted, env.run(r.ID).Status, env.prompt(r.ID).Message)
	rec, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
	require.NoError(t, err)
	assert.Equal(t, "DPoP", rec.TokenType)
	assert.NotEmpty(t, rec.Account, "the account read with a proof of the key the poll proved")
	assert.Equal(t, rec.Account, env.prompt(r.ID).Account, "and the prompt says who is connected")
	assert.NotEmpty(t, rec.DPoPKey)
	resp, err := env.mod(0).Tokens.Client(context.Background(), "alice", "demo").Get(env.as.APIURL())
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, 200, resp.StatusCode, "the token works with the proofs of the key the poll proved")
}

// The device code is a secret: sealed in the run when encryption is on.
func TestDeviceSignInSealsTheDeviceCode(t *testing.T) {
	t.Parallel()
	ring := keyRing(t, newKey(t, "k1"))
	codes := &deviceCodeSpy{}
	spying := withDemo(t, func(demo oauthflow.Provider) oauthflow.Provider {
		return &spyingDevice{deviceProvider: demo.(deviceProvider), spy: codes}
	})
	env := newDeviceEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.Encryption = ring
		spying(c)
	}})
	r, doc := env.startDevice(0, "alice")
	require.NotEmpty(t, codes.code)
	raw, err := env.kv.Get(context.Background(), "oauth:run:"+r.ID)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), codes.code)
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(0, deviceInterval)
	assert.Equal(t, oauthflow.RunCompleted, env.run(r.ID).Status, "opened again for the poll")
}

type deviceProvider interface {
	oauthflow.Provider
	oauthflow.DeviceAuthorizer
}

type deviceCodeSpy struct{ code string }

// spyingDevice notes the device code its provider was given.
type spyingDevice struct {
	deviceProvider
	spy *deviceCodeSpy
}

func (s *spyingDevice) DeviceAuth(ctx context.Context, scopes []string) (*oauthflow.DeviceAuthorization, error) {
	a, err := s.deviceProvider.DeviceAuth(ctx, scopes)
	if a != nil {
		s.spy.code = a.DeviceCode
	}
	return a, err
}

func TestStartDeviceSignInRefusesAProviderWithoutIt(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	r, doc, err := env.mod(0).StartDeviceSignIn(context.Background(), "alice", "demo")
	assert.ErrorIs(t, err, oauthflow.ErrDeviceAuthUnsupported)
	assert.ErrorIs(t, err, errors.ErrUnsupported)
	assert.Nil(t, r, "refused before anything is created")
	assert.Nil(t, doc)
	_, _, err = env.mod(0).StartDeviceSignIn(context.Background(), "alice", "nope")
	assert.ErrorIs(t, err, oauthflow.ErrUnknownProvider)

	r, err = env.mod(0).Engine.Launch(context.Background(), "alice", oauthflow.OAuthWorkflowName,
		oauthflow.OAuthWorkflowArgs{Provider: "demo", Grant: "password"}, oauthflow.RunOptions{})
	require.Error(t, err)
	assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
	assert.Equal(t, oauthflow.RunFailed, r.Status)
}

// A provider used only for the device grant needs no redirect URL.
func TestDeviceOnlyProvider(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{})
	p, err := providers.NewOAuth2(providers.Config{ID: "headless", AuthURL: env.as.AuthURL(), TokenURL: env.as.TokenURL(),
		DeviceAuthURL: env.as.DeviceAuthorizationURL(), AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret"})
	require.NoError(t, err)
	m := env.mod(0)
	require.NoError(t, m.Registry.Register(p))
	r, doc, err := m.StartDeviceSignIn(context.Background(), "alice", "headless")
	require.NoError(t, err)
	require.NoError(t, env.as.ApproveDevice(doc.UserCode, "alice"))
	env.pass(0, deviceInterval)
	assert.Equal(t, oauthflow.RunCompleted, env.run(r.ID).Status)
	_, _, err = m.StartSignIn(context.Background(), "alice", "headless")
	assert.Error(t, err, "no redirect URL: no browser sign-in")
}

func mustGet(t *testing.T, r *oauthflow.Registry, id string) oauthflow.Provider {
	t.Helper()
	p, err := r.Get(id)
	require.NoError(t, err)
	return p
}

// An ended sign-in keeps only what its parent and its page still need: the
// run without its own state (the expected state, the sealed device code),
// the prompt without the spent link and its binding.
func TestEndedSignInKeepsOnlyWhatIsShown(t *testing.T) {
	t.Parallel()
	env := newDeviceEnv(t, envOptions{config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	r, doc := env.startSignIn(0, "alice")
	require.NotEmpty(t, doc.Binding)
	require.NotEmpty(t, env.run(r.ID).Data)
	status, _, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, 403, status, "a bound sign-in needs its cookie: the test completes it through the tool instead")
	_, err := env.mod(0).Engine.Fire(context.Background(), r.ID, "exchangeToken",
		map[string]string{"code": "nope", "state": doc.State}, "alice")
	require.Error(t, err)
	failed := env.run(r.ID)
	assert.Equal(t, oauthflow.RunFailed, failed.Status)
	assert.Empty(t, failed.Data, "a failed sign-in drops its own state")

	d, code := env.startDevice(0, "bob")
	require.NoError(t, env.as.ApproveDevice(code.UserCode, "bob"))
	env.pass(0, deviceInterval)
	done := env.run(d.ID)
	require.Equal(t, oauthflow.RunCompleted, done.Status)
	assert.Empty(t, done.Data, "the sealed device code is gone with the run's state")
	assert.JSONEq(t, `{"authenticated":true}`, string(done.Result))
}

// The prompt of a device sign-in carries the complete verification URI (the
// terminal prints it, the widget draws it as a QR code) only where it is on
// the origin of the verification URI the user reads, over https, or over
// http on a loopback address in development; otherwise it is left out, and
// the user opens the verification URI and types the code.
func TestDevicePromptCompleteURIOnlyOnTheVerificationOrigin(t *testing.T) {
	t.Parallel()
	dev := &answeringDevice{}
	env := newDeviceEnv(t, envOptions{config: withDemo(t, dev.wrap)})
	m := env.mod(0)
	for _, tc := range []struct {
		name, uri, complete string
		kept                bool
	}{
		{"same origin", "https://x.example/d", "https://x.example/d?user_code=ABCD", true},
		{"host in capitals", "https://x.example/d", "https://X.EXAMPLE/d?user_code=ABCD", true},
		{"default port named", "https://x.example/d", "https://x.example:443/d?user_code=ABCD", true},
		{"loopback http", "http://127.0.0.1:8080/d", "http://127.0.0.1:8080/d?user_code=ABCD", true},
		{"localhost http", "http://localhost:8080/d", "http://localhost:8080/d?user_code=ABCD", true},
		{"another host", "https://x.example/d", "https://evil.example/d?user_code=ABCD", false},
		{"a subdomain", "https://x.example/d", "https://x.example.evil.example/d?user_code=ABCD", false},
		{"userinfo", "https://x.example/d", "https://x.example@evil.example/d?user_code=ABCD", false},
		{"another port", "https://x.example/d", "https://x.example:8443/d?user_code=ABCD", false},
		{"http beside https", "https://x.example/d", "http://x.example/d?user_code=ABCD", false},
		{"http, not loopback", "http://x.example/d", "http://x.example/d?user_code=ABCD", false},
		{"loopback, another port", "http://127.0.0.1:8080/d", "http://127.0.0.1:9090/d?user_code=ABCD", false},
	} {
		dev.auth = oauthflow.DeviceAuthorization{
			DeviceCode: "dc", UserCode: "ABCD", VerificationURI: tc.uri, VerificationURIComplete: tc.complete}
		_, doc, err := m.StartDeviceSignIn(context.Background(), "alice", "demo")
		require.NoError(t, err, tc.name)
		assert.Equal(t, tc.uri, doc.VerificationURI, tc.name)
		want := ""
		if tc.kept {
			want = tc.complete
		}
		assert.Equal(t, want, doc.VerificationURIComplete, tc.name)
	}
}
