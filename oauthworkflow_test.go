package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// signInChild completes the sign-in the run waits for, as the user's browser.
func signInChild(t *testing.T, env *flowEnv, run *oauthflow.Run) {
	t.Helper()
	require.Equal(t, oauthflow.StateAwaitingAuth, run.State, "the run waits for a sign-in: %s", run.Result)
	doc := env.prompt(run.Children[len(run.Children)-1])
	status, _, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusOK, status)
}

// ToolWorkflow is the agent pattern ready made: the tool's "unauthorized"
// runs a sign-in, after which the tool runs again and its answer is the
// result; a tool still unauthorized after two completed sign-ins ends the
// run with its answer instead of a third.
func TestToolWorkflow(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	require.NoError(t, m.Engine.Register(oauthflow.ToolWorkflow("repos", listReposTool(m, env.as.APIURL()), "demo")))
	never := oauthflow.NewTool("never", "Always unauthorized.", oauthflow.Schema{Type: "object"},
		func(context.Context, oauthflow.ToolContext, struct{}) (any, error) { return nil, oauthflow.ErrNoToken })
	require.NoError(t, m.Engine.Register(oauthflow.ToolWorkflow("never", never, "demo")))
	ctx := context.Background()

	run, err := m.Engine.Launch(ctx, "alice", "repos", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	signInChild(t, env, run)
	run = env.run(run.ID)
	require.Equal(t, oauthflow.RunCompleted, run.Status)
	var repos []authserver.Repo
	require.NoError(t, json.Unmarshal(run.Result, &repos))
	assert.NotEmpty(t, repos, "the tool ran again after the sign-in")

	run, err = m.Engine.Launch(ctx, "bob", "never", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	signInChild(t, env, run)
	signInChild(t, env, env.run(run.ID))
	run = env.run(run.ID)
	assert.Equal(t, oauthflow.RunCompleted, run.Status)
	assert.Len(t, run.Children, 2, "two sign-ins, not a third")
	_, unauthorized := oauthflow.UnauthorizedResult(run.Result)
	assert.True(t, unauthorized, "%s", run.Result)
}

// hookedProvider runs hook once the provider has answered the code exchange.
type hookedProvider struct {
	*fakeProvider
	hook func()
}

func (p *hookedProvider) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	ts, err := p.fakeProvider.ExchangeCode(ctx, code, opts...)
	p.hook()
	return ts, err
}

// signInFixture is a Module on the real Redis with a parent workflow "agent"
// that launches the oauth workflow for provider "acme" and waits for it.
type signInFixture struct {
	m      *oauthflow.Module
	parent *oauthflow.Run
	child  string
	prompt oauthflow.OAuthPromptDocument
}

func newSignInFixture(t *testing.T, prov oauthflow.Provider, logs ...*lockedWriter) *signInFixture {
	t.Helper()
	cfg := oauthflow.Config{Logger: slog.New(slog.DiscardHandler)}
	if len(logs) > 0 {
		cfg.Logger = slog.New(slog.NewTextHandler(logs[0], nil))
	}
	return newSignInFixtureWith(t, prov, cfg)
}

// newSignInFixtureWith is newSignInFixture with cfg (the real Redis unless cfg.KV is set).
func newSignInFixtureWith(t *testing.T, prov oauthflow.Provider, cfg oauthflow.Config) *signInFixture {
	t.Helper()
	if cfg.KV == nil {
		cfg.KV = sharedRedis(t, true)
	}
	m := newAgentModule(t, prov, cfg)
	f := &signInFixture{m: m}
	var err error
	f.parent, err = m.Engine.Launch(ctx, "alice", "agent", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	require.Len(t, f.parent.Children, 1)
	f.child = f.parent.Children[0]
	require.NoError(t, m.Engine.Document(ctx, f.child, oauthflow.PromptDocumentName, &f.prompt))
	return f
}

// newAgentModule is a Module with provider prov and the workflow "agent", which
// launches the oauth workflow for provider "acme" and waits for it.
func newAgentModule(t *testing.T, prov oauthflow.Provider, cfg oauthflow.Config) *oauthflow.Module {
	t.Helper()
	m, err := oauthflow.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Registry.Register(prov))
	require.NoError(t, m.Engine.Register(&oauthflow.Workflow{
		Name:   "agent",
		States: []string{oauthflow.StateStart, oauthflow.StateAwaitingAuth, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "ask", From: oauthflow.StateStart, To: oauthflow.StateAwaitingAuth,
				Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
					_, err := tc.Launch(ctx, oauthflow.OAuthWorkflowName, oauthflow.OAuthWorkflowArgs{Provider: "acme"},
						oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "authCompleted"}})
					return err
				}},
			{Name: "authCompleted", From: oauthflow.StateAwaitingAuth, To: oauthflow.StateEnd, Wait: true,
				Do: func(_ context.Context, tc *oauthflow.TransitionContext) error { return tc.SetResult(tc.Input) }},
		},
	}))
	return m
}

