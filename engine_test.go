package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// counterWorkflow waits in "open" for "bump" transitions, each counted.
func counterWorkflow(bumps *atomic.Int64) *oauthflow.Workflow {
	return &oauthflow.Workflow{
		Name:   "counter",
		States: []string{oauthflow.StateStart, "open", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "open", From: oauthflow.StateStart, To: "open", Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }},
			{Name: "close", From: "open", To: oauthflow.StateEnd, Wait: true, Do: func(_ context.Context, tc *oauthflow.TransitionContext) error {
				bumps.Add(1)
				return tc.SetResult(map[string]bool{"closed": true})
			}},
		},
	}
}

func TestEngineLaunchFireGet(t *testing.T) {
	t.Parallel()
	var bumps atomic.Int64
	e := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	require.NoError(t, e.Register(counterWorkflow(&bumps)))
	r, err := e.Launch(ctx, "alice", "counter", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, "open", r.State)
	assert.Equal(t, oauthflow.RunWaiting, r.Status)
	assert.Equal(t, oauthflow.ShowInline, r.Options.Show, "show defaults to inline")

	_, err = e.Fire(ctx, r.ID, "close", nil, "mallory")
	assert.ErrorIs(t, err, oauthflow.ErrForbidden)
	_, err = e.Fire(ctx, r.ID, "open", nil, "alice")
	assert.ErrorIs(t, err, oauthflow.ErrTransitionNotAllowed, "automatic transitions are not fired from outside")
	_, err = e.Fire(ctx, "no-such-run", "close", nil, "alice")
	assert.ErrorIs(t, err, oauthflow.ErrRunNotFound)

	r, err = e.Fire(ctx, r.ID, "close", nil, "alice")
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, r.Status)
	_, err = e.Fire(ctx, r.ID, "close", nil, "alice")
	assert.ErrorIs(t, err, oauthflow.ErrTransitionNotAllowed, "a transition never fires twice")

	got, err := e.Get(ctx, r.ID)
	require.NoError(t, err)
	assert.JSONEq(t, `{"closed":true}`, string(got.Result))
	assert.EqualValues(t, 1, bumps.Load())

	_, err = e.Launch(ctx, "alice", "nope", nil, oauthflow.RunOptions{})
	assert.ErrorIs(t, err, oauthflow.ErrUnknownWorkflow)
	_, err = e.Launch(ctx, "", "counter", nil, oauthflow.RunOptions{})
	assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
}

// Concurrent Fires of one transition, from two engines (instances) over one store,
// run it exactly once.
func TestEngineFireSerialisedAcrossInstances(t *testing.T) {
	t.Parallel()
	kv := sharedRedisAny(t)
	var bumps atomic.Int64
	engines := []*oauthflow.Engine{oauthflow.NewEngine(kv), oauthflow.NewEngine(kv)}
	for _, e := range engines {
		require.NoError(t, e.Register(counterWorkflow(&bumps)))
	}
	r, err := engines[0].Launch(ctx, "alice", "counter", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	var ok, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := engines[i%2].Fire(ctx, r.ID, "close", nil, "alice")
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, oauthflow.ErrTransitionNotAllowed):
				refused.Add(1)
			default:
				t.Errorf("Fire: %v", err)
			}
		}()
	}
	wg.Wait()
	assert.EqualValues(t, 1, bumps.Load())
	assert.EqualValues(t, 1, ok.Load())
	assert.EqualValues(t, 49, refused.Load())
}

func TestEngineRejectsBadWorkflows(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, *oauthflow.TransitionContext) error { return nil }
	states := []string{oauthflow.StateStart, oauthflow.StateEnd}
	for name, w := range map[string]*oauthflow.Workflow{
		"nil":               nil,
		"no name":           {States: states},
		"no end":            {Name: "w", States: []string{oauthflow.StateStart}},
		"undeclared state":  {Name: "w", States: states, Transitions: []oauthflow.Transition{{Name: "t", From: "start", To: "x", Do: noop}}},
		"no function":       {Name: "w", States: states, Transitions: []oauthflow.Transition{{Name: "t", From: "start", To: "end"}}},
		"duplicate name":    {Name: "w", States: states, Transitions: []oauthflow.Transition{{Name: "t", From: "start", To: "end", Wait: true, Do: noop}, {Name: "t", From: "start", To: "end", Wait: true, Do: noop}}},
		"two automatic":     {Name: "w", States: states, Transitions: []oauthflow.Transition{{Name: "a", From: "start", To: "end", Do: noop}, {Name: "b", From: "start", To: "end", Do: noop}}},
		"automatic off end": {Name: "w", States: states, Transitions: []oauthflow.Transition{{Name: "a", From: "end", To: "start", Do: noop}}},
	} {
		assert.ErrorIs(t, oauthflow.NewEngine(oauthflow.NewMemoryKV()).Register(w), oauthflow.ErrInvalidArgument, name)
	}
	e := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	require.NoError(t, e.Register(&oauthflow.Workflow{Name: "w", States: states}))
	assert.ErrorIs(t, e.Register(&oauthflow.Workflow{Name: "w", States: states}), oauthflow.ErrInvalidArgument, "duplicate workflow")
}

