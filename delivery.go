package oauthflow

import (
	"context"
	"errors"
	"log/slog"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// A child's end reaches its parent's callback transition exactly once in
// effect. Before a child's end is saved, its delivery is written to the
// due-work index (recordDelivery); an end whose delivery cannot be recorded
// is not saved, so no failure after the save (a store blip, a crash) leaves
// an ended child whose parent nothing will resume. The delivery is tried once
// the child's lock is released; until one try lands, the Module's worker
// tries again, on any instance. The parent records every child it heard, so
// a try after one that landed changes nothing.

// jobDeliver is the worker's job that delivers a child's end to its parent.
const jobDeliver = "deliver"

// recordDelivery records that r's result is due to its parent, when r is an
// ended child with a callback. Called before r's end is saved, which fails
// with it.
func (e *Engine) recordDelivery(ctx context.Context, r *Run) error {
	if r.State != StateEnd || !reportsToParent(r) {
		return nil
	}
	if err := e.kv.Schedule(ctx, dueIndex, jobDeliver+":"+r.ID, e.now()); err != nil {
		return errs.Store(ctx, "record the parent delivery", err)
	}
	return nil
}

// reportsToParent reports whether r's end is delivered to a parent.
func reportsToParent(r *Run) bool {
	return r.ParentID != "" && r.Options.Callback != nil && r.Options.Callback.Transition != ""
}

// deliver fires the callback transition of child's parent with the child's
// result. It returns an error only when a later try may land (the store
// failed, or the child's end is not saved yet); a delivery that can never
// land (the parent is gone, or not waiting for it) is dropped with a warning.
func (e *Engine) deliver(ctx context.Context, child string) error {
	r, err := e.Get(ctx, child)
	if errors.Is(err, ErrRunNotFound) {
		return e.removeDelivery(ctx, child)
	}
	if err != nil {
		return err
	}
	if !reportsToParent(r) {
		return e.removeDelivery(ctx, child)
	}
	if r.State != StateEnd {
		// Owed before the end's save landed (or the save failed): the entry
		// stays, claimed again later, until the end is saved and owed anew.
		return errHandled
	}
	in, err := marshalArg(ChildResult{RunID: r.ID, Status: r.Status, Result: r.Result})
	if err != nil {
		return err
	}
	_, err = e.fire(ctx, r.ParentID, r.Options.Callback.Transition, in, r.UserID, r.ID)
	if retryable(err) {
		return err
	}
	if err != nil && !isTransitionFailure(err) {
		e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: a child's result cannot reach its parent",
			slog.String("run", r.ID), slog.String("parent", r.ParentID), slog.String("error", logSafeError(err)))
	}
	return e.removeDelivery(ctx, child)
}

// removeDelivery removes child's delivery from the due work.
func (e *Engine) removeDelivery(ctx context.Context, child string) error {
	if err := e.kv.Unschedule(ctx, dueIndex, jobDeliver+":"+child); err != nil {
		return errs.Store(ctx, "settle a delivery", err)
	}
	return nil
}

// retryable reports whether a delivery that failed with err may land later.
func retryable(err error) bool {
	return errors.Is(err, ErrStoreUnavailable) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled)
}

// isTransitionFailure reports whether err is the parent transition's own
// failure: the result was delivered, and the parent ended as failed.
func isTransitionFailure(err error) bool {
	return !errors.Is(err, ErrTransitionNotAllowed) && !errors.Is(err, ErrRunNotFound) && !errors.Is(err, ErrForbidden)
}