// assertConnected checks the whole promise of a finished sign-in: tokens
// stored, the oauth run ended authenticated, the prompt says success, and the
// parent resumed with the child's result.
func (f *signInFixture) assertConnected(t *testing.T) {
	t.Helper()
	tok, err := f.m.Tokens.GetValidAccessToken(ctx, "alice", "acme")
	require.NoError(t, err, "the tokens are stored")
	assert.Equal(t, "from-code", tok)
	child, err := f.m.Engine.Get(ctx, f.child)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, child.Status)
	assert.JSONEq(t, `{"authenticated":true}`, string(child.Result))
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, f.m.Engine.Document(ctx, f.child, oauthflow.PromptDocumentName, &prompt))
	assert.Equal(t, oauthflow.PromptSuccess, prompt.Status)
	parent, err := f.m.Engine.Get(ctx, f.parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status, "the parent resumed")
	var res oauthflow.ChildResult
	require.NoError(t, json.Unmarshal(parent.Result, &res))
	assert.Equal(t, f.child, res.RunID)
	assert.Equal(t, oauthflow.RunCompleted, res.Status)
}

// The browser goes away after the provider redeemed the code: the server
// finishes the sign-in all the same.
func TestCallbackCompletesAfterTheClientLeft(t *testing.T) {
	t.Parallel()
	for _, endpoint := range []string{"callback", "complete"} {
		t.Run(endpoint, func(t *testing.T) {
			t.Parallel()
			reqCtx, leave := context.WithCancel(ctx)
			defer leave()
			f := newSignInFixture(t, &hookedProvider{fakeProvider: newFakeProvider("acme"), hook: leave})
			var req *http.Request
			var h http.Handler
			if endpoint == "callback" {
				req, h = httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil), f.m.CallbackHandler()
			} else {
				req, h = jsonRequest(oauthflow.CompletePath, `{"code":"c","state":"`+f.prompt.State+`"}`), f.m.CompleteHandler()
			}
			h.ServeHTTP(httptest.NewRecorder(), req.WithContext(reqCtx))
			require.Error(t, reqCtx.Err(), "the client left while the provider answered")
			f.assertConnected(t)
		})
	}
}

// A provider's denial is said once (the page, widget and terminal give the
// heading), an overlong description is cut, and the log names it a redirect.
func TestDenialIsSaidOnce(t *testing.T) {
	t.Parallel()
	logs := &lockedWriter{w: &bytes.Buffer{}}
	f := newSignInFixture(t, newFakeProvider("acme"), logs)
	for _, tt := range []struct{ description, want string }{
		{"", "Access was denied."},
		{"The user said no", "The user said no"},
		{strings.Repeat("x", 4000), strings.Repeat("x", 300) + "…"},
	} {
		q := url.Values{"error": {"access_denied"}, "error_description": {tt.description}, "state": {f.prompt.State}}
		rec := httptest.NewRecorder()
		f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?"+q.Encode(), nil))
		assert.Equal(t, http.StatusBadRequest, rec.Code)
		body := rec.Body.String()
		assert.NotContains(t, body, "Sign-in not completed:", "the heading is said once")
		assert.NotContains(t, body, strings.Repeat("x", 301), "an overlong description is cut")
		var prompt oauthflow.OAuthPromptDocument
		require.NoError(t, f.m.Engine.Document(ctx, f.child, oauthflow.PromptDocumentName, &prompt))
		assert.Equal(t, oauthflow.PromptError, prompt.Status)
		assert.Equal(t, tt.want, prompt.Message)
	}
	assert.Contains(t, logs.String(), "redirected with error access_denied")
	assert.NotContains(t, logs.String(), "HTTP 0")
}

