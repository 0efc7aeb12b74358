package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"
)

// Engine runs workflows. Runs and documents live in the KV; a run's transitions
// are serialised by a lease lock in the KV, so they never fire twice, even when
// several instances share the store.
type Engine struct {
	kv      KV
	now     func() time.Time
	log     *slog.Logger
	ttl     time.Duration
	doneTTL time.Duration
	lease   time.Duration
	mu      sync.RWMutex
	flows   map[string]*Workflow
	onDone  []func(ctx context.Context, r *Run)
}

// EngineOption configures an Engine.
type EngineOption func(*Engine)

// WithEngineClock sets the engine's clock.
func WithEngineClock(now func() time.Time) EngineOption {
	return func(e *Engine) {
		if now != nil {
			e.now = now
		}
	}
}

// WithEngineLogger sets the engine's logger.
func WithEngineLogger(l *slog.Logger) EngineOption {
	return func(e *Engine) {
		if l != nil {
			e.log = l
		}
	}
}

// WithRunLease sets how long a run's lock outlives an instance that stopped
// renewing it (default 30 s).
func WithRunLease(d time.Duration) EngineOption {
	return func(e *Engine) {
		if d > 0 {
			e.lease = max(d, time.Millisecond)
		}
	}
}

// WithFinishedRunTTL sets how long a run that has ended, and its documents,
// are kept (default 24 hours).
func WithFinishedRunTTL(d time.Duration) EngineOption {
	return func(e *Engine) {
		if d > 0 {
			e.doneTTL = d
		}
	}
}

// WithRunTTL sets how long runs and documents are kept (default 30 days).
func WithRunTTL(d time.Duration) EngineOption {
	return func(e *Engine) {
		if d > 0 {
			e.ttl = d
		}
	}
}

// NewEngine returns an engine storing runs in kv.
func NewEngine(kv KV, opts ...EngineOption) *Engine {
	e := &Engine{kv: kv, now: time.Now, log: slog.Default(), ttl: DefaultRunTTL, doneTTL: DefaultFinishedRunTTL,
		lease: runLockLeaseDefault, flows: make(map[string]*Workflow)}
	for _, o := range opts {
		o(e)
	}
	return e
}

// Register adds a workflow. It checks the declaration: a name, "start" and "end"
// among the states, transitions between declared states with a name and a
// function, names unique, and at most one non-waiting transition out of a state.
func (e *Engine) Register(w *Workflow) error {
	if err := validateWorkflow(w); err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, dup := e.flows[w.Name]; dup {
		return invalidArg("workflow %q is already registered", w.Name)
	}
	e.flows[w.Name] = w
	return nil
}

// OnRunDone registers fn to be called whenever a run reaches end (completed or failed).
func (e *Engine) OnRunDone(fn func(ctx context.Context, r *Run)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.onDone = append(e.onDone, fn)
}

func (e *Engine) workflow(name string) (*Workflow, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	w, ok := e.flows[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownWorkflow, name)
	}
	return w, nil
}

// maxAutoSteps bounds the automatic transitions one Launch or Fire runs, so a
// workflow that loops fails instead of spinning.
const maxAutoSteps = 100

// locked runs fn while holding run id's lock, then reports the run's end to its
// parent and the OnRunDone hooks once the lock is released.
func (e *Engine) locked(ctx context.Context, id string, readRun bool, fn func(ctx context.Context, read *kvOp) (*Run, error)) (*Run, error) {
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
	l, read, err := waitLeaseReading(ctx, e.kv, runLockKey(id), e.lease, readKey, extra...)
	if err != nil {
		return nil, err
	}
	l.now = e.now
	l.proveAt(sent)
	hctx := holding(ctx, id, l)
	var r *Run
	if err = e.tookWith(hctx, id, extra); err == nil {
		r, err = fn(hctx, read)
	}
	err = errors.Join(err, e.letGo(hctx, id, l))
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
	ops []*kvOp
}

type takeWithKey struct{}

