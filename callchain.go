package oauthflow

import (
	"context"
	"sync"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/lease"
)

// A call tree is one Launch or Fire and every Launch or Fire its transitions
// make, synchronously, from any number of goroutines (an agent calling tools in
// parallel, each launching a child run). Each path down the tree carries the
// runs it holds locked (heldRun); the whole tree shares one callChain, where a
// child that ends while its parent is locked further up its path leaves the
// parent's notification for the root to deliver once every lock is released.
// A transition waits for the goroutines it starts before it returns.

// callChain holds the parent notifications a call tree deferred. It is safe
// for concurrent use.
type callChain struct {
	mu       sync.Mutex
	deferred []func(context.Context)
}

type callChainKey struct{}

// chain returns ctx's call chain; at the root of a tree, a new one in a derived
// context, and root true.
func chain(ctx context.Context) (_ context.Context, _ *callChain, root bool) {
	if ch, ok := ctx.Value(callChainKey{}).(*callChain); ok {
		return ctx, ch, false
	}
	ch := &callChain{}
	return context.WithValue(ctx, callChainKey{}, ch), ch, true
}

// later defers fn until the root drains the chain.
func (ch *callChain) later(fn func(context.Context)) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.deferred = append(ch.deferred, fn)
}

// next takes the first deferred function, or returns nil.
func (ch *callChain) next() func(context.Context) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.deferred) == 0 {
		return nil
	}
	fn := ch.deferred[0]
	ch.deferred = ch.deferred[1:]
	return fn
}

// drain runs what was deferred, outside the lock: what it runs may defer more.
func (ch *callChain) drain(ctx context.Context) {
	for fn := ch.next(); fn != nil; fn = ch.next() {
		fn(ctx)
	}
}

// heldRun is a run whose lock one call path holds, linked to the runs locked
// above it on that path. A path is never changed, only extended in a derived
// context, so goroutines started by one transition each see their own path: a
// sibling holding a run is no re-entry, and waits for the lock like anyone else.
type heldRun struct {
	id    string
	lease *lease.Lease
	up    *heldRun
	final *finalWrites // sent with the release
}

// finalWrites are what a hold sends in one batch with its release: the run's
// last save, and removals of due work that only tidy up.
type finalWrites struct {
	run  *Run
	tidy []*kv.Op

	mu   sync.Mutex
	read map[string]*kv.Op // documents read with the take, by key, as they are now
}

// readWithTake returns the answer to a read of key sent with the take of the
// lock, kept current by the hold's own writes; nil when there is none.
func (f *finalWrites) readWithTake(key string) *kv.Op {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.read[key]
}

// wrote records that the hold wrote value under key.
func (f *finalWrites) wrote(key string, value []byte) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.read[key]; ok {
		f.read[key] = &kv.Op{Kind: kv.OpGet, Key: key, Got: value}
	}
}

// finalOf returns the writes that go with the release of run id's lock held
// on ctx's call path, or nil when the path does not hold it.
func finalOf(ctx context.Context, id string) *finalWrites {
	if h := heldEntry(ctx, id); h != nil {
		return h.final
	}
	return nil
}

type heldRunKey struct{}

// holding returns ctx with run id, locked under l, added to its path's held runs.
func holding(ctx context.Context, id string, l *lease.Lease) context.Context {
	up, _ := ctx.Value(heldRunKey{}).(*heldRun)
	return context.WithValue(ctx, heldRunKey{}, &heldRun{id: id, lease: l, up: up, final: &finalWrites{}})
}

// holds reports whether ctx's call path holds run id's lock.
func holds(ctx context.Context, id string) bool { return heldEntry(ctx, id) != nil }

// leaseOf returns the lease under which ctx's call path holds run id's lock, or nil.
func leaseOf(ctx context.Context, id string) *lease.Lease {
	if h := heldEntry(ctx, id); h != nil {
		return h.lease
	}
	return nil
}

func heldEntry(ctx context.Context, id string) *heldRun {
	for h, _ := ctx.Value(heldRunKey{}).(*heldRun); h != nil; h = h.up {
		if h.id == id {
			return h
		}
	}
	return nil
}
