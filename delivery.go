package oauthflow

import (
	"context"
	"errors"
	"log/slog"
)

// A child's end reaches its parent's callback transition exactly once in
// effect. When a child ends, its delivery is written to the due-work index
// first (owe), then tried at once; until one try lands, the Module's worker
// tries again, on any instance. The parent records every child it heard, so a
// try after one that landed changes nothing.

// jobDeliver is the worker's job that delivers a child's end to its parent.
const jobDeliver = "deliver"

// owe records that child r's result is due to its parent.
func (e *Engine) owe(ctx context.Context, r *Run) {
	if err := e.kv.Schedule(ctx, dueIndex, jobDeliver+":"+r.ID, e.now()); err != nil {
		e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: a parent delivery could not be recorded; trying it once now",
			slog.String("run", r.ID), slog.String("error", err.Error()))
	}
}

// deliver fires the callback transition of child's parent with the child's
// result. It returns an error only when a later try may land (the store
// failed); a delivery that can never land (the parent is gone, or not waiting
// for it) is dropped with a warning.
func (e *Engine) deliver(ctx context.Context, child string) error {
	r, err := e.Get(ctx, child)
	if errors.Is(err, ErrRunNotFound) {
		return e.settle(ctx, child)
	}
	if err != nil {
		return err
	}
	if r.ParentID == "" || r.Options.Callback == nil || r.Options.Callback.Transition == "" {
		return e.settle(ctx, child)
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
	return e.settle(ctx, child)
}

// settle removes child's delivery from the due work.
func (e *Engine) settle(ctx context.Context, child string) error {
	if err := e.kv.Unschedule(ctx, dueIndex, jobDeliver+":"+child); err != nil {
		return storeErr(ctx, "settle a delivery", err)
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