// withTake returns ctx asking the next take of run id's lock on its path to
// send ops with it, in one batch after the take. A write among them must land
// or the call does not run; a read's answer serves the hold's reads of its key.
func (e *Engine) withTake(ctx context.Context, id string, ops ...*kvOp) context.Context {
	return context.WithValue(ctx, takeWithKey{}, &takeWith{id: id, ops: ops})
}

func takeOpsFor(ctx context.Context, id string) []*kvOp {
	if t, ok := ctx.Value(takeWithKey{}).(*takeWith); ok && t.id == id {
		return t.ops
	}
	return nil
}

// tookWith checks the commands sent with the take and keeps their reads for
// the hold.
func (e *Engine) tookWith(ctx context.Context, id string, ops []*kvOp) error {
	f := finalOf(ctx, id)
	for _, op := range ops {
		if op.kind != opGet {
			if op.err != nil {
				return storeErr(ctx, "write with the run's lock", op.err)
			}
			continue
		}
		f.mu.Lock()
		if f.read == nil {
			f.read = make(map[string]*kvOp)
		}
		f.read[op.key] = op
		f.mu.Unlock()
	}
	return nil
}

// Launch creates a run of workflow for userID with args and runs its automatic
// transitions until it rests in a waiting state or ends. A run whose transition
// failed is returned with Status "failed" and the transition's error.
func (e *Engine) Launch(ctx context.Context, userID, workflow string, args any, opts RunOptions) (*Run, error) {
	ctx = ctxOrBackground(ctx)
	if userID == "" || len(userID) > maxUserIDLen {
		return nil, invalidArg("user ID must be 1 to %d bytes", maxUserIDLen)
	}
	w, err := e.workflow(workflow)
	if err != nil {
		return nil, err
	}
	raw, err := marshalArg(args)
	if err != nil {
		return nil, err
	}
	if opts.Show == "" {
		opts.Show = ShowInline
	}
	now := e.now().UnixMilli()
	r := &Run{ID: randomHex(16), Workflow: w.Name, UserID: userID, State: StateStart, Status: RunRunning,
		ParentID: opts.ParentID, Options: opts, Args: raw, CreatedAt: now, UpdatedAt: now}
	return e.locked(ctx, r.ID, false, func(ctx context.Context, _ *kvOp) (*Run, error) {
		if err := e.save(ctx, r); err != nil {
			return nil, err
		}
		return e.advance(ctx, w, r, w.autoFrom(StateStart), nil)
	})
}

// Fire runs the waiting transition on run runID with input, as asUser, then the
// automatic transitions that follow. Only the run's own user may fire it
// (ErrForbidden), and only from the transition's From state
// (ErrTransitionNotAllowed). Fires of one run are serialised, also across
// instances: of two concurrent Fires of one transition, the second finds the run
// moved on and gets ErrTransitionNotAllowed. The error is the transition's own
// failure, if any; the run is returned either way.
func (e *Engine) Fire(ctx context.Context, runID, transition string, input any, asUser string) (*Run, error) {
	ctx = ctxOrBackground(ctx)
	raw, err := marshalArg(input)
	if err != nil {
		return nil, err
	}
	if !issuedRunID(runID) {
		return nil, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
	}
	return e.fire(ctx, runID, transition, raw, asUser, "")
}

// fire runs Fire's work under the run's lock. A non-empty child names the child
// run whose result this is: a result the run has already heard is ignored, so
// a delivery retried after it landed changes nothing.
func (e *Engine) fire(ctx context.Context, runID, transition string, input json.RawMessage, asUser, child string) (*Run, error) {
	return e.locked(ctx, runID, true, func(ctx context.Context, read *kvOp) (*Run, error) {
		r, err := e.decodeRun(ctx, runID, read.got, read.err)
		if err != nil {
			return nil, err
		}
		if asUser != r.UserID {
			return nil, ErrForbidden
		}
		if child != "" && slices.Contains(r.Heard, child) {
			return r, nil
		}
		w, err := e.workflow(r.Workflow)
		if err != nil {
			return nil, err
		}
		t := w.find(transition)
		if t == nil || !t.Wait || t.From != r.State || r.Status == RunFailed {
			return r, fmt.Errorf("%w: %q from %q", ErrTransitionNotAllowed, transition, r.State)
		}
		if child != "" {
			r.Heard = append(r.Heard, child)
		}
		return e.advance(ctx, w, r, t, input)
	})
}

