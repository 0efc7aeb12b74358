package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

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
