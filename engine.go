package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/runstore"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Engine runs workflows. Runs and documents live in the KV; a run's transitions
// are serialised by a lease lock in the KV, so they never fire twice, even when
// several instances share the store.
type Engine struct {
	kv      kv.Store
	now     func() time.Time
	log     *slog.Logger
	ttl     time.Duration
	doneTTL time.Duration
	lease   time.Duration
	mu      sync.RWMutex
	flows   map[string]*Workflow
}

// engineOption configures an Engine. A Module sets its engine's clock,
// logger, lock lease and run TTLs from its Config.
type engineOption func(*Engine)

// withEngineClock sets the engine's clock.
func withEngineClock(now func() time.Time) engineOption {
	return func(e *Engine) {
		if now != nil {
			e.now = now
		}
	}
}

// withEngineLogger sets the engine's logger.
func withEngineLogger(l *slog.Logger) engineOption {
	return func(e *Engine) {
		if l != nil {
			e.log = l
		}
	}
}

// runLockLeaseDefault is how long a run's lock outlives an instance that stopped renewing it.
const runLockLeaseDefault = 30 * time.Second

// withRunLease sets how long a run's lock outlives an instance that stopped
// renewing it (default 30 s).
func withRunLease(d time.Duration) engineOption {
	return func(e *Engine) {
		if d > 0 {
			e.lease = max(d, time.Millisecond)
		}
	}
}

// withFinishedRunTTL sets how long a run that has ended, and its documents,
// are kept (default 24 hours).
func withFinishedRunTTL(d time.Duration) engineOption {
	return func(e *Engine) {
		if d > 0 {
			e.doneTTL = d
		}
	}
}

// NewEngine returns an engine storing runs in kv.
func NewEngine(kv KV) *Engine { return newEngine(kv) }

// newEngine is NewEngine with the settings a Module passes.
func newEngine(kv KV, opts ...engineOption) *Engine {
	e := &Engine{kv: storeOf(kv), now: time.Now, log: slog.Default(), ttl: defaultRunTTL, doneTTL: defaultFinishedRunTTL,
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
		return errs.Invalid("workflow %q is already registered", w.Name)
	}
	e.flows[w.Name] = w
	return nil
}

func (e *Engine) workflow(name string) (*Workflow, error) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	w, ok := e.flows[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", errUnknownWorkflow, name)
	}
	return w, nil
}

// maxAutoSteps bounds the automatic transitions one Launch or Fire runs, so a
// workflow that loops fails instead of spinning.
const maxAutoSteps = 100

