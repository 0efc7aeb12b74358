package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
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
	assert.Equal(t, "inline", r.Options.Show, "show defaults to inline")

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
	waitfor.Group(t, &wg, "50 Fires")
	assert.EqualValues(t, 1, bumps.Load())
	assert.EqualValues(t, 1, ok.Load())
	assert.EqualValues(t, 49, refused.Load())
}

// The run lock lets one Fire of a run in at a time. N Fires of one waiting
// transition, released at once from two engines over one store, run it exactly
// once; the rest find the run moved on. The transition holds until either all N
// Fires are inside it (no lock: the test fails every time, not by chance) or
// each of the other N-1 has been refused the lock at least once (the lock holds).
func TestEngineFireHoldsTheRunLock(t *testing.T) {
	t.Parallel()
	const n = 8
	kv := &lockWatchKV{KV: oauthflow.NewMemoryKV(), want: n - 1, allRefused: make(chan struct{})}
	var entered atomic.Int64
	allIn := make(chan struct{})
	noop := func(context.Context, *oauthflow.TransitionContext) error { return nil }
	gate := &oauthflow.Workflow{Name: "gate", States: []string{oauthflow.StateStart, "open", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "open", From: oauthflow.StateStart, To: "open", Do: noop},
			{Name: "pass", From: "open", To: oauthflow.StateEnd, Wait: true, Do: func(context.Context, *oauthflow.TransitionContext) error {
				if entered.Add(1) == n {
					close(allIn)
				}
				select {
				case <-allIn:
				case <-kv.allRefused:
				case <-time.After(10 * time.Second):
					t.Errorf("after 10 s, %d Fires were inside the transition and %d refused the lock", entered.Load(), kv.refusedFires())
				}
				return nil
			}},
		}}
	engines := []*oauthflow.Engine{oauthflow.NewEngine(kv), oauthflow.NewEngine(kv)}
	for _, e := range engines {
		require.NoError(t, e.Register(gate))
	}
	r, err := engines[0].Launch(ctx, "alice", "gate", nil, oauthflow.RunOptions{})
	require.NoError(t, err)

	var ok, notAllowed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			_, err := engines[i%2].Fire(context.WithValue(ctx, fireKey{}, i), r.ID, "pass", nil, "alice")
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, oauthflow.ErrTransitionNotAllowed):
				notAllowed.Add(1)
			default:
				t.Errorf("Fire %d: %v", i, err)
			}
		})
	}
	close(start)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "all Fires returning")
	assert.EqualValues(t, 1, entered.Load(), "the transition ran this many times")
	assert.EqualValues(t, 1, ok.Load(), "Fires that succeeded")
	assert.EqualValues(t, n-1, notAllowed.Load(), "Fires that found the run moved on")
}

type fireKey struct{}

// lockWatchKV closes allRefused once want distinct Fires (told apart by the
// fireKey in their context) have been refused a SetNX: the run lock, held by another.
type lockWatchKV struct {
	oauthflow.KV
	want       int
	allRefused chan struct{}

	mu      sync.Mutex
	refused map[any]bool
}

func (k *lockWatchKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.SetNX(ctx, key, v, ttl)
	fire := ctx.Value(fireKey{})
	if ok || err != nil || fire == nil {
		return ok, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.refused == nil {
		k.refused = make(map[any]bool)
	}
	if !k.refused[fire] {
		k.refused[fire] = true
		if len(k.refused) == k.want {
			close(k.allRefused)
		}
	}
	return ok, err
}

func (k *lockWatchKV) refusedFires() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.refused)
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
	got := within(t, heard, "the parent hearing its child's end")
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
	got := within(t, heard, "the parent hearing the child that ended during its transition")
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

