package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Documents are named JSON records attached to a run (the sign-in prompt is
// "oauthPrompt"), kept as long as their run.

// Document decodes the run's document name into v.
func (e *Engine) Document(ctx context.Context, runID, name string, v any) error {
	d, err := e.GetDocument(ctx, runID, name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(d.Data, v); err != nil {
		return fmt.Errorf("%w: document %s: %w", ErrCorruptRecord, name, err)
	}
	return nil
}

// GetDocument returns the run's document name with its widget, or ErrNotFound.
func (e *Engine) GetDocument(ctx context.Context, runID, name string) (*Document, error) {
	if !issuedRunID(runID) || !validProviderID(name) {
		return nil, fmt.Errorf("%w: document %q of run %q", ErrNotFound, name, runID)
	}
	b, err := e.readDocument(ctx, runID, docKey(runID, name))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: document %q of run %q", ErrNotFound, name, runID)
	}
	if err != nil {
		return nil, errs.Store(ctx, "read document", err)
	}
	var d Document
	if err := strictUnmarshal(b, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// readDocument reads key, or takes the answer read with the take of run
// runID's lock on ctx's path (withTake), kept current by its writes.
func (e *Engine) readDocument(ctx context.Context, runID, key string) ([]byte, error) {
	if f := finalOf(ctx, runID); f != nil {
		if op := f.readWithTake(key); op != nil {
			return op.Got, op.Err
		}
	}
	return e.kv.Get(xcontext.OrBackground(ctx), key)
}

func (e *Engine) saveDocument(ctx context.Context, r *Run, name, widget string, v any) error {
	if !validProviderID(name) {
		return errs.Invalid("document name %q is not valid", name)
	}
	data, err := marshalArg(v)
	if err != nil {
		return err
	}
	b, err := json.Marshal(Document{Name: name, Widget: widget, Data: data, UpdatedAt: e.now().UnixMilli()})
	if err != nil {
		return fmt.Errorf("oauthflow: encode document: %w", err)
	}
	if err := stillHeld(ctx, r.ID); err != nil {
		return err
	}
	if err := e.kv.Set(ctx, docKey(r.ID, name), b, e.ttlOf(r)); err != nil {
		return errs.Store(ctx, "save document", err)
	}
	if f := finalOf(ctx, r.ID); f != nil {
		f.wrote(docKey(r.ID, name), b)
	}
	if r.Documents == nil {
		r.Documents = make(map[string]string)
	}
	r.Documents[name] = widget
	if r.written == nil {
		r.written = make(map[string][]byte)
	}
	r.written[name] = b
	return nil
}

// shortenOps are the writes that give an ended run's documents its shorter
// TTL; a document saved under this lock is not read back first.
func (e *Engine) shortenOps(ctx context.Context, r *Run) ([]*kv.Op, error) {
	var ops []*kv.Op
	for name := range r.Documents {
		b, ok := r.written[name]
		if !ok {
			var err error
			b, err = e.kv.Get(ctx, docKey(r.ID, name))
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, errs.Store(ctx, "expire document", err)
			}
		}
		ops = append(ops, &kv.Op{Kind: kv.OpCompareAndExpire, Key: docKey(r.ID, name), Value: b, TTL: e.doneTTL})
	}
	return ops, nil
}