// exchangeCounter counts the provider's code exchanges.
func exchangeCounter() (*hookedProvider, *atomic.Int64) {
	var n atomic.Int64
	return &hookedProvider{fakeProvider: newFakeProvider("acme"), hook: func() { n.Add(1) }}, &n
}

// A sign-in nobody finishes lapses on its own: the run ends not authenticated,
// the prompt says the link expired, the parent resumes with status failed, and
// a late callback is refused without an exchange.
func TestSignInLapses(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	prov, exchanges := exchangeCounter()
	f := newSignInFixtureWith(t, prov, oauthflow.Config{Now: clock.Now, SignInTTL: 5 * time.Minute,
		WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	assert.Zero(t, oauthflow.WorkOnce(ctx, f.m), "nothing is due before the sign-in lapses")
	clock.Advance(5*time.Minute + time.Second)
	assert.Equal(t, 1, oauthflow.WorkOnce(ctx, f.m))
	f.assertLapsed(t)
	assert.Zero(t, oauthflow.WorkOnce(ctx, f.m), "the lapse is done once")

	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	assert.Equal(t, http.StatusBadRequest, rec.Code, "a late callback is refused")
	assert.Zero(t, exchanges.Load(), "a lapsed sign-in's code is never exchanged")
	f.assertLapsed(t)
}

// The worker does it with no call from anyone.
func TestSignInLapsesOnItsOwn(t *testing.T) {
	t.Parallel()
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{SignInTTL: 50 * time.Millisecond,
		WorkerInterval: 10 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		parent, err := f.m.Engine.Get(ctx, f.parent.ID)
		require.NoError(t, err)
		if parent.Status == oauthflow.RunCompleted {
			break
		}
		require.True(t, time.Now().Before(deadline), "the parent was not resumed within 10 s")
	}
	f.assertLapsed(t)
}

// A finished sign-in's lapse does nothing.
func TestSignInConnectedDoesNotLapse(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{Now: clock.Now, WorkerInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	clock.Advance(11 * time.Minute) // past the sign-in's 10 minutes, within the token's hour
	assert.Zero(t, oauthflow.WorkOnce(ctx, f.m), "a connected sign-in leaves no lapse behind")
	f.assertConnected(t)
}

func (f *signInFixture) assertLapsed(t *testing.T) {
	t.Helper()
	child, err := f.m.Engine.Get(ctx, f.child)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunFailed, child.Status)
	assert.JSONEq(t, `{"authenticated":false}`, string(child.Result))
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, f.m.Engine.Document(ctx, f.child, oauthflow.PromptDocumentName, &prompt))
	assert.Equal(t, oauthflow.PromptError, prompt.Status)
	assert.Contains(t, prompt.Message, "expired")
	parent, err := f.m.Engine.Get(ctx, f.parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status, "the parent resumed")
	var res oauthflow.ChildResult
	require.NoError(t, json.Unmarshal(parent.Result, &res))
	assert.Equal(t, oauthflow.RunFailed, res.Status)
}

// blipKV fails the next writes of one key: a store blip at the worst moment.
type blipKV struct {
	oauthflow.KV
	key   atomic.Value // string
	fails atomic.Int64
}

func (b *blipKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	if k, _ := b.key.Load().(string); k == key && b.fails.Add(-1) >= 0 {
		return errBlip
	}
	return b.KV.Set(ctx, key, v, ttl)
}

// A store blip at the token write of a code exchange loses nothing: the
// provider has spent the code, so the write is tried again until it lands,
// and the sign-in ends connected.
func TestSignInTokensSurviveAStoreBlip(t *testing.T) {
	t.Parallel()
	kv := &blipKV{KV: sharedRedis(t, true)}
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: kv, WorkerInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	kv.key.Store("oauth:alice:acme")
	kv.fails.Store(2)
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.EqualValues(t, -1, kv.fails.Load(), "three writes: two failed, the third landed")
	f.assertConnected(t)
}

// A store that stays down through the token write's retries ends the
// sign-in honestly within the completion's time: the write is tried more
// than once, then the run fails, the prompt says the service is unavailable
// and the parent resumes.
func TestSignInTokensWriteGivesUpWithinTheCompletion(t *testing.T) {
	t.Parallel()
	kv := &blipKV{KV: sharedRedis(t, true)}
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: kv, WorkerInterval: time.Hour,
		CompletionTimeout: 2 * time.Second, Logger: slog.New(slog.DiscardHandler)})
	kv.key.Store("oauth:alice:acme")
	kv.fails.Store(1 << 40)
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Less(t, kv.fails.Load(), int64(1<<40)-1, "the write was tried again")
	child, err := f.m.Engine.Get(ctx, f.child)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunFailed, child.Status)
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, f.m.Engine.Document(ctx, f.child, oauthflow.PromptDocumentName, &prompt))
	assert.Equal(t, oauthflow.PromptError, prompt.Status)
	assert.Contains(t, prompt.Message, "temporarily unavailable")
	parent, err := f.m.Engine.Get(ctx, f.parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status, "the parent resumed")
}