// A run's documents expire with it once it ends, the one its last call
// saved and the one an earlier call saved alike: an ended run is kept for
// the finished-run TTL, and so are they.
func TestEngineEndedRunDocumentsExpireWithIt(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	e := oauthflow.NewEngine(kv)
	save := func(name string) func(context.Context, *oauthflow.TransitionContext) error {
		return func(ctx context.Context, tc *oauthflow.TransitionContext) error {
			return tc.SaveDocument(ctx, name, "note-widget", map[string]string{"text": name})
		}
	}
	require.NoError(t, e.Register(&oauthflow.Workflow{Name: "notes", States: []string{"start", "open", "end"},
		Transitions: []oauthflow.Transition{
			{Name: "first", From: "start", To: "open", Do: save("earlier")},
			{Name: "last", From: "open", To: "end", Wait: true, Do: save("last")}}}))
	r, err := e.Launch(ctx, "alice", "notes", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	_, err = e.Fire(ctx, r.ID, "last", nil, "alice")
	require.NoError(t, err)
	for _, name := range []string{"earlier", "last"} {
		ttl, err := kv.TTL(ctx, "oauth:doc:"+r.ID+":"+name)
		require.NoError(t, err, name)
		assert.LessOrEqual(t, ttl, 24*time.Hour, "the ended run's document %s", name)
	}
}

// fanOutWorkflow launches four "instant" children from goroutines inside one
// transition, as an agent calling tools in parallel does, and records in its
// data each child result its callback transition hears.
func fanOutWorkflow() *oauthflow.Workflow {
	return &oauthflow.Workflow{
		Name:   "fanout",
		States: []string{oauthflow.StateStart, "awaiting", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "spawn", From: oauthflow.StateStart, To: "awaiting", Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				errs := make([]error, 4)
				var wg sync.WaitGroup
				for i := range errs {
					wg.Go(func() {
						_, errs[i] = tc.Launch(ctx, "instant", nil, oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "childDone"}})
					})
				}
				if err := waitfor.GroupErr(&wg, "the children's launches"); err != nil {
					return err
				}
				return errors.Join(errs...)
			}},
			{Name: "childDone", From: "awaiting", To: "awaiting", Wait: true, Do: func(_ context.Context, tc *oauthflow.TransitionContext) error {
				var in oauthflow.ChildResult
				var d fanOutData
				if err := errors.Join(tc.DecodeInput(&in), tc.DecodeData(&d)); err != nil {
					return err
				}
				d.Heard = append(d.Heard, in)
				return tc.SetData(d)
			}},
		},
	}
}

type fanOutData struct {
	Heard []oauthflow.ChildResult `json:"heard"`
}

// instantWorkflow ends as soon as it starts, counting its runs.
func instantWorkflow(ran *atomic.Int64) *oauthflow.Workflow {
	return &oauthflow.Workflow{Name: "instant", States: []string{oauthflow.StateStart, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{{Name: "done", From: oauthflow.StateStart, To: oauthflow.StateEnd,
			Do: func(context.Context, *oauthflow.TransitionContext) error { ran.Add(1); return nil }}}}
}

// Ten parents launched at once, each launching four children from goroutines
// inside its transition: every child runs once and every parent hears exactly
// its own children, once each, after its transition is over (run with -race).
func TestEngineFanOutChildrenDeliverOnce(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			assertFanOutDeliversOnce(t, be.new(t))
		})
	}
}

