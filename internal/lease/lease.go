// Package lease holds locks in the KV: a lease on one key, held by one owner,
// renewed while held and freed by its TTL if the holder dies. Every command
// touches one key (Cluster-safe).
package lease

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// ErrLost means a lease holder found, right before a write, that the lock
// is no longer its own: it wrote nothing.
var ErrLost = errors.New("oauthflow: the lock was lost before the write")

// Lease is a lock in the KV held by one owner, renewed while held and freed by
// its TTL if the holder dies.
type Lease struct {
	kv    kv.Store
	key   string
	owner []byte
	ttl   time.Duration
	stop  func()

	// now, when set, lets the holder trust a recent proof instead of asking
	// the store again (RecentlyProven): the lease's TTL counts from the moment
	// the command that took or renewed it reached the store, so for a while
	// after the moment before it was sent the lock cannot have lapsed.
	now    func() time.Time
	proven atomic.Int64 // UnixNano by now, before the last take or renewal that held; 0: none
}

// trustedFor is how long after a proof a holder writes without asking again:
// a tenth of the lease, far inside the time the lock is sure to be its own.
func (l *Lease) trustedFor() time.Duration { return l.ttl / 10 }

// proveAt records that the lease was taken or renewed by a command sent after t.
func (l *Lease) proveAt(t time.Time) { l.proven.Store(t.UnixNano()) }

// Trust lets the holder trust, by the clock now, that the lock is its own for
// a while after a proof; the take itself is the first, its command sent after
// sent. Call it before the lease is shared.
func (l *Lease) Trust(now func() time.Time, sent time.Time) {
	l.now = now
	l.proveAt(sent)
}

// RecentlyProven reports whether the lock is certainly still the holder's
// without asking the store.
func (l *Lease) RecentlyProven() bool {
	if l.now == nil {
		return false
	}
	p := l.proven.Load()
	return p != 0 && l.now().UnixNano()-p < int64(l.trustedFor())
}

// Try takes key if it is free.
func Try(ctx context.Context, store kv.Store, key string, ttl time.Duration) (*Lease, bool, error) {
	owner := newOwner()
	ok, err := store.SetNX(ctx, key, owner, ttl)
	if err != nil {
		return nil, false, errs.Store(ctx, "take lock", err)
	}
	if !ok {
		return nil, false, nil
	}
	return held(ctx, store, key, owner, ttl), true, nil
}

// TryReading is Try that also reads readKeys in the same batch, after the
// take (one round trip where the store can keep the order). When the lock is
// taken, the reads saw what the previous holder left; when it is not, they
// are nil and the caller reads nothing into them.
func TryReading(ctx context.Context, store kv.Store, key string, ttl time.Duration, readKeys ...string) (*Lease, []*kv.Op, bool, error) {
	owner := newOwner()
	take := &kv.Op{Kind: kv.OpSetNX, Key: key, Value: owner, TTL: ttl}
	batch := make([]*kv.Op, 1, 1+len(readKeys))
	batch[0] = take
	for _, k := range readKeys {
		batch = append(batch, &kv.Op{Kind: kv.OpGet, Key: k})
	}
	kv.RunBatch(ctx, store, batch...)
	if take.Err != nil {
		return nil, nil, false, errs.Store(ctx, "take lock", take.Err)
	}
	if !take.OK {
		return nil, nil, false, nil
	}
	return held(ctx, store, key, owner, ttl), batch[1:], true, nil
}

// newOwner is a fresh owner's mark: 16 random bytes, hex.
func newOwner() []byte {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.AppendEncode(nil, b)
}

// held is the lease on key that owner has just taken, renewed from now on.
func held(ctx context.Context, store kv.Store, key string, owner []byte, ttl time.Duration) *Lease {
	l := &Lease{kv: store, key: key, owner: owner, ttl: ttl}
	l.stop = l.renewEvery(ctx)
	return l
}

// WaitReading is Wait that also reads readKey (unless it is "") and runs
// extra once the lock is taken. A free lock is taken, read and the extra
// commands run in one batch (one round trip where the store can keep the
// order): they run after the take, so a read sees what the previous holder
// left.
func WaitReading(ctx context.Context, store kv.Store, key string, ttl time.Duration, readKey string, extra ...*kv.Op) (*Lease, *kv.Op, error) {
	if readKey == "" && len(extra) == 0 {
		l, err := Wait(ctx, store, key, ttl)
		return l, nil, err
	}
	owner := newOwner()
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
	l, err := Wait(ctx, store, key, ttl)
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

// Wait takes key, waiting with a short backoff while someone else holds it.
func Wait(ctx context.Context, store kv.Store, key string, ttl time.Duration) (*Lease, error) {
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 25*time.Millisecond) {
		l, ok, err := Try(ctx, store, key, ttl)
		if err != nil || ok {
			return l, err
		}
		if err := xcontext.Sleep(ctx, backoff); err != nil {
			return nil, fmt.Errorf("oauthflow: waiting for lock %s: %w", key, err)
		}
	}
}

// Confirm renews the lease and reports whether it is still ours. A holder calls
// it right before a write and writes nothing when it is not: a renewal that
// failed may have let the lock expire and another owner take it.
func (l *Lease) Confirm(ctx context.Context) (bool, error) {
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

// Release stops the renewal and frees the lock if it is still ours.
func (l *Lease) Release(ctx context.Context) {
	l.stop()
	_, _ = l.kv.CompareAndDelete(context.WithoutCancel(ctx), l.key, l.owner)
}

// StopRenewing stops the renewal, for a holder that frees the lock in a batch
// of its own (ReleaseOp). It returns once no renewal runs.
func (l *Lease) StopRenewing() { l.stop() }

// ReleaseOp is the command that frees the lock if it is still ours, for a
// batch that ends with it; call StopRenewing first.
func (l *Lease) ReleaseOp() *kv.Op {
	return &kv.Op{Kind: kv.OpCompareAndDelete, Key: l.key, Value: l.owner}
}

// renewEvery extends the lease every ttl/3 until the returned stop is called,
// ctx ends, or a renewal finds the lock in other hands (nothing left to renew).
func (l *Lease) renewEvery(ctx context.Context) (stop func()) {
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