// pipedBlipKV sends a batch in one round trip, in order, as one Redis node
// does, and fails the next writes of one key in it: a store blip at the
// worst moment, while a sign-in's tokens go in the batch of its run's end.
type pipedBlipKV struct {
	oauthflow.KV
	key   string
	fails atomic.Int64
	first atomic.Pointer[[]string] // the keys of the first batch a write of key failed in
}

func (p *pipedBlipKV) Pipelines() bool { return true }

func (p *pipedBlipKV) RunInOrder(ctx context.Context, ops []*kv.Op) bool {
	var keys []string
	for _, op := range ops {
		keys = append(keys, op.Key)
		if op.Kind == kv.OpSet && op.Key == p.key && p.fails.Add(-1) >= 0 {
			p.first.CompareAndSwap(nil, &keys)
			op.Err = errBlip
			continue
		}
		op.Run(ctx, p.KV)
	}
	return true
}

// failedWith reports whether the first batch a write of p's key failed in
// also carried a write of key.
func (p *pipedBlipKV) failedWith(key string) bool {
	keys := p.first.Load()
	return keys != nil && slices.Contains(*keys, key)
}

// A sign-in's tokens that went with its run's end, in one batch, and failed
// there are written again: the sign-in ends connected, and the hook hears
// it once they are stored.
func TestSignInTokensSentWithTheRunsEndSurviveAStoreBlip(t *testing.T) {
	t.Parallel()
	store := &pipedBlipKV{KV: sharedRedis(t, true), key: "oauth:alice:acme"}
	events := &eventLog{}
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: store, WorkerInterval: time.Hour,
		OnEvent: events.hook, Logger: slog.New(slog.DiscardHandler)})
	store.fails.Store(1)
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	assert.EqualValues(t, -1, store.fails.Load(), "two writes: the batch's failed, the second landed")
	assert.True(t, store.failedWith("oauth:run:"+f.child), "the tokens went in the batch of the run's end")
	f.assertConnected(t)
	_, connected := events.last(oauthflow.EventConnected)
	assert.True(t, connected)
}

