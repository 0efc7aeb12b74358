package oauthflow

// Saving a run: every write of a run's records is fenced by its lock, and
// the writes that must land together (the run, the delivery owed to its
// parent) go as one list of operations.

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
)

func (e *Engine) save(ctx context.Context, r *Run) error {
	if err := stillHeld(ctx, r.ID); err != nil {
		return err
	}
	ops, err := e.saveOps(ctx, r)
	if err != nil {
		return err
	}
	kv.RunBatch(ctx, e.kv, ops...)
	return saveError(ctx, ops)
}

// saveLast saves r with the release of its lock when ctx's call path holds it
// (saveAndRelease sends both in one batch), at once otherwise.
func (e *Engine) saveLast(ctx context.Context, r *Run) error {
	if f := finalOf(ctx, r.ID); f != nil {
		f.run = r
		return nil
	}
	return e.save(ctx, r)
}

// saveOps are the writes that save r: the run, and for an ended run its
// documents' shorter TTL. An ended child's delivery is owed first, here: its
// end is not saved unless the delivery is recorded.
func (e *Engine) saveOps(ctx context.Context, r *Run) ([]*kv.Op, error) {
	r.UpdatedAt = e.now().UnixMilli()
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("oauthflow: encode run: %w", err)
	}
	ops := []*kv.Op{{Kind: kv.OpSet, Key: runKey(r.ID), Value: b, TTL: e.ttlOf(r)}}
	if r.State != StateEnd {
		return ops, nil
	}
	if err := e.recordDelivery(ctx, r); err != nil {
		return nil, err
	}
	expire, err := e.shortenOps(ctx, r)
	return append(ops, expire...), err
}

// saveError is the error of the first save op that failed; nil when all landed.
func saveError(ctx context.Context, ops []*kv.Op) error {
	for i, op := range ops {
		if op.Err == nil {
			continue
		}
		if i == 0 {
			return errs.Store(ctx, "save run", op.Err)
		}
		return errs.Store(ctx, "expire document", op.Err)
	}
	return nil
}

// ttlOf is how long r and its documents are kept: a run that has ended, for
// the finished-run TTL only.
func (e *Engine) ttlOf(r *Run) time.Duration {
	if r.State == StateEnd {
		return e.doneTTL
	}
	return e.ttl
}