// Launch creates a run of workflow for userID with args and runs its automatic
// transitions until it rests in a waiting state or ends. A run whose transition
// failed is returned with Status "failed" and the transition's error.
func (e *Engine) Launch(ctx context.Context, userID, workflow string, args any, opts RunOptions) (*Run, error) {
	ctx = xcontext.OrBackground(ctx)
	if userID == "" || len(userID) > keyspace.MaxUserIDLen {
		return nil, errs.Invalid("user ID must be 1 to %d bytes", keyspace.MaxUserIDLen)
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
		opts.Show = showInline
	}
	now := e.now().UnixMilli()
	r := &Run{ID: randomHex(16), Workflow: w.Name, UserID: userID, State: StateStart, Status: RunRunning,
		ParentID: opts.ParentID, Options: opts, Args: raw, CreatedAt: now, UpdatedAt: now}
	return e.locked(ctx, r.ID, false, func(ctx context.Context, _ *kv.Op) (*Run, error) {
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
	ctx = xcontext.OrBackground(ctx)
	raw, err := marshalArg(input)
	if err != nil {
		return nil, err
	}
	if !keyspace.IssuedRunID(runID) {
		return nil, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
	}
	return e.fire(ctx, runID, transition, raw, asUser, "")
}

// marshalArg turns v into JSON; json.RawMessage and nil pass through.
func marshalArg(v any) (json.RawMessage, error) {
	switch v := v.(type) {
	case nil:
		return nil, nil
	case json.RawMessage:
		if len(v) > 0 && !json.Valid(v) {
			return nil, fmt.Errorf("%w: invalid JSON", ErrInvalidArgument)
		}
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: cannot encode %T as JSON: %w", ErrInvalidArgument, v, err)
	}
	return b, nil
}

// fire runs Fire's work under the run's lock. A non-empty child names the child
// run whose result this is: a result the run has already heard is ignored, so
// a delivery retried after it landed changes nothing.
func (e *Engine) fire(ctx context.Context, runID, transition string, input json.RawMessage, asUser, child string) (*Run, error) {
	return e.locked(ctx, runID, true, func(ctx context.Context, read *kv.Op) (*Run, error) {
		r, err := e.decodeRun(ctx, runID, read.Got, read.Err)
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
		next, err := w.step(ctx, t, &TransitionContext{Run: r, Input: input, engine: e})
		if err == nil && steps >= maxAutoSteps {
			err = fmt.Errorf("oauthflow: workflow %q did not come to rest after %d steps", w.Name, steps)
		}
		if err != nil {
			r.State, r.Status, r.Error = StateEnd, RunFailed, publicMessage(err)
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

// finished tells the parent (through its callback
// transition, as the run's user) that r has ended. The parent's delivery was
// owed before r's end was saved (saveOps); this is its first try.
func (e *Engine) finished(ctx context.Context, ch *callChain, r *Run) {
	if !reportsToParent(r) {
		return
	}
	notify := func(ctx context.Context) {
		if _, err := e.deliver(ctx, r.ID); err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: parent callback failed; the worker retries it",
				slog.String("run", r.ID), slog.String("parent", r.ParentID), slog.String("error", logSafeError(err)))
		}
	}
	if runstore.Holds(ctx, r.ParentID) {
		ch.later(notify)
		return
	}
	notify(ctx)
}

// locked runs fn while holding run id's lock, then reports the run's end to its
// parent once the lock is released. A run's
// transitions step under its lock, and the lock is released with the run's
// last save in one batch (runstore.Hold.Release).
func (e *Engine) locked(ctx context.Context, id string, readRun bool, fn func(ctx context.Context, read *kv.Op) (*Run, error)) (*Run, error) {
	ctx, ch, root := chain(ctx)
	if runstore.Holds(ctx, id) {
		return nil, fmt.Errorf("%w: run %s is already executing in this call", ErrTransitionNotAllowed, id)
	}
	readKey := ""
	if readRun {
		readKey = keyspace.Run(id)
	}
	hctx, h, read, err := runstore.Take(ctx, e.kv, id, keyspace.RunLock(id), e.lease, e.now, readKey)
	if h == nil {
		return nil, err
	}
	var r *Run
	if err == nil {
		r, err = fn(hctx, read)
	}
	err = errors.Join(err, e.release(hctx, id, h))
	if r != nil && r.State == StateEnd && !errors.Is(err, ErrTransitionNotAllowed) {
		e.finished(ctx, ch, r)
	}
	if root {
		ch.drain(ctx)
	}
	return r, err
}

// withTake returns ctx asking the next take of run id's lock on its path to
// send ops with it (runstore.WithTake): a caller that knows what the run's
// transition will need saves their round trips.
func (e *Engine) withTake(ctx context.Context, id string, ops ...*kv.Op) context.Context {
	return runstore.WithTake(ctx, id, ops...)
}

// release sends h's final writes with the release of run id's lock and
// reports them: a finished run's due work that could not be removed is
// only logged, since work left behind finds its run moved on. What follows
// the release (runstore.Hold.AfterRelease) runs under ctx.
func (e *Engine) release(ctx context.Context, id string, h *runstore.Hold) error {
	save, tidy, err := h.Release(ctx, e.kv)
	ctx = context.WithoutCancel(ctx)
	for _, op := range tidy {
		if op.Err != nil {
			e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: a finished run's due work could not be removed",
				slog.String("run", id), slog.String("work", op.Member), slog.String("error", logSafeError(op.Err)))
		}
	}
	return errors.Join(saveError(ctx, save), err)
}

// afterRelease calls fn once the release of run id's lock has sent what
// goes with it, with the failure of the writes sent at release
// (runstore.Hold.AfterRelease), when ctx's call path holds the lock; at
// once otherwise.
func (e *Engine) afterRelease(ctx context.Context, id string, fn func(ctx context.Context, failed error)) {
	if h := runstore.Of(ctx, id); h != nil {
		h.AfterRelease(fn)
		return
	}
	fn(ctx, nil)
}

// tidyAtRelease removes member from the due-work index with the release of
// run id's lock when ctx's call path holds it, at once otherwise. It only
// tidies: work left behind finds its run moved on and does nothing.
func (e *Engine) tidyAtRelease(ctx context.Context, id, member string) error {
	op := &kv.Op{Kind: kv.OpUnscheduleSharded, Key: dueIndex, Member: member}
	if h := runstore.Of(ctx, id); h != nil {
		h.TidyAtRelease(op)
		return nil
	}
	op.Run(ctx, e.kv)
	if op.Err != nil {
		return errs.Store(ctx, "unschedule "+member, op.Err)
	}
	return nil
}

// Saving a run: every write of a run's records is fenced by its lock, and
// the writes that must land together (the run, the delivery owed to its
// parent) go as one list of operations.

func (e *Engine) save(ctx context.Context, r *Run) error { return e.write(ctx, r, false) }

// saveLast saves r with the release of its lock when ctx's call path holds it
// (the release sends both in one batch), at once otherwise. A run whose save
// cannot be made keeps its due work: only the lock is released.
func (e *Engine) saveLast(ctx context.Context, r *Run) error { return e.write(ctx, r, true) }

// write saves r, fenced by its lock (runstore.Fence) before any of its
// writes is made; a last save goes with the release when the call holds the
// lock.
func (e *Engine) write(ctx context.Context, r *Run, last bool) error {
	ctx, h, err := runstore.Fence(ctx, r.ID, last)
	var ops []*kv.Op
	if err == nil {
		ops, err = e.saveOps(ctx, r)
	}
	if h != nil {
		return h.SaveAtRelease(ops, err)
	}
	if err != nil {
		return err
	}
	kv.RunBatch(ctx, e.kv, ops...)
	return saveError(ctx, ops)
}

// saveOps are the writes that save r: the documents saved to go with it
// (saveDocumentWithRun), the run, and for an ended run its other documents'
// shorter TTL. An ended child's delivery is owed first, here: its end is
// not saved unless the delivery is recorded.
func (e *Engine) saveOps(ctx context.Context, r *Run) ([]*kv.Op, error) {
	r.UpdatedAt = e.now().UnixMilli()
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("oauthflow: encode run: %w", err)
	}
	var ops []*kv.Op
	if h := runstore.Of(ctx, r.ID); h != nil {
		ops = h.TakeWithSave()
	}
	for _, op := range ops {
		op.TTL = e.ttlOf(r) // an ended run's: its documents need no shortening after
	}
	ops = append(ops, &kv.Op{Kind: kv.OpSet, Key: keyspace.Run(r.ID), Value: b, TTL: e.ttlOf(r)})
	if r.State != StateEnd {
		return ops, nil
	}
	if err := e.recordDelivery(ctx, r); err != nil {
		return nil, err
	}
	expire, err := e.shortenOps(ctx, r, ops)
	return append(ops, expire...), err
}

// saveError is the error of the first save op that failed; nil when all landed.
func saveError(ctx context.Context, ops []*kv.Op) error {
	for _, op := range ops {
		switch {
		case op.Err == nil:
		case op.Kind == kv.OpCompareAndExpire:
			return errs.Store(ctx, "expire document", op.Err)
		case strings.HasPrefix(op.Key, keyspace.Run("")):
			return errs.Store(ctx, "save run", op.Err)
		default:
			return errs.Store(ctx, "save document", op.Err)
		}
	}
	return nil
}

// ttlOf is how long r and its documents are kept: a run that has ended, for
// the finished-run TTL only.
func (e *Engine) ttlOf(r *Run) time.Duration {
	if r.State == StateEnd {
		return e.doneTTL
	}
	// A child waits as long as its parent may: its lapse is what resumes
	// the parent, so it is not let go before.
	if w, err := e.workflow(r.Workflow); err == nil && w.maxWait > 0 && r.ParentID == "" {
		return w.maxWait + e.doneTTL
	}
	return e.ttl
}

// A call tree is one Launch or Fire and every Launch or Fire its transitions
// make, synchronously, from any number of goroutines (an agent calling tools in
// parallel, each launching a child run). Each path down the tree carries the
// runs it holds locked (runstore.Hold); the whole tree shares one callChain,
// where a child that ends while its parent is locked further up its path
// leaves the parent's notification for the root to deliver once every lock is
// released. A transition waits for the goroutines it starts before it returns.

// callChain holds the parent notifications a call tree deferred. It is safe
// for concurrent use.
type callChain struct {
	mu       sync.Mutex
	deferred []func(context.Context)
}

type callChainKey struct{}

// chain returns ctx's call chain; at the root of a tree, a new one in a derived
// context, and root true.
func chain(ctx context.Context) (_ context.Context, _ *callChain, root bool) {
	if ch, ok := ctx.Value(callChainKey{}).(*callChain); ok {
		return ctx, ch, false
	}
	ch := &callChain{}
	return context.WithValue(ctx, callChainKey{}, ch), ch, true
}

// later defers fn until the root drains the chain.
func (ch *callChain) later(fn func(context.Context)) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	ch.deferred = append(ch.deferred, fn)
}

// next takes the first deferred function, or returns nil.
func (ch *callChain) next() func(context.Context) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if len(ch.deferred) == 0 {
		return nil
	}
	fn := ch.deferred[0]
	ch.deferred = ch.deferred[1:]
	return fn
}