// assertFanOutDeliversOnce launches ten parents on kv whose transition launches
// four children each from goroutines; every parent hears exactly its children.
func assertFanOutDeliversOnce(t *testing.T, kv oauthflow.KV) {
	const parents, children = 10, 4
	var ran atomic.Int64
	e := oauthflow.NewEngine(kv)
	require.NoError(t, e.Register(instantWorkflow(&ran)))
	require.NoError(t, e.Register(fanOutWorkflow()))

	ids := make([]string, parents)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Go(func() {
			r, err := e.Launch(ctx, "alice", "fanout", nil, oauthflow.RunOptions{})
			if assert.NoError(t, err, "parent %d", i) {
				ids[i] = r.ID
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	within(t, done, "ten fanned-out parents returning (a deadlock otherwise)")

	assert.EqualValues(t, parents*children, ran.Load(), "children that ran")
	for _, id := range ids {
		p, err := e.Get(ctx, id)
		require.NoError(t, err)
		var d fanOutData
		require.NoError(t, json.Unmarshal(p.Data, &d), "parent %s heard no child", id)
		got := make([]string, len(d.Heard))
		for i, h := range d.Heard {
			got[i] = h.RunID
			assert.Equal(t, oauthflow.RunCompleted, h.Status)
		}
		assert.Len(t, p.Children, children, "children recorded on parent %s", id)
		assert.ElementsMatch(t, p.Children, got, "parent %s heard exactly its children, once each", id)
		assert.Equal(t, "awaiting", p.State)
	}
}

// Two goroutines of one transition firing one other run take turns on its lock:
// a run held by a sibling is not re-entered, so the second Fire, made while the
// first is inside the transition, waits for the lock instead of being refused.
func TestEngineSiblingFiresOfOneRunTakeTurns(t *testing.T) {
	t.Parallel()
	kv := &lockWatchKV{KV: oauthflow.NewMemoryKV(), want: 1, allRefused: make(chan struct{})}
	e := oauthflow.NewEngine(kv)
	var bumps atomic.Int64
	firstIn, secondBack := make(chan struct{}), make(chan struct{})
	noop := func(context.Context, *oauthflow.TransitionContext) error { return nil }
	require.NoError(t, e.Register(&oauthflow.Workflow{Name: "tally", States: []string{oauthflow.StateStart, "open", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "open", From: oauthflow.StateStart, To: "open", Do: noop},
			{Name: "bump", From: "open", To: "open", Wait: true, Do: func(context.Context, *oauthflow.TransitionContext) error {
				if bumps.Add(1) > 1 {
					return nil
				}
				close(firstIn)
				select {
				case <-kv.allRefused:
				case <-secondBack:
					t.Errorf("the sibling Fire returned without waiting for the lock")
				case <-time.After(10 * time.Second):
					t.Errorf("after 10 s, the sibling Fire had not waited for the lock")
				}
				return nil
			}},
		}}))
	require.NoError(t, e.Register(&oauthflow.Workflow{Name: "siblings", States: []string{oauthflow.StateStart, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{{Name: "fire", From: oauthflow.StateStart, To: oauthflow.StateEnd,
			Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				var args struct{ Tally string }
				if err := tc.DecodeArgs(&args); err != nil {
					return err
				}
				var first, second error
				var wg sync.WaitGroup
				wg.Go(func() { _, first = e.Fire(context.WithValue(ctx, fireKey{}, 1), args.Tally, "bump", nil, "alice") })
				wg.Go(func() {
					defer close(secondBack)
					<-firstIn
					_, second = e.Fire(context.WithValue(ctx, fireKey{}, 2), args.Tally, "bump", nil, "alice")
				})
				if err := waitfor.GroupErr(&wg, "the siblings' Fires"); err != nil {
					return err
				}
				return errors.Join(first, second)
			}}}}))
	tally, err := e.Launch(ctx, "alice", "tally", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := e.Launch(ctx, "alice", "siblings", map[string]string{"Tally": tally.ID}, oauthflow.RunOptions{})
		done <- err
	}()
	assert.NoError(t, within(t, done, "the siblings' run returning"))
	assert.EqualValues(t, 2, bumps.Load(), "bumps of the run both siblings fired")
}

// A transition that fires its own run, even from a goroutine it waits for, is
// refused at once instead of waiting forever for the lock it holds.
func TestEngineRunFiringItselfIsRefused(t *testing.T) {
	t.Parallel()
	e := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	refused := make(chan error, 1)
	require.NoError(t, e.Register(&oauthflow.Workflow{Name: "selfish", States: []string{oauthflow.StateStart, "open", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "open", From: oauthflow.StateStart, To: "open", Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }},
			{Name: "poke", From: "open", To: oauthflow.StateEnd, Wait: true, Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				var wg sync.WaitGroup
				wg.Go(func() { _, err := e.Fire(ctx, tc.Run.ID, "poke", nil, "alice"); refused <- err })
				return waitfor.GroupErr(&wg, "the run's Fire of itself")
			}},
		}}))
	r, err := e.Launch(ctx, "alice", "selfish", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { _, err := e.Fire(ctx, r.ID, "poke", nil, "alice"); done <- err }()
	assert.ErrorIs(t, within(t, refused, "the run's own Fire of itself returning"), oauthflow.ErrTransitionNotAllowed)
	assert.NoError(t, within(t, done, "the outer Fire returning"))
}

// releaseWatchKV runs onRelease right after a run lock is freed, before the
// holder goes on: what another instance would read at that moment.
type releaseWatchKV struct {
	oauthflow.KV
	onRelease func()
}

func (k *releaseWatchKV) CompareAndDelete(ctx context.Context, key string, v []byte) (bool, error) {
	ok, err := k.KV.CompareAndDelete(ctx, key, v)
	if ok && strings.HasPrefix(key, "oauth:lock:run:") && k.onRelease != nil {
		k.onRelease()
	}
	return ok, err
}