// advance runs t with input, then the automatic transitions that follow, until
// the run rests; it saves the run after every step. A failing transition ends
// the run as failed.
func (e *Engine) advance(ctx context.Context, w *Workflow, r *Run, t *Transition, input json.RawMessage) (*Run, error) {
	for steps := 0; t != nil; t, steps = w.autoFrom(r.State), steps+1 {
		r.Status = RunRunning
		next, err := e.step(ctx, w, r, t, input)
		if err == nil && steps >= maxAutoSteps {
			err = fmt.Errorf("oauthflow: workflow %q did not come to rest after %d steps", w.Name, steps)
		}
		if err != nil {
			r.State, r.Status, r.Error = StateEnd, RunFailed, PublicMessage(err)
			return r, errors.Join(err, e.saveLast(ctx, r))
		}
		input = nil
		r.State = next
		if r.State == StateEnd {
			break
		}
		if err := e.save(ctx, r); err != nil {
			return r, err
		}
	}
	r.Status = RunWaiting
	if r.State == StateEnd {
		r.Status = RunCompleted
	}
	return r, e.saveLast(ctx, r)
}

// step runs t and returns the state it leads to: t.To, or the one it chose with GoTo.
func (e *Engine) step(ctx context.Context, w *Workflow, r *Run, t *Transition, input json.RawMessage) (next string, err error) {
	defer recoverInto(&err, "transition "+t.Name)
	tc := &TransitionContext{Run: r, Input: input, engine: e}
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

// finished tells the OnRunDone hooks and the parent (through its callback
// transition, as the run's user) that r has ended. The parent's delivery was
// owed before r's end was saved (saveOps); this is its first try.
func (e *Engine) finished(ctx context.Context, ch *callChain, r *Run) {
	e.mu.RLock()
	hooks := e.onDone
	e.mu.RUnlock()
	for _, h := range hooks {
		h(ctx, r)
	}
	if !reportsToParent(r) {
		return
	}
	notify := func(ctx context.Context) {
		if err := e.deliver(ctx, r.ID); err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: parent callback failed; the worker retries it",
				slog.String("run", r.ID), slog.String("parent", r.ParentID), slog.String("error", logSafeError(err)))
		}
	}
	if holds(ctx, r.ParentID) {
		ch.later(notify)
		return
	}
	notify(ctx)
}

// stillHeld checks, right before a write of run id's records, that the call
// still holds the run's lock: an instance that hung past its lease (another
// has since ended the run) writes nothing.
func stillHeld(ctx context.Context, id string) error {
	l := leaseOf(ctx, id)
	if l == nil || l.recentlyProven() {
		return nil
	}
	held, err := l.confirm(ctx)
	if err != nil {
		return err
	}
	if !held {
		return fmt.Errorf("run %s: %w", id, errLeaseLost)
	}
	return nil
}

func (e *Engine) save(ctx context.Context, r *Run) error {
	if err := stillHeld(ctx, r.ID); err != nil {
		return err
	}
	ops, err := e.saveOps(ctx, r)
	if err != nil {
		return err
	}
	runBatch(ctx, e.kv, ops...)
	return savedOrNot(ctx, ops)
}

// saveLast saves r with the release of its lock when ctx's call path holds it
// (letGo sends both in one batch), at once otherwise.
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
func (e *Engine) saveOps(ctx context.Context, r *Run) ([]*kvOp, error) {
	r.UpdatedAt = e.now().UnixMilli()
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("oauthflow: encode run: %w", err)
	}
	ops := []*kvOp{{kind: opSet, key: runKey(r.ID), value: b, ttl: e.ttlOf(r)}}
	if r.State != StateEnd {
		return ops, nil
	}
	if err := e.owe(ctx, r); err != nil {
		return nil, err
	}
	expire, err := e.shortenOps(ctx, r)
	return append(ops, expire...), err
}

