// Package worker does a library's time-driven work: work waits in one due-time
// index in the store, shared by every instance, until a pass of some
// instance's worker claims it and runs the job registered for its kind.
package worker

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
)

// Work waits in one due-time index in the KV, shared by every instance, kept
// in small shards where the store can (kv.Sharder: Redis keeps each in its
// compact encoding); each pass claims what is due with atomic commands that
// also lease it, each on one shard, so of many instances exactly one does a
// piece of work, and work whose instance died is claimed again when its lease
// lapses. An idle pass costs one round trip, whatever the index holds.
//
// A limit bounds what it names, not the worker: each kind of work, and each
// group of one kind (a provider's refreshes ahead), has a share of the
// worker's slots (Share), so a provider whose endpoint hangs, or a kind of
// work that does, leaves room for the rest. A claimed piece whose share is
// full waits here, without a slot, for a piece of that share to end; beyond
// maxHeld of them it goes back to the index for a second, so that what is
// due behind it is claimed. The worker looks that far past a backlog for at
// most maxBack pieces a second: a claim that would only put back what it
// took waits for the next second.

// Index is the KV index of due work, a sharded one (kv.ScheduleSharded and
// the rest): on Redis, the keys under "oauth:sys:{due}", and what an
// earlier version wrote to "oauth:sys:due". Members are "{kind}:{id}"
// (Member).
const Index = "oauth:sys:due"

// Member is the index member of id's work under kind.
func Member(kind, id string) string { return kind + ":" + id }

// Worker timings.
const (
	defaultInterval = time.Second
	Lease           = time.Minute // a claimed piece of work is retried after this
	// MaxInFlight bounds the pieces one instance does at once. Most of a
	// piece's time is spent waiting on a provider (a refresh ahead, a device
	// poll), so the worker starts as many as are due, up to this, and claims
	// more as they end: with 100 ms providers that is over 2,000 a second.
	MaxInFlight = 256
	// KindShare bounds the pieces of one kind of work in flight, and
	// GroupShare those of one group of a kind (one provider's refreshes
	// ahead): a kind that hangs (a device endpoint, a run lock a dead
	// instance holds) leaves the others a quarter of the slots, and a
	// provider whose endpoint hangs leaves the other providers a quarter
	// more. GroupShare is above the library's default per-provider
	// Concurrency, so the refreshes ahead of one provider still go at its
	// limit.
	KindShare  = MaxInFlight * 3 / 4
	GroupShare = MaxInFlight / 2
	// maxHeld bounds the claimed pieces that wait here for room in their
	// share. One beyond them is put back in the index, due busyRetry on,
	// spread over the second after that by busyRetry/maxBack after the one
	// put back before it, so that what is due behind a backlog is claimed.
	maxHeld   = 8 * MaxInFlight
	busyRetry = time.Second
	// maxBack bounds the pieces put back in one busyRetry, spread over the
	// second after it. Each costs two commands on a shard (the claim and
	// the put back): without a bound, a backlog of one provider's refreshes
	// ahead, a hundred thousand due at once, went round through the index
	// every second while its share did 1,280 of them.
	maxBack = MaxInFlight
)

// Share is how much of the worker one kind of work may hold: Most pieces in
// flight at once and, when Group is set, GroupMost of one group of them,
// Group(id) naming the group of the piece id. A kind whose Most is 0 may
// take every slot.
type Share struct {
	Most      int
	Group     func(id string) string
	GroupMost int
}

// piece is a claimed piece of work.
type piece struct {
	member      string
	kind, group string // the keys of its shares: the job's kind and, if it has groups, "{kind}:{group}"
	claimed     time.Time
}

// Job does the work named by id. It reports rescheduled when it placed its
// entry in the index itself; otherwise a nil error removes the entry, and an
// error leaves it to be claimed again when its lease lapses.
type Job func(ctx context.Context, id string) (rescheduled bool, err error)

// Config is how a Worker runs; its zero value means the defaults.
type Config struct {
	Now   func() time.Time // nil: time.Now
	Log   *slog.Logger     // nil: nothing is logged
	Every time.Duration    // how often a pass looks for due work; 0: a second
	// ErrorText is the text a job's error is logged with; nil: its Error().
	ErrorText func(error) string
}

// Worker claims due work from Index and runs the jobs registered for it.
type Worker struct {
	kv        kv.Store
	now       func() time.Time
	log       *slog.Logger
	every     time.Duration
	errorText func(error) string
	jobs      map[string]Job
	shares    map[string]Share // the kinds that have a share; the others may take every slot

	failing atomic.Bool // the last pass could not reach the store (logged once)

	slots   chan struct{}  // one per piece in flight (MaxInFlight)
	running sync.WaitGroup // the pieces in flight

	mu    sync.Mutex
	busy  map[string]int     // pieces in flight per share key
	held  map[string][]piece // claimed pieces waiting, under the key of the share that has no room
	nHeld int
	// The pieces put back since backFrom, at most maxBack a busyRetry.
	backFrom time.Time
	nBack    int

	stopOnce sync.Once
	stop     context.CancelFunc
	done     chan struct{}
}