// Tokens that went with the run's end and cannot be written after it either
// fail the completion: the page says the service is unavailable, and the
// hook hears the flow failed, not connected.
func TestSignInTokensSentWithTheRunsEndThatNeverLandFailTheCompletion(t *testing.T) {
	t.Parallel()
	store := &pipedBlipKV{KV: sharedRedis(t, true), key: "oauth:alice:acme"}
	events := &eventLog{}
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: store, WorkerInterval: time.Hour,
		CompletionTimeout: 2 * time.Second, OnEvent: events.hook, Logger: slog.New(slog.DiscardHandler)})
	store.fails.Store(1 << 40)
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Less(t, store.fails.Load(), int64(1<<40)-1, "the write was tried again")
	assert.True(t, store.failedWith("oauth:run:"+f.child), "the tokens went in the batch of the run's end")
	_, err := f.m.Tokens.GetTokens(ctx, "alice", "acme")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)
	failed, ok := events.last(oauthflow.EventFlowFailed)
	require.True(t, ok, "the hook hears the flow failed")
	assert.ErrorIs(t, failed.Err, oauthflow.ErrStoreUnavailable)
	_, connected := events.last(oauthflow.EventConnected)
	assert.False(t, connected)
}

// The hook hears a sign-in connected once its tokens are stored: a hook
// that reads them then finds them.
func TestConnectedHeardOnceTheTokensAreStored(t *testing.T) {
	t.Parallel()
	var m atomic.Pointer[oauthflow.Module]
	read := make(chan error, 1)
	hook := func(ctx context.Context, e oauthflow.Event) {
		if e.Kind == oauthflow.EventConnected {
			_, err := m.Load().Tokens.GetTokens(ctx, e.UserID, e.ProviderID)
			read <- err
		}
	}
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{WorkerInterval: time.Hour,
		OnEvent: hook, Logger: slog.New(slog.DiscardHandler)})
	m.Store(f.m)
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	select {
	case err := <-read:
		assert.NoError(t, err, "the tokens, read when the hook heard the sign-in connected")
	default:
		t.Fatal("the hook did not hear the sign-in connected")
	}
}

// A parent whose first delivery fails is resumed by the worker, once.
func TestParentDeliveryRetriedUntilItLands(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	kv := &blipKV{KV: sharedRedis(t, true)}
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: kv, Now: clock.Now,
		WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	kv.key.Store("oauth:run:" + f.parent.ID)
	kv.fails.Store(1)
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	require.Equal(t, http.StatusOK, rec.Code, "the sign-in itself succeeded")
	parent, err := f.m.Engine.Get(ctx, f.parent.ID)
	require.NoError(t, err)
	require.Equal(t, oauthflow.RunWaiting, parent.Status, "the first delivery failed")

	assert.Equal(t, 1, oauthflow.WorkOnce(ctx, f.m), "the worker retries the delivery")
	f.assertConnected(t)
	assert.Zero(t, oauthflow.WorkOnce(ctx, f.m), "nothing is left to deliver")
}

// A delivery tried again after it landed changes nothing: the parent hears
// each child once, even when its callback leads back to the waiting state.
func TestParentHearsEachChildOnce(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	kv := sharedRedis(t, true)
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: kv, Now: clock.Now, WorkerInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	var heard atomic.Int64
	require.NoError(t, m.Engine.Register(&oauthflow.Workflow{Name: "child", States: []string{oauthflow.StateStart, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{{Name: "go", From: oauthflow.StateStart, To: oauthflow.StateEnd,
			Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }}}}))
	require.NoError(t, m.Engine.Register(&oauthflow.Workflow{Name: "parent", States: []string{oauthflow.StateStart, "waiting", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "spawn", From: oauthflow.StateStart, To: "waiting", Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				_, err := tc.Launch(ctx, "child", nil, oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "heard"}})
				return err
			}},
			{Name: "heard", From: "waiting", To: "waiting", Wait: true, Do: func(context.Context, *oauthflow.TransitionContext) error {
				heard.Add(1)
				return nil
			}},
		}}))
	parent, err := m.Engine.Launch(ctx, "alice", "parent", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 1, heard.Load())
	require.NoError(t, kv.Schedule(ctx, "oauth:sys:due", "deliver:"+parent.Children[0], clock.Now()))
	assert.Equal(t, 1, oauthflow.WorkOnce(ctx, m))
	assert.EqualValues(t, 1, heard.Load(), "a repeated delivery is ignored")
}

