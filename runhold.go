package oauthflow

// Taking, holding and releasing a run: a run's transitions step under its
// lock (a lease), a call that already holds it joins it, and the
// lock is released with the hold's final writes in one batch, the run saved
// before the lock is free.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/lease"
)

// locked runs fn while holding run id's lock, then reports the run's end to its
// parent and the OnRunDone hooks once the lock is released.
func (e *Engine) locked(ctx context.Context, id string, readRun bool, fn func(ctx context.Context, read *kv.Op) (*Run, error)) (*Run, error) {
	ctx, ch, root := chain(ctx)
	if holds(ctx, id) {
		return nil, fmt.Errorf("%w: run %s is already executing in this call", ErrTransitionNotAllowed, id)
	}
	sent := e.now()
	readKey := ""
	if readRun {
		readKey = runKey(id)
	}
	extra := takeOpsFor(ctx, id)
	l, read, err := lease.WaitReading(ctx, e.kv, runLockKey(id), e.lease, readKey, extra...)
	if err != nil {
		return nil, err
	}
	l.Trust(e.now, sent)
	hctx := holding(ctx, id, l)
	var r *Run
	if err = e.checkTakeOps(hctx, id, extra); err == nil {
		r, err = fn(hctx, read)
	}
	err = errors.Join(err, e.saveAndRelease(hctx, id, l))
	if r != nil && r.State == StateEnd && !errors.Is(err, ErrTransitionNotAllowed) {
		e.finished(ctx, ch, r)
	}
	if root {
		ch.drain(ctx)
	}
	return r, err
}

// takeWith carries commands to send with the take of one run's lock: a
// caller that knows what the run's transition will need saves their round
// trips (see withTake).
type takeWith struct {
	id  string
	ops []*kv.Op
}

type takeWithKey struct{}

// withTake returns ctx asking the next take of run id's lock on its path to
// send ops with it, in one batch after the take. A write among them must land
// or the call does not run; a read's answer serves the hold's reads of its key.
func (e *Engine) withTake(ctx context.Context, id string, ops ...*kv.Op) context.Context {
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
func (e *Engine) checkTakeOps(ctx context.Context, id string, ops []*kv.Op) error {
	f := finalOf(ctx, id)
	for _, op := range ops {
		if op.Kind != kv.OpGet {
			if op.Err != nil {
				return errs.Store(ctx, "write with the run's lock", op.Err)
			}
			continue
		}
		f.mu.Lock()
		if f.read == nil {
			f.read = make(map[string]*kv.Op)
		}
		f.read[op.Key] = op
		f.mu.Unlock()
	}
	return nil
}

// stillHeld checks, right before a write of run id's records, that the call
// still holds the run's lock: an instance that hung past its lease (another
// has since ended the run) writes nothing.
func stillHeld(ctx context.Context, id string) error {
	l := leaseOf(ctx, id)
	if l == nil || l.RecentlyProven() {
		return nil
	}
	held, err := l.Confirm(ctx)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("run %s: %w", id, lease.ErrLost)
	}
	return nil
}

// saveAndRelease sends the hold's final writes and then releases l, all in
// one batch: the store runs them in order, so the run is saved before the
// lock is free. The fence holds as for any write: the lock is proven (or
// confirmed) first. A run that cannot be saved (the lock lost, its delivery
// not owed) keeps its due work: only the lock is released.
func (e *Engine) saveAndRelease(ctx context.Context, id string, l *lease.Lease) error {
	l.StopRenewing()
	ctx = context.WithoutCancel(ctx)
	f := finalOf(ctx, id)
	var save []*kv.Op
	var err error
	if f.run != nil {
		if err = stillHeld(ctx, id); err == nil {
			save, err = e.saveOps(ctx, f.run)
		}
	}
	if err != nil { // a run not saved keeps its due work
		save, f.tidy = nil, nil
	}
	ops := append(append(save, f.tidy...), l.ReleaseOp())
	kv.RunBatch(ctx, e.kv, ops...)
	for _, op := range f.tidy {
		if op.Err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: a finished run's due work could not be removed",
				slog.String("run", id), slog.String("work", op.Member), slog.String("error", logSafeError(op.Err)))
		}
	}
	if err != nil {
		return err
	}
	return saveError(ctx, save)
}

// tidyAtRelease removes member from the due-work index with the release of
// run id's lock when ctx's call path holds it, at once otherwise. It only
// tidies: work left behind finds its run moved on and does nothing.
func (e *Engine) tidyAtRelease(ctx context.Context, id, member string) error {
	op := &kv.Op{Kind: kv.OpUnschedule, Key: dueIndex, Member: member}
	if f := finalOf(ctx, id); f != nil {
		f.tidy = append(f.tidy, op)
		return nil
	}
	op.Run(ctx, e.kv)
	if op.Err != nil {
		return errs.Store(ctx, "unschedule "+member, op.Err)
	}
	return nil
}
