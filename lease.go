package oauthflow

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// errLeaseLost means a lease holder found, right before a write, that the lock
// is no longer its own: it wrote nothing.
var errLeaseLost = errors.New("oauthflow: the lock was lost before the write")

// lease is a lock in the KV held by one owner, renewed while held and freed by
// its TTL if the holder dies. Every command touches one key (Cluster-safe).
type lease struct {
	kv    kv.Store
	key   string
	owner []byte
	ttl   time.Duration
	stop  func()

	// now, when set, lets the holder trust a recent proof instead of asking
	// the store again (proven): the lease's TTL counts from the moment the
	// command that took or renewed it reached the store, so for a while after
	// the moment before it was sent the lock cannot have lapsed.
	now    func() time.Time
	proven atomic.Int64 // UnixNano by now, before the last take or renewal that held; 0: none
}

// trustedFor is how long after a proof a holder writes without asking again:
// a tenth of the lease, far inside the time the lock is sure to be its own.
func (l *lease) trustedFor() time.Duration { return l.ttl / 10 }

// proveAt records that the lease was taken or renewed by a command sent after t.
func (l *lease) proveAt(t time.Time) { l.proven.Store(t.UnixNano()) }

// recentlyProven reports whether the lock is certainly still the holder's
// without asking the store.
func (l *lease) recentlyProven() bool {
	if l.now == nil {
		return false
	}
	p := l.proven.Load()
	return p != 0 && l.now().UnixNano()-p < int64(l.trustedFor())
}

// tryLease takes key if it is free.
func tryLease(ctx context.Context, store kv.Store, key string, ttl time.Duration) (*lease, bool, error) {
	owner := []byte(randomHex(16))
	ok, err := store.SetNX(ctx, key, owner, ttl)
	if err != nil {
		return nil, false, errs.Store(ctx, "take lock", err)
	}
	if !ok {
		return nil, false, nil
	}
	return held(ctx, store, key, owner, ttl), true, nil
}

// held is the lease on key that owner has just taken, renewed from now on.
func held(ctx context.Context, store kv.Store, key string, owner []byte, ttl time.Duration) *lease {
	l := &lease{kv: store, key: key, owner: owner, ttl: ttl}
	l.stop = l.renewEvery(ctx)
	return l
}

// waitLeaseReading is waitLease that also reads readKey (unless it is "")
// and runs extra once the lock is taken. A free lock is taken, read and the
// extra commands run in one batch (one round trip where the store can keep
// the order): they run after the take, so a read sees what the previous
// holder left.
func waitLeaseReading(ctx context.Context, store kv.Store, key string, ttl time.Duration, readKey string, extra ...*kv.Op) (*lease, *kv.Op, error) {
	if readKey == "" && len(extra) == 0 {
		l, err := waitLease(ctx, store, key, ttl)
		return l, nil, err
	}
	owner := []byte(randomHex(16))
	take := &kv.Op{Kind: kv.OpSetNX, Key: key, Value: owner, TTL: ttl}
	var read *kv.Op
	batch := []*kv.Op{take}
	if readKey != "" {
		read = &kv.Op{Kind: kv.OpGet, Key: readKey}
		batch = append(batch, read)
	}
	kv.RunBatch(ctx, store, append(batch, extra...)...)
	if take.Err != nil {
		return nil, nil, errs.Store(ctx, "take lock", take.Err)
	}
	if take.OK {
		return held(ctx, store, key, owner, ttl), read, nil
	}
	// Someone else holds it: what was read went before the take, so it is
	// read again, with the extra commands, once the lock is ours.
	l, err := waitLease(ctx, store, key, ttl)
	if err != nil {
		return nil, nil, err
	}
	batch = batch[1:]
	for _, op := range append(batch, extra...) {
		op.OK, op.Got, op.Err = false, nil, nil
	}
	kv.RunBatch(ctx, store, append(batch, extra...)...)
	return l, read, nil
}

// waitLease takes key, waiting with a short backoff while someone else holds it.
func waitLease(ctx context.Context, store kv.Store, key string, ttl time.Duration) (*lease, error) {
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 25*time.Millisecond) {
		l, ok, err := tryLease(ctx, store, key, ttl)
		if err != nil || ok {
			return l, err
		}
		if err := xcontext.Sleep(ctx, backoff); err != nil {
			return nil, fmt.Errorf("oauthflow: waiting for lock %s: %w", key, err)
		}
	}
}

// confirm renews the lease and reports whether it is still ours. A holder calls
// it right before a write and writes nothing when it is not: a renewal that
// failed may have let the lock expire and another owner take it.
func (l *lease) confirm(ctx context.Context) (bool, error) {
	var sent time.Time
	if l.now != nil {
		sent = l.now()
	}
	ok, err := l.kv.CompareAndExpire(ctx, l.key, l.owner, l.ttl)
	if err != nil {
		return false, errs.Store(ctx, "renew lock", err)
	}
	if ok && l.now != nil {
		l.proveAt(sent)
	}
	return ok, nil
}

// release stops the renewal and frees the lock if it is still ours.
func (l *lease) release(ctx context.Context) {
	l.stop()
	_, _ = l.kv.CompareAndDelete(context.WithoutCancel(ctx), l.key, l.owner)
}

// renewEvery extends the lease every ttl/3 until the returned stop is called,
// ctx ends, or a renewal finds the lock in other hands (nothing left to renew).
func (l *lease) renewEvery(ctx context.Context) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(max(l.ttl/3, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				if ok, err := l.kv.CompareAndExpire(ctx, l.key, l.owner, l.ttl); err == nil && !ok {
					return
				}
			}
		}
	}()
	return func() { close(done); <-exited }
}
