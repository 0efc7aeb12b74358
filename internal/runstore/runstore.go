// Package runstore takes, holds and releases a run's record: bytes under a
// key, written only while the run's lock (a lease) is held. A run is held
// under its lock on one call path; a call that already holds it joins it, and
// the lock is released with the hold's final writes in one batch, the record
// saved before the lock is free. What a run's record says, and what to write
// at its end, is the engine's: the package writes what it is given.
package runstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/lease"
)

// Hold is a run whose lock one call path holds, linked to the runs locked
// above it on that path. A path is never changed, only extended in a derived
// context, so goroutines started by one transition each see their own path: a
// sibling holding a run is no re-entry, and waits for the lock like anyone else.
type Hold struct {
	id    string
	lease *lease.Lease
	up    *Hold

	// What the hold sends in one batch with its release: writes the call
	// makes whatever becomes of the record, the record's last save, and
	// removals of due work that only tidy up; then what follows once the
	// batch has run.
	first      []*kv.Op
	save       []*kv.Op
	tidy       []*kv.Op
	saveFailed bool // the last save could not be made: it keeps its due work
	landed     []func(context.Context) error
	after      []func(context.Context, error)

	mu       sync.Mutex
	read     map[string]*kv.Op // documents read with the take or written by the hold, by key, as they are now
	withSave []*kv.Op          // writes of the run's other records that go with its next save
}

type heldKey struct{}

// Take waits for run id's lock, the lease on lockKey, reading readKey (unless
// it is "") and sending the commands WithTake asked for, in one batch after
// the take. It returns ctx with the run added to its path's held runs, and
// the read. An error with a hold is a write sent with the take that failed:
// the caller runs nothing, and releases the hold.
func Take(ctx context.Context, store kv.Store, id, lockKey string, ttl time.Duration, now func() time.Time, readKey string) (context.Context, *Hold, *kv.Op, error) {
	sent := now()
	extra := takeOpsFor(ctx, id)
	l, read, err := lease.WaitReading(ctx, store, lockKey, ttl, readKey, extra...)
	if err != nil {
		return ctx, nil, nil, err
	}
	l.Trust(now, sent)
	up, _ := ctx.Value(heldKey{}).(*Hold)
	h := &Hold{id: id, lease: l, up: up}
	ctx = context.WithValue(ctx, heldKey{}, h)
	return ctx, h, read, h.checkTakeOps(ctx, extra)
}

// takeWith carries commands to send with the take of one run's lock: a
// caller that knows what the run's transition will need saves their round
// trips (see WithTake).
type takeWith struct {
	id  string
	ops []*kv.Op
}

type takeWithKey struct{}

// WithTake returns ctx asking the next take of run id's lock on its path to
// send ops with it, in one batch after the take. A write among them must land
// or the call does not run; a read's answer serves the hold's reads of its key.
func WithTake(ctx context.Context, id string, ops ...*kv.Op) context.Context {
	return context.WithValue(ctx, takeWithKey{}, &takeWith{id: id, ops: ops})
}

func takeOpsFor(ctx context.Context, id string) []*kv.Op {
	if t, ok := ctx.Value(takeWithKey{}).(*takeWith); ok && t.id == id {
		return t.ops
	}
	return nil
}

// checkTakeOps checks the commands sent with the take and keeps their reads
// for the hold.
func (h *Hold) checkTakeOps(ctx context.Context, ops []*kv.Op) error {
	for _, op := range ops {
		if op.Kind != kv.OpGet {
			if op.Err != nil {
				return errs.Store(ctx, "write with the run's lock", op.Err)
			}
			continue
		}
		h.mu.Lock()
		if h.read == nil {
			h.read = make(map[string]*kv.Op)
		}
		h.read[op.Key] = op
		h.mu.Unlock()
	}
	return nil
}

// Of returns the hold of run id's lock on ctx's call path, or nil when the
// path does not hold it.
func Of(ctx context.Context, id string) *Hold {
	for h, _ := ctx.Value(heldKey{}).(*Hold); h != nil; h = h.up {
		if h.id == id {
			return h
		}
	}
	return nil
}

// Holds reports whether ctx's call path holds run id's lock.
func Holds(ctx context.Context, id string) bool { return Of(ctx, id) != nil }

// StillHeld checks, right before a write of run id's records, that the call
// still holds the run's lock: an instance that hung past its lease (another
// has since ended the run) writes nothing. A path that does not hold the
// lock is not fenced.
func StillHeld(ctx context.Context, id string) error {
	h := Of(ctx, id)
	if h == nil || h.lease.RecentlyProven() {
		return nil
	}
	held, err := h.lease.Confirm(ctx)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("run %s: %w", id, lease.ErrLost)
	}
	return nil
}