// A finished sign-in's run and prompt are kept for the finished-run TTL, not 30 days.
func TestFinishedSignInExpires(t *testing.T) {
	t.Parallel()
	kv := sharedRedis(t, true)
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: kv, FinishedRunTTL: time.Hour,
		WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	for _, key := range []string{"oauth:run:" + f.child, "oauth:doc:" + f.child + ":oauthPrompt"} {
		ttl, err := kv.TTL(ctx, key)
		require.NoError(t, err)
		assert.Greater(t, ttl, 24*time.Hour, "a waiting sign-in is kept: %s", key)
	}
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	require.Equal(t, http.StatusOK, rec.Code)
	for _, key := range []string{"oauth:run:" + f.child, "oauth:doc:" + f.child + ":oauthPrompt", "oauth:run:" + f.parent.ID} {
		ttl, err := kv.TTL(ctx, key)
		require.NoError(t, err)
		assert.LessOrEqual(t, ttl, time.Hour, "an ended run is kept for the finished-run TTL: %s", key)
		assert.Greater(t, ttl, 50*time.Minute, key)
	}
}

// stuckProvider's code exchange never returns (until the test ends): the
// instance running the completion is as good as dead.
type stuckProvider struct {
	*fakeProvider
	started chan struct{}
	release chan struct{}
}

func (p *stuckProvider) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	close(p.started)
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return p.fakeProvider.ExchangeCode(ctx, code, opts...)
}

// A completion whose instance is gone mid-way is failed honestly by another
// instance, which never exchanges the code again.
func TestCompletionAbandonedByItsInstanceIsFailedByAnother(t *testing.T) {
	t.Parallel()
	kv := sharedRedis(t, true)
	clock := fakeclock.New(time.Now())
	cfg := oauthflow.Config{KV: kv, Now: clock.Now, WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
	stuck := &stuckProvider{fakeProvider: newFakeProvider("acme"), started: make(chan struct{}), release: make(chan struct{})}
	a := newSignInFixtureWith(t, stuck, cfg)
	other, exchanges := exchangeCounter()
	b := newAgentModule(t, other, cfg)

	zombie := make(chan struct{})
	go func() {
		defer close(zombie)
		a.m.CallbackHandler().ServeHTTP(httptest.NewRecorder(),
			httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+a.prompt.State, nil))
	}()
	within(t, stuck.started, "the first instance's exchange")
	assert.Zero(t, oauthflow.WorkOnce(ctx, b), "nothing is due while the completion may still end")
	// The first instance is gone: its lease on the run lapses, and the time
	// by which its completion had to end passes.
	require.NoError(t, kv.Del(ctx, "oauth:lock:run:"+a.child))
	clock.Advance(2 * time.Minute) // the default completion timeout, one minute, and a minute more
	assert.Equal(t, 1, oauthflow.WorkOnce(ctx, b))
	child, err := b.Engine.Get(ctx, a.child)
	require.NoError(t, err)
	assert.JSONEq(t, `{"authenticated":false}`, string(child.Result))
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, b.Engine.Document(ctx, a.child, oauthflow.PromptDocumentName, &prompt))
	assert.Equal(t, oauthflow.PromptError, prompt.Status)
	assert.Contains(t, prompt.Message, "could not be completed")
	parent, err := b.Engine.Get(ctx, a.parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status, "the parent resumed")
	var res oauthflow.ChildResult
	require.NoError(t, json.Unmarshal(parent.Result, &res))
	assert.Equal(t, oauthflow.RunFailed, res.Status)
	assert.Zero(t, exchanges.Load(), "the code is never exchanged twice")

	// The first instance comes back from the dead with tokens, its context
	// still live: it must not rewrite the run or the prompt the other one ended.
	close(stuck.release)
	within(t, zombie, "the first instance's completion to return")
	child, err = b.Engine.Get(ctx, a.child)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunFailed, child.Status, "the run another instance ended stays ended")
	require.NoError(t, b.Engine.Document(ctx, a.child, oauthflow.PromptDocumentName, &prompt))
	assert.Equal(t, oauthflow.PromptError, prompt.Status, "and so does its prompt")
	_, err = b.Tokens.GetTokens(ctx, "alice", "acme")
	assert.NoError(t, err, "the grant its code bought is kept: the provider gives it once")
}

