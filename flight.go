package oauthflow

import (
	"context"
	"fmt"
	"sync"
)

// flightGroup runs one call per key at a time and shares its result with every
// caller that arrives while it runs. Unlike x/sync/singleflight, each caller waits
// only as long as its own context allows, the call itself runs on its own
// goroutine so that no caller's cancellation kills it, and the call may publish
// its result early and go on working (a write it retries): publishing ends the
// sharing, so a caller that comes later starts a call of its own, which sees
// the world as it is then. The zero value is ready.
type flightGroup struct {
	mu      sync.Mutex
	calls   map[string]*flight
	running sync.WaitGroup // calls not yet returned, published or not
}

type flight struct {
	done chan struct{} // closed once val and err are set
	once sync.Once
	val  StoredTokens
	err  error
}

// publish sets the flight's result once; later calls do nothing.
func (f *flight) publish(v StoredTokens, err error) {
	f.once.Do(func() {
		f.val, f.err = v, err
		close(f.done)
	})
}

// do runs fn for key unless a call for key is already running, then waits for
// the result or for ctx to end, whichever comes first. fn's return value is the
// result unless fn published one before.
func (g *flightGroup) do(ctx context.Context, key string, fn func(publish func(StoredTokens, error)) (StoredTokens, error)) (StoredTokens, error) {
	g.mu.Lock()
	f, running := g.calls[key]
	if !running {
		if g.calls == nil {
			g.calls = make(map[string]*flight)
		}
		f = &flight{done: make(chan struct{})}
		g.calls[key] = f
		g.running.Go(func() { g.run(key, f, fn) })
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		return StoredTokens{}, ctx.Err()
	}
}

// wait returns once every call started so far has returned, its last write
// included.
func (g *flightGroup) wait() { g.running.Wait() }

func (g *flightGroup) run(key string, f *flight, fn func(publish func(StoredTokens, error)) (StoredTokens, error)) {
	// The call leaves the map before its callers hear the result, so that a
	// caller who heard it and asks again starts afresh.
	finish := func(v StoredTokens, err error) {
		g.mu.Lock()
		if g.calls[key] == f {
			delete(g.calls, key)
		}
		g.mu.Unlock()
		f.publish(v, err)
	}
	var val StoredTokens
	var err error
	defer func() {
		if r := recover(); r != nil {
			val, err = StoredTokens{}, fmt.Errorf("oauthflow: refresh panicked: %v", r)
		}
		finish(val, err)
	}()
	val, err = fn(finish)
}