func TestEngineTransitionFailureEndsRun(t *testing.T) {
	t.Parallel()
	e := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	require.NoError(t, e.Register(&oauthflow.Workflow{
		Name:   "fragile",
		States: []string{oauthflow.StateStart, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{{Name: "boom", From: oauthflow.StateStart, To: oauthflow.StateEnd,
			Do: func(context.Context, *oauthflow.TransitionContext) error { panic("secret internal detail") }}},
	}))
	r, err := e.Launch(ctx, "alice", "fragile", nil, oauthflow.RunOptions{})
	require.Error(t, err)
	require.NotNil(t, r)
	assert.Equal(t, oauthflow.RunFailed, r.Status)
	assert.Equal(t, oauthflow.StateEnd, r.State)
	assert.NotContains(t, r.Error, "secret", "internal error text never reaches the run's public error")
}

// parentWorkflow launches a child "counter" run and waits for its callback.
func parentWorkflow(heard chan<- oauthflow.ChildResult) *oauthflow.Workflow {
	return &oauthflow.Workflow{
		Name:   "parent",
		States: []string{oauthflow.StateStart, "waiting_child", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "spawn", From: oauthflow.StateStart, To: "waiting_child", Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				_, err := tc.Launch(ctx, "counter", nil, oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "childDone"}})
				return err
			}},
			{Name: "childDone", From: "waiting_child", To: oauthflow.StateEnd, Wait: true, Do: func(_ context.Context, tc *oauthflow.TransitionContext) error {
				var in oauthflow.ChildResult
				if err := tc.DecodeInput(&in); err != nil {
					return err
				}
				heard <- in
				return nil
			}},
		},
	}
}

func TestEngineChildCallsParentBack(t *testing.T) {
	t.Parallel()
	var bumps atomic.Int64
	heard := make(chan oauthflow.ChildResult, 1)
	e := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	require.NoError(t, e.Register(counterWorkflow(&bumps)))
	require.NoError(t, e.Register(parentWorkflow(heard)))
	parent, err := e.Launch(ctx, "alice", "parent", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	require.Len(t, parent.Children, 1)
	child, err := e.Get(ctx, parent.Children[0])
	require.NoError(t, err)
	assert.Equal(t, parent.ID, child.ParentID)
	assert.Equal(t, &oauthflow.Callback{Transition: "childDone"}, child.Options.Callback)

	_, err = e.Fire(ctx, child.ID, "close", nil, "alice")
	require.NoError(t, err)
	got := <-heard
	assert.Equal(t, child.ID, got.RunID)
	assert.Equal(t, oauthflow.RunCompleted, got.Status)
	assert.JSONEq(t, `{"closed":true}`, string(got.Result))
	p, err := e.Get(ctx, parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, p.Status)
}

// A child that ends during its parent's own transition reaches the parent once
// that transition is over, instead of deadlocking on the parent's lock.
func TestEngineChildEndingDuringParentTransition(t *testing.T) {
	t.Parallel()
	heard := make(chan oauthflow.ChildResult, 1)
	e := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	require.NoError(t, e.Register(&oauthflow.Workflow{Name: "counter", States: []string{"start", "end"},
		Transitions: []oauthflow.Transition{{Name: "done", From: "start", To: "end",
			Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }}}}))
	require.NoError(t, e.Register(parentWorkflow(heard)))
	parent, err := e.Launch(ctx, "alice", "parent", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	got := <-heard
	assert.Equal(t, oauthflow.RunCompleted, got.Status)
	p, err := e.Get(ctx, parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, p.Status)
}

func TestEngineDocuments(t *testing.T) {
	t.Parallel()
	e := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	require.NoError(t, e.Register(&oauthflow.Workflow{Name: "doc", States: []string{"start", "end"},
		Transitions: []oauthflow.Transition{{Name: "write", From: "start", To: "end",
			Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				return tc.SaveDocument(ctx, "note", "note-widget", map[string]string{"text": "hi"})
			}}}}))
	r, err := e.Launch(ctx, "alice", "doc", json.RawMessage(`{}`), oauthflow.RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"note": "note-widget"}, r.Documents)
	var v map[string]string
	require.NoError(t, e.Document(ctx, r.ID, "note", &v))
	assert.Equal(t, "hi", v["text"])
	assert.ErrorIs(t, e.Document(ctx, r.ID, "missing", &v), oauthflow.ErrNotFound)
}