// savedOrNot is the error of the first save op that failed.
func savedOrNot(ctx context.Context, ops []*kvOp) error {
	for i, op := range ops {
		if op.err == nil {
			continue
		}
		if i == 0 {
			return storeErr(ctx, "save run", op.err)
		}
		return storeErr(ctx, "expire document", op.err)
	}
	return nil
}

// letGo releases l after sending the hold's final writes, all in one batch:
// the store runs them in order, so the run is saved before the lock is free.
// The fence holds as for any write: the lock is proven (or confirmed) first.
// A run that cannot be saved (the lock lost, its delivery not owed) keeps its
// due work: only the lock is released.
func (e *Engine) letGo(ctx context.Context, id string, l *lease) error {
	l.stop()
	ctx = context.WithoutCancel(ctx)
	f := finalOf(ctx, id)
	var save []*kvOp
	var err error
	if f.run != nil {
		if err = stillHeld(ctx, id); err == nil {
			save, err = e.saveOps(ctx, f.run)
		}
	}
	if err != nil { // a run not saved keeps its due work
		save, f.tidy = nil, nil
	}
	ops := append(append(save, f.tidy...), &kvOp{kind: opCompareAndDelete, key: l.key, value: l.owner})
	runBatch(ctx, e.kv, ops...)
	for _, op := range f.tidy {
		if op.err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: a finished run's due work could not be removed",
				slog.String("run", id), slog.String("work", op.member), slog.String("error", logSafeError(op.err)))
		}
	}
	if err != nil {
		return err
	}
	return savedOrNot(ctx, save)
}

// tidyAtRelease removes member from the due-work index with the release of
// run id's lock when ctx's call path holds it, at once otherwise. It only
// tidies: work left behind finds its run moved on and does nothing.
func (e *Engine) tidyAtRelease(ctx context.Context, id, member string) error {
	op := &kvOp{kind: opUnschedule, key: dueIndex, member: member}
	if f := finalOf(ctx, id); f != nil {
		f.tidy = append(f.tidy, op)
		return nil
	}
	op.runOn(ctx, e.kv)
	if op.err != nil {
		return storeErr(ctx, "unschedule "+member, op.err)
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

// Get returns the run runID, or ErrRunNotFound.
func (e *Engine) Get(ctx context.Context, runID string) (*Run, error) {
	if !issuedRunID(runID) {
		return nil, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
	}
	b, err := e.kv.Get(ctxOrBackground(ctx), runKey(runID))
	return e.decodeRun(ctx, runID, b, err)
}

// decodeRun is Get's reading of what the store answered for run runID.
func (e *Engine) decodeRun(ctx context.Context, runID string, b []byte, err error) (*Run, error) {
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
	}
	if err != nil {
		return nil, storeErr(ctx, "read run", err)
	}
	var r Run
	if err := strictUnmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// marshalArg turns v into JSON; json.RawMessage and nil pass through.
func marshalArg(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(v) > 0 && !json.Valid(v) {
			return nil, invalidArg("invalid JSON")
		}
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, invalidArg("cannot encode %T as JSON: %w", v, err)
	}
	return b, nil
}

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
		return invalidArg("%s: %w", what, err)
	}
	return nil
}

// PublicMessage is the text of err that may be shown to a user: the message of
// a *FlowError in its chain, or a generic sentence. Internal error text never
// reaches a user.
func PublicMessage(err error) string {
	var fe *FlowError
	if errors.As(err, &fe) && fe.Message != "" {
		return fe.Message
	}
	return "Something went wrong. Please try again."
}

// FlowError is a failure with a message fit for the user who signs in.
type FlowError struct {
	Message string
	Err     error
}

func (e *FlowError) Error() string {
	if e.Err == nil {
		return e.Message
	}
	msg := e.Message
	if n := len(msg); n > 0 && msg[n-1] == '.' {
		msg = msg[:n-1] // one sentence, the cause last
	}
	return msg + ": " + e.Err.Error()
}

func (e *FlowError) Unwrap() error { return e.Err }
