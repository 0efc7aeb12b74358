package oauthflow

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// TransitionContext is what a transition's function works with.
type TransitionContext struct {
	Run    *Run
	Input  json.RawMessage // what Fire was given; nil for automatic transitions
	engine *Engine
	next   string
	mu     sync.Mutex // guards Run.Children for Launch from several goroutines
}

// GoTo makes the transition lead to state instead of its To: how a step
// branches (a tool reported unauthorized: wait for sign-in instead of ending).
func (tc *TransitionContext) GoTo(state string) { tc.next = state }

// DecodeInput decodes the transition's input strictly into v.
func (tc *TransitionContext) DecodeInput(v any) error { return decodeStrict(tc.Input, v, "input") }

// DecodeArgs decodes the run's launch arguments strictly into v.
func (tc *TransitionContext) DecodeArgs(v any) error {
	return decodeStrict(tc.Run.Args, v, "arguments")
}

// DecodeData decodes the workflow's own state into v.
func (tc *TransitionContext) DecodeData(v any) error { return decodeStrict(tc.Run.Data, v, "data") }

// SetData replaces the workflow's own state.
func (tc *TransitionContext) SetData(v any) (err error) {
	tc.Run.Data, err = marshalArg(v)
	return err
}

// SetResult sets what the run returns when it ends.
func (tc *TransitionContext) SetResult(v any) (err error) {
	tc.Run.Result, err = marshalArg(v)
	return err
}

// SaveDocument stores v as the run's document name, rendered by widget.
func (tc *TransitionContext) SaveDocument(ctx context.Context, name, widget string, v any) error {
	return tc.engine.saveDocument(ctx, tc.Run, name, widget, v)
}

// Launch starts a child run of this run for the same user. When the child
// ends, opts.Callback's transition is fired on this run; a child that ends
// during this transition is heard once the transition is over. Several
// goroutines may call Launch; the transition waits for them before it returns.
func (tc *TransitionContext) Launch(ctx context.Context, workflow string, args any, opts RunOptions) (*Run, error) {
	opts.ParentID = tc.Run.ID
	child, err := tc.engine.Launch(ctx, tc.Run.UserID, workflow, args, opts)
	if child != nil {
		tc.mu.Lock()
		tc.Run.Children = append(tc.Run.Children, child.ID)
		tc.mu.Unlock()
	}
	return child, err
}

func decodeStrict(raw json.RawMessage, v any, what string) error {
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if err := strictDecode(raw, v); err != nil {
		return errs.Invalid("%s: %w", what, err)
	}
	return nil
}
