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
// its result early and go on working (a write it retries) while later callers
// get that result at once. The zero value is ready.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flight
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
		go g.run(key, f, fn)
	}
	g.mu.Unlock()
	select {
	case <-f.done:
		return f.val, f.err
	case <-ctx.Done():
		return StoredTokens{}, ctx.Err()
	}
}

func (g *flightGroup) run(key string, f *flight, fn func(publish func(StoredTokens, error)) (StoredTokens, error)) {
	var val StoredTokens
	var err error
	defer func() {
		if r := recover(); r != nil {
			val, err = StoredTokens{}, fmt.Errorf("oauthflow: refresh panicked: %v", r)
		}
		f.publish(val, err) // before leaving the map: a late caller joins the finished call
		g.mu.Lock()
		delete(g.calls, key)
		g.mu.Unlock()
	}()
	val, err = fn(f.publish)
}