// ReadWithTake returns the answer to a read of key sent with the take of the
// lock, kept current by the hold's own writes; nil when there is none.
func (h *Hold) ReadWithTake(key string) *kv.Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.read[key]
}

// Wrote records that the hold wrote value under key.
func (h *Hold) Wrote(key string, value []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.read[key]; ok {
		h.read[key] = &kv.Op{Kind: kv.OpGet, Key: key, Got: value}
	}
}

// WithSave sends op, a write of another of the run's records (a document),
// with the record's next save, ahead of it in the same batch: it is fenced
// as the save is, and when the save is not made, neither is op. A later
// write of the same key replaces it. Reads on the hold's path see its value
// from now on (ReadWithTake).
func (h *Hold) WithSave(op *kv.Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.withSave = slices.DeleteFunc(h.withSave, func(o *kv.Op) bool { return o.Key == op.Key })
	h.withSave = append(h.withSave, op)
	if h.read == nil {
		h.read = make(map[string]*kv.Op)
	}
	h.read[op.Key] = &kv.Op{Kind: kv.OpGet, Key: op.Key, Got: op.Value}
}

// TakeWithSave returns the writes WithSave gave since it was last called,
// for the save that carries them.
func (h *Hold) TakeWithSave() []*kv.Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	ops := h.withSave
	h.withSave = nil
	return ops
}

// Fence readies a write of run id's record on ctx's call path, before any
// of it is made: it checks that the call still holds the run's lock
// (StillHeld). When last and the path holds the lock, it returns the hold,
// which sends the save with its release (SaveAtRelease), and ctx without its
// cancellation: a run's last save is made whether or not its caller stays.
// Otherwise the hold is nil, and the caller writes at once.
func Fence(ctx context.Context, id string, last bool) (context.Context, *Hold, error) {
	var h *Hold
	if last {
		if h = Of(ctx, id); h != nil {
			ctx = context.WithoutCancel(ctx)
		}
	}
	return ctx, h, StillHeld(ctx, id)
}

// SaveAtRelease makes ops the record's last save, sent with the release,
// and returns err. A save that could not be made (err: the lock lost, a
// write it needed refused) is none: the release frees only the lock, and
// the record keeps its due work.
func (h *Hold) SaveAtRelease(ops []*kv.Op, err error) error {
	if err != nil {
		h.save, h.saveFailed = nil, true
		return err
	}
	h.save = ops
	return nil
}

// TidyAtRelease sends op, a removal that only tidies up, with the release.
func (h *Hold) TidyAtRelease(op *kv.Op) { h.tidy = append(h.tidy, op) }

// WriteAtRelease sends ops first in the release's batch, ahead of the
// record's last save and whether or not that save is made: writes the call
// makes whatever becomes of the run (a sign-in's tokens, which its provider
// gives once), kept back only to share the batch. Once the batch has run,
// Release calls landed, which reads their results; its error is the
// release's.
func (h *Hold) WriteAtRelease(landed func(context.Context) error, ops ...*kv.Op) {
	h.first = append(h.first, ops...)
	h.landed = append(h.landed, landed)
}

// AfterRelease calls fn once the lock is released and the writes
// WriteAtRelease gave were read, with their failure (nil when they landed).
func (h *Hold) AfterRelease(fn func(ctx context.Context, failed error)) {
	h.after = append(h.after, fn)
}

// Release sends the hold's final writes and then releases the lock, all in
// one batch on store: the store runs them in order, so the record is saved
// before the lock is free. It returns the save's and the tidying's commands,
// with their results, once it has called, with ctx, the landed functions
// WriteAtRelease gave (err joins their failures) and then what
// AfterRelease gave.
func (h *Hold) Release(ctx context.Context, store kv.Store) (save, tidy []*kv.Op, err error) {
	h.lease.StopRenewing()
	if h.saveFailed { // a record not saved keeps its due work
		h.tidy = nil
	}
	ops := slices.Concat(h.first, h.save, h.tidy, []*kv.Op{h.lease.ReleaseOp()})
	kv.RunBatch(context.WithoutCancel(ctx), store, ops...)
	for _, landed := range h.landed {
		err = errors.Join(err, landed(ctx))
	}
	for _, fn := range h.after {
		fn(ctx, err)
	}
	return h.save, h.tidy, err
}
