// Package flight runs one call per key at a time and shares its result with
// every caller that arrives while it runs.
package flight

import (
	"context"
	"fmt"
	"sync"
)

// Group runs one call per key at a time and shares its result with every
// caller that arrives while it runs. Unlike x/sync/singleflight, each caller waits
// only as long as its own context allows, the call itself runs on its own
// goroutine so that no caller's cancellation kills it, and the call may publish
// its result early and go on working (a write it retries): publishing ends the
// sharing, so a caller that comes later starts a call of its own, which sees
// the world as it is then. The zero value is ready.
type Group[V any] struct {
	// Name says what the calls are, in the error a panicking call becomes.
	Name string

	mu    sync.Mutex
	calls map[string]*call[V]
	// running counts the calls not yet returned, published or not; idle is
	// closed when it falls to zero. (A WaitGroup would not do: wait runs
	// beside new calls, and a WaitGroup must not be added to from zero while
	// it is waited on.)
	running int
	idle    chan struct{}
}

type call[V any] struct {
	done chan struct{} // closed once val and err are set
	once sync.Once
	val  V
	err  error
}

// publish sets the flight's result once; later calls do nothing.
func (f *call[V]) publish(v V, err error) {
	f.once.Do(func() {
		f.val, f.err = v, err
		close(f.done)
	})
}

// Do runs fn for key unless a call for key is already running, then waits for
// the result or for ctx to end, whichever comes first. fn's return value is the
// result unless fn published one before.
func (g *Group[V]) Do(ctx context.Context, key string, fn func(publish func(V, error)) (V, error)) (V, error) {
	g.mu.Lock()
	f, running := g.calls[key]
	if !running {
		if g.calls == nil {
			g.calls = make(map[string]*call[V])
		}
		f = &call[V]{done: make(chan struct{})}
		g.calls[key] = f
		if g.running == 0 {
			g.idle = make(chan struct{})
		}
		g.running++
		go g.run(key, f, fn)
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// Wait returns once every call started so far has returned, its last write
// included (and any started meanwhile: it waits for a moment with none).
func (g *Group[V]) Wait() {
	g.mu.Lock()
	idle := g.idle
	running := g.running
	g.mu.Unlock()
	if running > 0 {
		<-idle
	}
}

// ended counts a call out of running.
func (g *Group[V]) ended() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.running--; g.running == 0 {
		close(g.idle)
	}
}

func (g *Group[V]) run(key string, f *call[V], fn func(publish func(V, error)) (V, error)) {
	defer g.ended() // last: after the result is published
	// The call leaves the map before its callers hear the result, so that a
	// caller who heard it and asks again starts afresh.
	finish := func(v V, err error) {
		g.mu.Lock()
		if g.calls[key] == f {
			delete(g.calls, key)
		}
		g.mu.Unlock()
		f.publish(v, err)
	}
	var val V
	var err error
	defer func() {
		if r := recover(); r != nil {
			var zero V
			val, err = zero, fmt.Errorf("oauthflow: %s panicked: %v", g.Name, r)
		}
		finish(val, err)
	}()
	val, err = fn(finish)
}
