package oauthflow

import (
	"context"
	"fmt"
	"sync"
)

// flightGroup runs one call per key at a time and shares its result with every
// caller that arrives while it runs. Unlike x/sync/singleflight, each caller waits
// only as long as its own context allows, and the call itself runs on its own
// goroutine so that no caller's cancellation kills it. The zero value is ready.
type flightGroup struct {
	mu    sync.Mutex
	calls map[string]*flight
}

type flight struct {
	done chan struct{}
	val  StoredTokens
	err  error
}

// do runs fn for key unless a call for key is already running, then waits for
// the result or for ctx to end, whichever comes first.
func (g *flightGroup) do(ctx context.Context, key string, fn func() (StoredTokens, error)) (StoredTokens, error) {
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

func (g *flightGroup) run(key string, f *flight, fn func() (StoredTokens, error)) {
	defer func() {
		if r := recover(); r != nil {
			f.err = fmt.Errorf("oauthflow: refresh panicked: %v", r)
		}
		g.mu.Lock()
		delete(g.calls, key)
		g.mu.Unlock()
		close(f.done)
	}()
	f.val, f.err = fn()
}