// New returns a worker over store's Index; Start starts its passes.
func New(store kv.Store, cfg Config) *Worker {
	w := &Worker{kv: store, now: cfg.Now, log: cfg.Log, every: cfg.Every, errorText: cfg.ErrorText,
		jobs: make(map[string]Job), shares: make(map[string]Share), slots: make(chan struct{}, MaxInFlight)}
	if w.now == nil {
		w.now = time.Now
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if w.every <= 0 {
		w.every = defaultInterval
	}
	if w.errorText == nil {
		w.errorText = error.Error
	}
	return w
}

// Handle registers the job run for members "{kind}:{id}", and its share of
// the worker. Setup only.
func (w *Worker) Handle(kind string, sh Share, j Job) {
	w.jobs[kind] = j
	if sh.Most > 0 {
		w.shares[kind] = sh
	}
}

// Schedule makes id's work under kind due at due.
func (w *Worker) Schedule(ctx context.Context, kind, id string, due time.Time) error {
	if err := kv.ScheduleSharded(ctx, w.kv, Index, Member(kind, id), due); err != nil {
		return errs.Store(ctx, "schedule "+kind, err)
	}
	return nil
}

// Cancel removes id's work under kind, if any.
func (w *Worker) Cancel(ctx context.Context, kind, id string) error {
	if err := kv.UnscheduleSharded(ctx, w.kv, Index, Member(kind, id)); err != nil {
		return errs.Store(ctx, "unschedule "+kind, err)
	}
	return nil
}

// Start looks for due work every w.every until close, and whenever a claim
// came back full, again as soon as a piece ends: work due in bulk (a
// hundred thousand refreshes ahead in one hour) is drained at the pace the
// pieces end, not one batch a tick.
func (w *Worker) Start() {
	ctx, stop := context.WithCancel(context.Background())
	w.stop, w.done = stop, make(chan struct{})
	go func() {
		defer close(w.done)
		defer w.running.Wait()
		tick := time.NewTicker(w.every)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				w.Drain(ctx)
			}
		}
	}()
}

// Drain claims due work for the free slots and starts it, and claims again
// as slots free up while claims come back full, until this second's
// pieces to put back are spent; Wait waits for what it started.
func (w *Worker) Drain(ctx context.Context) {
	for ctx.Err() == nil {
		select {
		case w.slots <- struct{}{}: // wait for one free slot
			<-w.slots // only this goroutine takes slots: it stays free
		case <-ctx.Done():
			return
		}
		if w.backSpent(w.now()) {
			return // what a claim took now would go back: the next second looks again
		}
		want := cap(w.slots) - len(w.slots)
		members, err := w.claim(ctx, want)
		w.dispatch(ctx, members)
		if err != nil || len(members) < want {
			return // nothing more is due now
		}
	}
}

// backSpent tells whether maxBack pieces were put back in the busyRetry
// up to now, and starts a new one once it has passed.
func (w *Worker) backSpent(now time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if now.Sub(w.backFrom) >= busyRetry || now.Before(w.backFrom) {
		w.backFrom, w.nBack = now, 0
	}
	return w.nBack >= maxBack
}

// dispatch starts each claimed member that its shares have room for, on a
// slot of its own; it holds the others here until a piece of the share
// that has no room ends, up to maxHeld, and puts the rest back in the
// index, due over the second after busyRetry by their count since backFrom.
func (w *Worker) dispatch(ctx context.Context, members []string) {
	now := w.now()
	var start []piece
	var again []*kv.Op
	w.mu.Lock()
	for _, member := range members {
		p := w.pieceOf(member, now)
		switch key := w.blockedBy(p); {
		case key == "":
			w.count(p, 1)
			start = append(start, p)
		case w.nHeld < maxHeld:
			w.hold(key, p)
		default:
			due := now.Add(busyRetry + time.Duration(w.nBack%maxBack)*busyRetry/maxBack)
			again = append(again, &kv.Op{Kind: kv.OpScheduleSharded, Key: Index, Member: member, Due: due})
			w.nBack++
		}
	}
	w.mu.Unlock()
	for _, p := range start {
		w.slots <- struct{}{}
		w.running.Add(1)
		go w.run(ctx, p)
	}
	if len(again) > 0 {
		kv.RunBatch(ctx, w.kv, again...) // one not put back is claimed again when its lease lapses
	}
}

// pieceOf is member's piece, claimed at now.
func (w *Worker) pieceOf(member string, now time.Time) piece {
	kind, id, _ := strings.Cut(member, ":")
	p := piece{member: member, kind: kind, claimed: now}
	if sh := w.shares[kind]; sh.Group != nil {
		p.group = kind + ":" + sh.Group(id)
	}
	return p
}