// refusingProvider refuses every code: the exchange fails at the provider.
type refusingProvider struct{ *fakeProvider }

func (p refusingProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return nil, &oauthflow.ProviderError{ProviderID: p.id, StatusCode: http.StatusBadRequest, Code: "invalid_grant"}
}

// A completion that failed ends its run at once, and leaves no watch behind
// for the worker to find later.
func TestSignInFailedLeavesNoWatch(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	f := newSignInFixtureWith(t, refusingProvider{newFakeProvider("acme")}, oauthflow.Config{Now: clock.Now, WorkerInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
	child, err := f.m.Engine.Get(ctx, f.child)
	require.NoError(t, err)
	require.Equal(t, oauthflow.RunFailed, child.Status)
	// Past the completion's deadline plus the run lock's lease, before the sign-in's own 10 minutes.
	clock.Advance(2 * time.Minute) // the default completion timeout, one minute, and a minute more
	assert.Zero(t, oauthflow.WorkOnce(ctx, f.m), "a failed completion leaves no watch behind")
}

// A sign-in nobody finishes leaves nothing long in a shared store, even when
// no instance runs to lapse it: its run and prompt expire a FinishedRunTTL
// after the longest a sign-in can wait (an hour, a device code's longest
// life, and a completion's minute), not after the 30 days of other runs. Once it lapses, they are kept
// for FinishedRunTTL.
func TestAbandonedSignInLeavesNothingLong(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	kv := oauthflow.NewMemoryKVOn(clock.Now)
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: kv, Now: clock.Now, WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Registry.Register(newFakeProvider("acme")))
	run, _, err := m.StartSignIn(ctx, "alice", "acme")
	require.NoError(t, err)
	keys := []string{"oauth:run:" + run.ID, "oauth:doc:" + run.ID + ":" + oauthflow.PromptDocumentName}
	for _, k := range keys {
		ttl, err := kv.TTL(ctx, k)
		require.NoError(t, err, k)
		if ttl <= 0 || ttl > time.Hour+time.Minute+24*time.Hour {
			t.Errorf("%s lives %v while its sign-in waits; want at most an hour, a completion's minute and FinishedRunTTL (24 h)", k, ttl)
		}
	}
	clock.Advance(10*time.Minute + time.Second)
	require.Equal(t, 1, oauthflow.WorkOnce(ctx, m), "the sign-in lapses")
	for _, k := range keys {
		ttl, err := kv.TTL(ctx, k)
		require.NoError(t, err, k)
		require.Equal(t, 24*time.Hour, ttl, "%s once the sign-in lapsed", k)
	}
}

// A sign-in launched by a parent run waits as long as the parent may: its
// lapse is what resumes the parent, so it is not let go before.
func TestChildSignInWaitsAsLongAsItsParent(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	kv := oauthflow.NewMemoryKVOn(clock.Now)
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: kv, Now: clock.Now, WorkerInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	for _, k := range []string{"oauth:run:" + f.child, "oauth:run:" + f.parent.ID} {
		ttl, err := kv.TTL(ctx, k)
		require.NoError(t, err, k)
		require.Equal(t, 30*24*time.Hour, ttl, k)
	}
}