// A run's last save lands before its lock is free: the next holder of the
// lock reads the run as the last one left it.
func TestEngineRunSavedBeforeItsLockIsFree(t *testing.T) {
	t.Parallel()
	var bumps atomic.Int64
	kv := &releaseWatchKV{KV: oauthflow.NewMemoryKV()}
	e := oauthflow.NewEngine(kv)
	require.NoError(t, e.Register(counterWorkflow(&bumps)))
	r, err := e.Launch(ctx, "alice", "counter", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	var seen *oauthflow.Run
	kv.onRelease = func() { seen, err = oauthflow.NewEngine(kv).Get(ctx, r.ID) }
	_, ferr := e.Fire(ctx, r.ID, "close", nil, "alice")
	require.NoError(t, ferr)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, seen.Status, "the run as read the moment its lock was freed")
}

// A child's result is never lost between the save of its end and the
// delivery to its parent (issue 21, hole 4): the delivery is owed before the
// end is saved, so a crash right after the save leaves it to the worker, and
// an end that cannot be owed is not saved.
func TestChildResultSurvivesACrashAfterItsEnd(t *testing.T) {
	t.Parallel()
	for name, failOwe := range map[string]bool{"crash after the save": false, "owing fails, then crash after the save": true} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kv := &crashKV{KV: oauthflow.NewMemoryKV()}
			m, heard := newParentChildModule(t, kv)
			parent, err := m.Engine.Launch(ctx, "alice", "parent", nil, oauthflow.RunOptions{})
			require.NoError(t, err)
			require.Len(t, parent.Children, 1)
			child := parent.Children[0]

			kv.crashAfter.Store("oauth:run:" + child)
			kv.crash.Store(true)
			kv.failOwes.Store(failOwe)
			_, err = m.Engine.Fire(ctx, child, "go", nil, "alice")
			if err != nil { // the end was not saved: the child is still waiting, and is ended again
				kv.heal()
				_, err = m.Engine.Fire(ctx, child, "go", nil, "alice")
			}
			require.True(t, kv.crashed.Load(), "the store went down right after the child's end was saved")
			kv.heal()
			ended, err := m.Engine.Get(ctx, child)
			require.NoError(t, err)
			require.Equal(t, oauthflow.StateEnd, ended.State)
			assert.Zero(t, heard.Load(), "the crash kept the first try from landing")

			assert.Equal(t, 1, oauthflow.WorkOnce(ctx, m), "the worker finds the delivery owed")
			p, err := m.Engine.Get(ctx, parent.ID)
			require.NoError(t, err)
			assert.Equal(t, oauthflow.RunCompleted, p.Status, "the parent resumed with its child's result")
			assert.EqualValues(t, 1, heard.Load())
		})
	}
}

// A delivery owed for an end whose save failed finds the child not ended and
// delivers nothing: the parent hears only a child's saved end.
func TestDeliveryWaitsForTheChildsSavedEnd(t *testing.T) {
	t.Parallel()
	kv := &crashKV{KV: oauthflow.NewMemoryKV()}
	m, heard := newParentChildModule(t, kv)
	parent, err := m.Engine.Launch(ctx, "alice", "parent", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	child := parent.Children[0]
	kv.crashAfter.Store("oauth:run:" + child)
	kv.failEnd.Store(true)
	_, err = m.Engine.Fire(ctx, child, "go", nil, "alice")
	require.ErrorIs(t, err, oauthflow.ErrStoreUnavailable, "the end's save failed")
	assert.Equal(t, 1, oauthflow.WorkOnce(ctx, m), "the delivery owed before the save is claimed")
	assert.Zero(t, heard.Load(), "a child whose end is not saved is not delivered")
	p, err := m.Engine.Get(ctx, parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunWaiting, p.Status)

	_, err = m.Engine.Fire(ctx, child, "go", nil, "alice")
	require.NoError(t, err)
	assert.EqualValues(t, 1, heard.Load(), "the saved end is delivered")
}

// A sign-in whose run's end cannot be saved (its delivery could not be owed)
// keeps its due work: the lapse that ends it later is not tidied away with
// the lock's release.
func TestUnsavedEndKeepsItsDueWork(t *testing.T) {
	t.Parallel()
	kv := &crashKV{KV: oauthflow.NewMemoryKV()}
	f := newSignInFixtureWith(t, newFakeProvider("acme"), oauthflow.Config{KV: kv, WorkerInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	kv.failOwes.Store(true)
	rec := httptest.NewRecorder()
	f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil))
	kv.heal()
	child, err := f.m.Engine.Get(ctx, f.child)
	require.NoError(t, err)
	require.NotEqual(t, oauthflow.StateEnd, child.State, "the end was not saved")
	_, err = f.m.Tokens.GetTokens(ctx, "alice", "acme")
	require.NoError(t, err, "the sign-in itself ran")
	due, err := kv.Claim(ctx, "oauth:sys:due", epoch.AddDate(1, 0, 0), time.Minute, 100)
	require.NoError(t, err)
	assert.Contains(t, due, "lapse:"+f.child, "the unsaved run's lapse is still due")
}

// newParentChildModule is a Module with a parent workflow that launches one
// child and ends when the child's result comes back (counted in heard).
func newParentChildModule(t *testing.T, kv oauthflow.KV) (*oauthflow.Module, *atomic.Int64) {
	t.Helper()
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: kv, Now: fakeclock.New(epoch).Now, WorkerInterval: time.Hour,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	nothing := func(context.Context, *oauthflow.TransitionContext) error { return nil }
	require.NoError(t, m.Engine.Register(&oauthflow.Workflow{Name: "child", States: []string{oauthflow.StateStart, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{{Name: "go", From: oauthflow.StateStart, To: oauthflow.StateEnd, Wait: true, Do: nothing}}}))
	heard := &atomic.Int64{}
	require.NoError(t, m.Engine.Register(&oauthflow.Workflow{Name: "parent", States: []string{oauthflow.StateStart, "waiting", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "spawn", From: oauthflow.StateStart, To: "waiting", Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				_, err := tc.Launch(ctx, "child", nil, oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "heard"}})
				return err
			}},
			{Name: "heard", From: "waiting", To: oauthflow.StateEnd, Wait: true, Do: func(context.Context, *oauthflow.TransitionContext) error {
				heard.Add(1)
				return nil
			}},
		}}))
	return m, heard
}