// drain runs what was deferred, outside the lock: what it runs may defer more.
func (ch *callChain) drain(ctx context.Context) {
	for fn := ch.next(); fn != nil; fn = ch.next() {
		fn(ctx)
	}
}

// Get returns the run runID, or ErrRunNotFound.
func (e *Engine) Get(ctx context.Context, runID string) (*Run, error) {
	return e.get(xcontext.OrBackground(ctx), runID)
}

// get is Get for the engine's own calls, whose ctx is never nil.
func (e *Engine) get(ctx context.Context, runID string) (*Run, error) {
	if !keyspace.IssuedRunID(runID) {
		return nil, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
	}
	b, err := e.kv.Get(ctx, keyspace.Run(runID))
	return e.decodeRun(ctx, runID, b, err)
}

// decodeRun is Get's reading of what the store answered for run runID.
func (e *Engine) decodeRun(ctx context.Context, runID string, b []byte, err error) (*Run, error) {
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrRunNotFound, runID)
	}
	if err != nil {
		return nil, errs.Store(ctx, "read run", err)
	}
	var r Run
	if err := strictUnmarshal(b, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

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
	if err := kv.ScheduleSharded(ctx, e.kv, dueIndex, jobDeliver+":"+r.ID, e.now()); err != nil {
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
// failed); a delivery that can never land (the parent is gone, or not
// waiting for it) is dropped with a warning. It keeps the entry itself
// (rescheduled) while the child's end is not saved yet.
func (e *Engine) deliver(ctx context.Context, child string) (rescheduled bool, err error) {
	r, err := e.get(ctx, child)
	if errors.Is(err, ErrRunNotFound) {
		return false, e.removeDelivery(ctx, child)
	}
	if err != nil {
		return false, err
	}
	if !reportsToParent(r) {
		return false, e.removeDelivery(ctx, child)
	}
	if r.State != StateEnd {
		// Owed before the end's save landed (or the save failed): the entry
		// stays, claimed again later, until the end is saved and owed anew.
		return true, nil
	}
	in, err := marshalArg(ChildResult{RunID: r.ID, Status: r.Status, Result: r.Result})
	if err != nil {
		return false, err
	}
	_, err = e.fire(ctx, r.ParentID, r.Options.Callback.Transition, in, r.UserID, r.ID)
	if retryable(err) {
		return false, err
	}
	if err != nil && !isTransitionFailure(err) {
		e.log.LogAttrs(ctx, slog.LevelWarn, "oauthflow: a child's result cannot reach its parent",
			slog.String("run", r.ID), slog.String("parent", r.ParentID), slog.String("error", logSafeError(err)))
	}
	return false, e.removeDelivery(ctx, child)
}

// removeDelivery removes child's delivery from the due work.
func (e *Engine) removeDelivery(ctx context.Context, child string) error {
	if err := kv.UnscheduleSharded(ctx, e.kv, dueIndex, jobDeliver+":"+child); err != nil {
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

// Documents are named JSON records attached to a run (the sign-in prompt is
// "oauthPrompt"), kept as long as their run.

// Document decodes the run's document name into v.
func (e *Engine) Document(ctx context.Context, runID, name string, v any) error {
	d, err := e.getDocument(ctx, runID, name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(d.Data, v); err != nil {
		return fmt.Errorf("%w: document %s: %w", errCorruptRecord, name, err)
	}
	return nil
}

// getDocument returns the run's document name with its widget, or ErrNotFound.
func (e *Engine) getDocument(ctx context.Context, runID, name string) (*document, error) {
	if !keyspace.IssuedRunID(runID) || !keyspace.ValidProviderID(name) {
		return nil, fmt.Errorf("%w: document %q of run %q", ErrNotFound, name, runID)
	}
	b, err := e.readDocument(ctx, runID, keyspace.Doc(runID, name))
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: document %q of run %q", ErrNotFound, name, runID)
	}
	if err != nil {
		return nil, errs.Store(ctx, "read document", err)
	}
	var d document
	if err := strictUnmarshal(b, &d); err != nil {
		return nil, err
	}
	return &d, nil
}

// readDocument reads key, or takes the answer read with the take of run
// runID's lock on ctx's path (withTake), kept current by its writes.
func (e *Engine) readDocument(ctx context.Context, runID, key string) ([]byte, error) {
	if h := runstore.Of(ctx, runID); h != nil {
		if op := h.ReadWithTake(key); op != nil {
			return op.Got, op.Err
		}
	}
	return e.kv.Get(xcontext.OrBackground(ctx), key)
}

func (e *Engine) saveDocument(ctx context.Context, r *Run, name, widget string, v any) error {
	b, err := e.encodeDocument(ctx, r, name, widget, v)
	if err != nil {
		return err
	}
	if err := e.kv.Set(ctx, keyspace.Doc(r.ID, name), b, e.ttlOf(r)); err != nil {
		return errs.Store(ctx, "save document", err)
	}
	if h := runstore.Of(ctx, r.ID); h != nil {
		h.Wrote(keyspace.Doc(r.ID, name), b)
	}
	noteDocument(r, name, widget, b)
	return nil
}

// saveDocumentWithRun saves v as r's document name, rendered by widget, with
// r's next save, in its batch and ahead of it, when ctx's call path holds
// r's lock: no round trip of its own, and fenced as the save is (a save
// that cannot be made leaves the document as it was). Reads on the path
// see it at once. A path that does not hold the lock saves it at once.
func (e *Engine) saveDocumentWithRun(ctx context.Context, r *Run, name, widget string, v any) error {
	h := runstore.Of(ctx, r.ID)
	if h == nil {
		return e.saveDocument(ctx, r, name, widget, v)
	}
	b, err := e.encodeDocument(ctx, r, name, widget, v)
	if err != nil {
		return err
	}
	h.WithSave(&kv.Op{Kind: kv.OpSet, Key: keyspace.Doc(r.ID, name), Value: b, TTL: e.ttlOf(r)})
	noteDocument(r, name, widget, b)
	return nil
}

// encodeDocument is the record of r's document name, once the call is
// found to still hold r's lock (runstore.StillHeld).
func (e *Engine) encodeDocument(ctx context.Context, r *Run, name, widget string, v any) ([]byte, error) {
	if !keyspace.ValidProviderID(name) {
		return nil, errs.Invalid("document name %q is not valid", name)
	}
	data, err := marshalArg(v)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(document{Name: name, Widget: widget, Data: data, UpdatedAt: e.now().UnixMilli()})
	if err != nil {
		return nil, fmt.Errorf("oauthflow: encode document: %w", err)
	}
	if err := runstore.StillHeld(ctx, r.ID); err != nil {
		return nil, err
	}
	return b, nil
}

// noteDocument records in r that its document name, rendered by widget, is b.
func noteDocument(r *Run, name, widget string, b []byte) {
	if r.Documents == nil {
		r.Documents = make(map[string]string)
	}
	r.Documents[name] = widget
	if r.written == nil {
		r.written = make(map[string][]byte)
	}
	r.written[name] = b
}

// shortenOps are the writes that give an ended run's documents its shorter
// TTL, but for those the save writes (saving); a document saved under this
// lock is not read back first.
func (e *Engine) shortenOps(ctx context.Context, r *Run, saving []*kv.Op) ([]*kv.Op, error) {
	var ops []*kv.Op
	for name := range r.Documents {
		key := keyspace.Doc(r.ID, name)
		if slices.ContainsFunc(saving, func(op *kv.Op) bool { return op.Key == key }) {
			continue
		}
		b, ok := r.written[name]
		if !ok {
			var err error
			b, err = e.kv.Get(ctx, key)
			if errors.Is(err, ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, errs.Store(ctx, "expire document", err)
			}
		}
		ops = append(ops, &kv.Op{Kind: kv.OpCompareAndExpire, Key: key, Value: b, TTL: e.doneTTL})
	}
	return ops, nil
}
