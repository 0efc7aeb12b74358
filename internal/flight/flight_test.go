package flight

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/assert"
)

// A Module's Close waits for the refreshes in flight while requests may
// still start new ones: the wait and new calls run side by side, over and
// over, and neither panics nor misses a call that started before the wait.
func TestFlightWaitBesideNewCalls(t *testing.T) {
	t.Parallel()
	var g Group[string]
	var callers sync.WaitGroup
	for c := range 8 {
		callers.Go(func() {
			for i := range 2000 {
				_, _ = g.Do(context.Background(), fmt.Sprintf("k%d-%d", c, i%4), func(func(string, error)) (string, error) {
					return "", nil
				})
			}
		})
	}
	waited := make(chan struct{})
	go func() {
		defer close(waited)
		for range 20000 {
			g.Wait()
		}
	}()
	waitfor.Group(t, &callers, "the callers")
	waitfor.Recv(t, waited, "the waits beside the calls")
	idle := make(chan struct{})
	go func() { g.Wait(); close(idle) }()
	waitfor.Recv(t, idle, "the last wait")
}

// A call that published early and kept working (a write it retries through
// a store blip) removes only its own map entry when it ends: a newer call
// for the same key, started by a caller who heard the early result, stays
// the one that later callers join. Otherwise the next caller starts a third
// call while the newer one runs, and "one call per key at a time" breaks
// exactly during store trouble.
func TestFlightEndingLeavesANewerCallAlone(t *testing.T) {
	t.Parallel()
	var g Group[string]
	var started atomic.Int64
	newerStarted, newerEnd := make(chan struct{}), make(chan struct{})
	newer := func(func(string, error)) (string, error) {
		started.Add(1)
		close(newerStarted)
		_, err := waitfor.RecvErr(newerEnd, "the newer call's end")
		return "newer", err
	}
	first := func(publish func(string, error)) (string, error) {
		started.Add(1)
		publish("first", nil) // early: the write goes on being retried
		go func() { _, _ = g.Do(context.Background(), "k", newer) }()
		waitfor.Recv(t, newerStarted, "the newer call's start")
		return "first", nil
	}
	// The first call runs on the test's goroutine, as do starts it, so that
	// its end (its map entry's removal included) is over when run returns.
	f := &call[string]{done: make(chan struct{})}
	g.calls, g.running, g.idle = map[string]*call[string]{"k": f}, 1, make(chan struct{})
	g.run("k", f, first)

	gone, cancel := context.WithCancel(context.Background())
	cancel() // a caller that only joins or starts, and does not wait
	_, _ = g.Do(gone, "k", func(func(string, error)) (string, error) {
		started.Add(1)
		return "", nil
	})
	close(newerEnd)
	idle := make(chan struct{})
	go func() { g.Wait(); close(idle) }()
	waitfor.Recv(t, idle, "every call's end")
	assert.EqualValues(t, 2, started.Load(), "the caller joined the newer call instead of starting a third")
}