// crashKV watches the writes of an ended run under the key crashAfter names:
// with crash set, it goes down right after the first (the instance dies
// there: nothing after it reaches the store); with failEnd set, it fails the
// next one. While failOwes is set, it fails every Schedule of a parent's
// delivery.
type crashKV struct {
	oauthflow.KV
	crashAfter     atomic.Value // string
	failOwes       atomic.Bool
	crash, failEnd atomic.Bool
	down, crashed  atomic.Bool
}

var errCrashed = errors.New("redis: connection refused")

func (k *crashKV) heal() { k.down.Store(false); k.failOwes.Store(false) }

func (k *crashKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	if k.down.Load() {
		return errCrashed
	}
	c, _ := k.crashAfter.Load().(string)
	if c == key && endedRun(v) && k.failEnd.Swap(false) {
		return errCrashed
	}
	err := k.KV.Set(ctx, key, v, ttl)
	if err == nil && c == key && endedRun(v) && k.crash.Load() && !k.crashed.Swap(true) {
		k.down.Store(true)
	}
	return err
}

func endedRun(v []byte) bool {
	var r struct{ State string }
	return json.Unmarshal(v, &r) == nil && r.State == oauthflow.StateEnd
}

func (k *crashKV) Schedule(ctx context.Context, index, member string, due time.Time) error {
	if k.down.Load() || k.failOwes.Load() && strings.HasPrefix(member, "deliver:") {
		return errCrashed
	}
	return k.KV.Schedule(ctx, index, member, due)
}

func (k *crashKV) Get(ctx context.Context, key string) ([]byte, error) {
	if k.down.Load() {
		return nil, errCrashed
	}
	return k.KV.Get(ctx, key)
}

func (k *crashKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	if k.down.Load() {
		return false, errCrashed
	}
	return k.KV.SetNX(ctx, key, v, ttl)
}

func (k *crashKV) Del(ctx context.Context, key string) error {
	if k.down.Load() {
		return errCrashed
	}
	return k.KV.Del(ctx, key)
}

func (k *crashKV) CompareAndDelete(ctx context.Context, key string, v []byte) (bool, error) {
	if k.down.Load() {
		return false, errCrashed
	}
	return k.KV.CompareAndDelete(ctx, key, v)
}

func (k *crashKV) CompareAndExpire(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	if k.down.Load() {
		return false, errCrashed
	}
	return k.KV.CompareAndExpire(ctx, key, v, ttl)
}

func (k *crashKV) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	if k.down.Load() {
		return false, errCrashed
	}
	return k.KV.CompareAndSwap(ctx, key, old, v, ttl)
}

func (k *crashKV) Unschedule(ctx context.Context, index, member string) error {
	if k.down.Load() {
		return errCrashed
	}
	return k.KV.Unschedule(ctx, index, member)
}

func (k *crashKV) Claim(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	if k.down.Load() {
		return nil, errCrashed
	}
	return k.KV.Claim(ctx, index, now, lease, n)
}