// blockedBy is the key of a share of p's that has no room for it, or ""
// when p may start. w.mu is held.
func (w *Worker) blockedBy(p piece) string {
	sh, ok := w.shares[p.kind]
	switch {
	case !ok:
		return ""
	case w.busy[p.kind] >= sh.Most:
		return p.kind
	case p.group != "" && w.busy[p.group] >= sh.GroupMost:
		return p.group
	}
	return ""
}

// count adds d to the pieces in flight of p's shares. w.mu is held.
func (w *Worker) count(p piece, d int) {
	if w.busy == nil {
		w.busy = map[string]int{}
	}
	for _, key := range [...]string{p.kind, p.group} {
		if key == "" {
			continue
		}
		if w.busy[key] += d; w.busy[key] <= 0 {
			delete(w.busy, key)
		}
	}
}

// hold keeps p waiting for room in the share key. w.mu is held.
func (w *Worker) hold(key string, p piece) {
	if w.held == nil {
		w.held = map[string][]piece{}
	}
	w.held[key] = append(w.held[key], p)
	w.nHeld++
}

// unhold drops the first piece waiting on key. w.mu is held.
func (w *Worker) unhold(key string) {
	if w.held[key] = w.held[key][1:]; len(w.held[key]) == 0 {
		delete(w.held, key)
	}
	w.nHeld--
}

// run does p and then, on the same slot, each held piece that the end of
// the one before makes room for, until the worker stops.
func (w *Worker) run(ctx context.Context, p piece) {
	defer func() { <-w.slots; w.running.Done() }()
	for ok := true; ok; p, ok = w.next(ctx, p) {
		w.do(ctx, p.member)
	}
}

// next counts done ended and returns a held piece that its end makes room
// for, counted in flight; none once ctx is done. A piece held for half a
// lease is let go instead: it could not end before its lease lapses, when
// it is claimed again.
func (w *Worker) next(ctx context.Context, done piece) (piece, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.count(done, -1)
	if ctx.Err() != nil {
		return piece{}, false // the worker stops: what is held waits out its lease
	}
	now := w.now()
	for _, key := range [...]string{done.group, done.kind} {
		for len(w.held[key]) > 0 {
			p := w.held[key][0]
			if now.Sub(p.claimed) >= Lease/2 {
				w.unhold(key)
				continue
			}
			blocked := w.blockedBy(p)
			if blocked == key {
				break
			}
			w.unhold(key)
			if blocked == "" {
				w.count(p, 1)
				return p, true
			}
			w.hold(blocked, p) // it waits on its other share now
		}
	}
	return piece{}, false
}

// claim claims up to n pieces of due work, leased for Lease.
func (w *Worker) claim(ctx context.Context, n int) ([]string, error) {
	members, err := kv.ClaimSharded(ctx, w.kv, Index, w.now(), Lease, n)
	if err != nil {
		if ctx.Err() == nil && !w.failing.Swap(true) {
			w.log.WarnContext(ctx, "oauthflow: the worker cannot claim due work; it retries every pass", "error", err.Error())
		}
		return nil, err
	}
	w.failing.Store(false)
	return members, nil
}

// Wait waits for the pieces in flight.
func (w *Worker) Wait() { w.running.Wait() }

// Stop cancels the passes and the work in flight without waiting for them,
// as Close does first.
func (w *Worker) Stop() {
	if w.stop != nil {
		w.stop()
	}
}

// Close stops the passes and waits for the one running, if any.
func (w *Worker) Close() {
	w.stopOnce.Do(func() {
		if w.stop != nil {
			w.stop()
			<-w.done
		}
	})
}

// Pass claims what is due, up to MaxInFlight pieces, does them side by side
// as their shares allow (each piece is safe beside any other: they are the
// same as on other instances) and returns how many it claimed. Tests drive
// the worker with it.
func (w *Worker) Pass(ctx context.Context) int {
	members, _ := w.claim(ctx, MaxInFlight)
	w.dispatch(ctx, members)
	w.running.Wait()
	return len(members)
}

func (w *Worker) do(ctx context.Context, member string) {
	kind, id, _ := strings.Cut(member, ":")
	j, ok := w.jobs[kind]
	if !ok {
		return // work of a newer version of the library: left to the instances that know it
	}
	rescheduled, err := runJob(ctx, j, id)
	if err != nil {
		w.log.WarnContext(ctx, "oauthflow: due work failed; it is retried when its lease lapses",
			"job", kind, "id", id, "error", w.errorText(err))
		return
	}
	if rescheduled {
		return // the job placed its entry itself
	}
	if err := w.Cancel(ctx, kind, id); err != nil {
		w.log.WarnContext(ctx, "oauthflow: done work could not be removed", "job", kind, "error", err.Error())
	}
}

// runJob does one piece of work, bounded so that a run whose lock a dead
// instance still holds does not hold up the rest of the pass for long.
func runJob(ctx context.Context, j Job, id string) (rescheduled bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, Lease/2)
	defer cancel()
	defer errs.Recover(&err, "due work")
	return j(ctx, id)
}
