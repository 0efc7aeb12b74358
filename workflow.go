package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// The states every workflow has.
const (
	StateStart = "start"
	StateEnd   = "end"
)

// Run statuses.
const (
	RunRunning   = "running"   // transitions are executing
	RunWaiting   = "waiting"   // resting in a state whose transitions are fired from outside
	RunCompleted = "completed" // reached end
	RunFailed    = "failed"    // a transition failed; the run ended
)

// showInline is the default RunOptions.Show: the run renders inside its parent's view.
const showInline = "inline"

// defaultRunTTL is how long runs and their documents are kept.
const defaultRunTTL = 30 * 24 * time.Hour

// defaultFinishedRunTTL is how long a run that has ended, and its documents, are kept.
const defaultFinishedRunTTL = 24 * time.Hour

var (
	// errUnknownWorkflow is returned for a workflow name no one registered.
	errUnknownWorkflow = errors.New("oauthflow: unknown workflow")
	// ErrRunNotFound is returned for a run ID that is unknown or expired.
	ErrRunNotFound = errors.New("oauthflow: run not found")
	// ErrTransitionNotAllowed is returned when a transition cannot fire from the run's state.
	ErrTransitionNotAllowed = errors.New("oauthflow: transition not allowed in this state")
)

// Workflow is a small state machine: named states, and transitions between them.
// Every workflow starts in "start" and finishes in "end".
type Workflow struct {
	Name        string
	States      []string
	Transitions []Transition

	// maxWait, when set, is the longest a run of it can wait before it ends
	// (the oauth workflow's sign-ins): a run with no parent that has not
	// ended is kept that long and FinishedRunTTL more, instead of 30 days, so
	// one that nothing ends (no instance running) does not linger.
	maxWait time.Duration
}

// Transition moves a run From one state To another. A Wait transition is fired
// from outside (an HTTP callback, a child's completion) with Engine.Fire; the
// others run on their own as soon as the run rests in From.
type Transition struct {
	Name     string
	From, To string
	Wait     bool
	Do       func(ctx context.Context, tc *TransitionContext) error
}

// Callback names the parent's transition fired when a child run ends.
type Callback struct {
	Transition string `json:"transition"`
}

// RunOptions are given at launch. Show "" means "inline", the default: the
// run renders inside its parent's view.
type RunOptions struct {
	ParentID string    `json:"parentId,omitempty"`
	Callback *Callback `json:"callback,omitempty"`
	Show     string    `json:"show,omitempty"`
}

// Run is one execution of a workflow, persisted in the KV so that any instance
// can fire its transitions.
type Run struct {
	ID        string            `json:"id"`
	Workflow  string            `json:"workflow"`
	UserID    string            `json:"userId"`
	State     string            `json:"state"`
	Status    string            `json:"status"`
	ParentID  string            `json:"parentId,omitempty"`
	Options   RunOptions        `json:"options"`
	Args      json.RawMessage   `json:"args,omitempty"`
	Result    json.RawMessage   `json:"result,omitempty"`
	Error     string            `json:"error,omitempty"` // a human message when the run failed
	Data      json.RawMessage   `json:"data,omitempty"`  // the workflow's own state; never shown to users
	Documents map[string]string `json:"documents,omitempty"`
	Children  []string          `json:"children,omitempty"`
	Heard     []string          `json:"heard,omitempty"` // children whose results reached this run
	CreatedAt int64             `json:"createdAt"`       // Unix ms
	UpdatedAt int64             `json:"updatedAt"`

	written map[string][]byte // documents saved under the lock this call holds, as saved
}

// ChildResult is the input of a parent's callback transition.
type ChildResult struct {
	RunID  string          `json:"runId"`
	Status string          `json:"status"`
	Result json.RawMessage `json:"result,omitempty"`
}

// document is a named record attached to a run and rendered by a widget.
type document struct {
	Name      string          `json:"name"`
	Widget    string          `json:"widget"`
	Data      json.RawMessage `json:"data"`
	UpdatedAt int64           `json:"updatedAt"`
}

func validateWorkflow(w *Workflow) error {
	if w == nil || w.Name == "" {
		return errs.Invalid("a workflow needs a name")
	}
	states := make(map[string]bool, len(w.States))
	for _, s := range w.States {
		states[s] = true
	}
	if !states[StateStart] || !states[StateEnd] {
		return errs.Invalid("workflow %q must declare the states %q and %q", w.Name, StateStart, StateEnd)
	}
	names := make(map[string]bool)
	auto := make(map[string]bool)
	for _, t := range w.Transitions {
		switch {
		case t.Name == "" || names[t.Name]:
			return errs.Invalid("workflow %q: transition names must be unique and non-empty (%q)", w.Name, t.Name)
		case !states[t.From] || !states[t.To]:
			return errs.Invalid("workflow %q: transition %q joins undeclared states", w.Name, t.Name)
		case t.Do == nil:
			return errs.Invalid("workflow %q: transition %q has no function", w.Name, t.Name)
		case !t.Wait && auto[t.From]:
			return errs.Invalid("workflow %q: more than one automatic transition leaves %q", w.Name, t.From)
		case !t.Wait && t.From == StateEnd:
			return errs.Invalid("workflow %q: nothing runs on its own after end", w.Name)
		}
		names[t.Name] = true
		auto[t.From] = auto[t.From] || !t.Wait
	}
	return nil
}

func (w *Workflow) find(name string) *Transition {
	for i := range w.Transitions {
		if w.Transitions[i].Name == name {
			return &w.Transitions[i]
		}
	}
	return nil
}

// step runs t with tc and returns the state it leads to: t.To, or the one
// it chose with GoTo, which must be one of w's. A panic in t is its error.
func (w *Workflow) step(ctx context.Context, t *Transition, tc *TransitionContext) (next string, err error) {
	defer errs.Recover(&err, "transition "+t.Name)
	if err := t.Do(ctx, tc); err != nil {
		return "", err
	}
	if tc.next == "" {
		return t.To, nil
	}
	if !slices.Contains(w.States, tc.next) {
		return "", fmt.Errorf("oauthflow: transition %q went to undeclared state %q", t.Name, tc.next)
	}
	return tc.next, nil
}

// autoFrom returns the transition that runs on its own from state, if any.
func (w *Workflow) autoFrom(state string) *Transition {
	for i := range w.Transitions {
		if t := &w.Transitions[i]; t.From == state && !t.Wait {
			return t
		}
	}
	return nil
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
