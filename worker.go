package oauthflow

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
)

// The background worker does the Module's time-driven work: sign-ins that lapse
// unused (and, as later work lands, deliveries and completions to re-drive).
// Work waits in one due-time index in the KV, shared by every instance; each
// pass claims what is due with one atomic, single-key command that also leases
// it, so of many instances exactly one does a piece of work, and work whose
// instance died is claimed again when its lease lapses. An idle pass costs one
// command.
//
// A limit bounds what it names, not the worker: each kind of work, and each
// provider's refreshes ahead, has a share of the worker's slots (shares), so
// a provider whose endpoint hangs, or a kind of work that does, leaves room
// for the rest. A claimed piece whose share is full waits here, without a
// slot, for a piece of that share to end; beyond maxHeld of them it goes back
// to the index for a second, so that what is due behind it is claimed.

// dueIndex is the KV index of due work. Members are "{job}:{id}".
const dueIndex = "oauth:sys:due"

// Worker timings.
const (
	defaultWorkerInterval = time.Second
	workLease             = time.Minute // a claimed piece of work is retried after this
	// maxInFlight bounds the pieces one instance does at once. Most of a
	// piece's time is spent waiting on a provider (a refresh ahead, a device
	// poll), so the worker starts as many as are due, up to this, and claims
	// more as they end: with 100 ms providers that is over 2,000 a second.
	maxInFlight = 256
	// kindShare bounds the pieces of one kind of work in flight, and
	// providerShare those of one provider's refreshes ahead: a kind that
	// hangs (a device endpoint, a run lock a dead instance holds) leaves
	// the others a quarter of the slots, and a provider whose endpoint
	// hangs leaves the other providers a quarter more. providerShare is
	// above the default per-provider Concurrency, so the refreshes ahead of
	// one provider still go at its limit.
	kindShare     = maxInFlight * 3 / 4
	providerShare = maxInFlight / 2
	// maxHeld bounds the claimed pieces that wait here for room in their
	// share. One beyond them is put back in the index, due busyRetry on,
	// spread by busyRetry/maxHeld after the one put back before it in the
	// same drain: a backlog comes back at about the pace its held pieces
	// are done, and what is due behind it is claimed in the same drain.
	maxHeld   = 8 * maxInFlight
	busyRetry = time.Second
)

// share is how much of the worker one kind of work may hold: most pieces
// in flight at once and, when group is set, most of one group of them.
type share struct {
	most      int
	group     func(id string) string
	groupMost int
}

// shares are the worker's shares for the Module's kinds of work. A kind not
// named here may take every slot.
var shares = map[string]share{
	jobLapse:   {most: kindShare},
	jobDeliver: {most: kindShare},
	jobAbandon: {most: kindShare},
	jobDevice:  {most: kindShare},
	jobAhead:   {most: kindShare, group: aheadProvider, groupMost: providerShare},
}

// piece is a claimed piece of work.
type piece struct {
	member      string
	kind, group string // the keys of its shares: the job's name and, if it has groups, "{job}:{group}"
	claimed     time.Time
}

// job does the work named by id; a nil error removes it from the index, any
// other leaves it to be claimed again when its lease lapses.
type job func(ctx context.Context, id string) error

type worker struct {
	kv    kv.Store
	now   func() time.Time
	log   *slog.Logger
	every time.Duration
	jobs  map[string]job

	failing atomic.Bool // the last pass could not reach the store (logged once)

	slots   chan struct{}  // one per piece in flight (maxInFlight)
	running sync.WaitGroup // the pieces in flight

	mu    sync.Mutex
	busy  map[string]int     // pieces in flight per share key
	held  map[string][]piece // claimed pieces waiting, under the key of the share that has no room
	nHeld int

	stopOnce sync.Once
	stop     context.CancelFunc
	done     chan struct{}
}

func newWorker(store kv.Store, now func() time.Time, log *slog.Logger, every time.Duration) *worker {
	if every <= 0 {
		every = defaultWorkerInterval
	}
	return &worker{kv: store, now: now, log: log, every: every, jobs: make(map[string]job), slots: make(chan struct{}, maxInFlight)}
}

// handle registers the job run for members "{name}:{id}". Setup only.
func (w *worker) handle(name string, j job) { w.jobs[name] = j }

// schedule makes id's work under job name due at due.
func (w *worker) schedule(ctx context.Context, name, id string, due time.Time) error {
	if err := w.kv.Schedule(ctx, dueIndex, name+":"+id, due); err != nil {
		return errs.Store(ctx, "schedule "+name, err)
	}
	return nil
}

// cancel removes id's work under job name, if any.
func (w *worker) cancel(ctx context.Context, name, id string) error {
	if err := w.kv.Unschedule(ctx, dueIndex, name+":"+id); err != nil {
		return errs.Store(ctx, "unschedule "+name, err)
	}
	return nil
}

// start looks for due work every w.every until close, and whenever a claim
// came back full, again as soon as a piece ends: work due in bulk (a
// hundred thousand refreshes ahead in one hour) is drained at the pace the
// pieces end, not one batch a tick.
func (w *worker) start() {
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
				w.drain(ctx)
			}
		}
	}()
}

// drain claims due work for the free slots and starts it, and claims again
// as slots free up while claims come back full.
func (w *worker) drain(ctx context.Context) {
	back := 0 // the pieces put back in this drain
	for ctx.Err() == nil {
		select {
		case w.slots <- struct{}{}: // wait for one free slot
			<-w.slots // only this goroutine takes slots: it stays free
		case <-ctx.Done():
			return
		}
		want := cap(w.slots) - len(w.slots)
		members, err := w.claim(ctx, want)
		w.dispatch(ctx, members, &back)
		if err != nil || len(members) < want {
			return // nothing more is due now
		}
	}
}

// dispatch starts each claimed member that its shares have room for, on a
// slot of its own; it holds the others here until a piece of the share
// that has no room ends, up to maxHeld, and puts the rest back in the
// index. *back counts the pieces put back so far in this drain.
func (w *worker) dispatch(ctx context.Context, members []string, back *int) {
	now := w.now()
	var start []piece
	var again []*kv.Op
	w.mu.Lock()
	for _, member := range members {
		p := pieceOf(member, now)
		switch key := w.blockedBy(p); {
		case key == "":
			w.count(p, 1)
			start = append(start, p)
		case w.nHeld < maxHeld:
			w.hold(key, p)
		default:
			due := now.Add(busyRetry + time.Duration(*back)*busyRetry/maxHeld)
			again = append(again, &kv.Op{Kind: kv.OpSchedule, Key: dueIndex, Member: member, Due: due})
			*back++
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
func pieceOf(member string, now time.Time) piece {
	name, id, _ := strings.Cut(member, ":")
	p := piece{member: member, kind: name, claimed: now}
	if sh := shares[name]; sh.group != nil {
		p.group = name + ":" + sh.group(id)
	}
	return p
}

// blockedBy is the key of a share of p's that has no room for it, or ""
// when p may start. w.mu is held.
func (w *worker) blockedBy(p piece) string {
	sh, ok := shares[p.kind]
	switch {
	case !ok:
		return ""
	case w.busy[p.kind] >= sh.most:
		return p.kind
	case p.group != "" && w.busy[p.group] >= sh.groupMost:
		return p.group
	}
	return ""
}

// count adds d to the pieces in flight of p's shares. w.mu is held.
func (w *worker) count(p piece, d int) {
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
func (w *worker) hold(key string, p piece) {
	if w.held == nil {
		w.held = map[string][]piece{}
	}
	w.held[key] = append(w.held[key], p)
	w.nHeld++
}

// unhold drops the first piece waiting on key. w.mu is held.
func (w *worker) unhold(key string) {
	if w.held[key] = w.held[key][1:]; len(w.held[key]) == 0 {
		delete(w.held, key)
	}
	w.nHeld--
}

// run does p and then, on the same slot, each held piece that the end of
// the one before makes room for, until the worker stops.
func (w *worker) run(ctx context.Context, p piece) {
	defer func() { <-w.slots; w.running.Done() }()
	for ok := true; ok; p, ok = w.next(ctx, p) {
		w.do(ctx, p.member)
	}
}

// next counts done ended and returns a held piece that its end makes room
// for, counted in flight; none once ctx is done. A piece held for half a
// lease is let go instead: it could not end before its lease lapses, when
// it is claimed again.
func (w *worker) next(ctx context.Context, done piece) (piece, bool) {
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
			if now.Sub(p.claimed) >= workLease/2 {
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

// claim claims up to n pieces of due work, leased for workLease.
func (w *worker) claim(ctx context.Context, n int) ([]string, error) {
	members, err := w.kv.Claim(ctx, dueIndex, w.now(), workLease, n)
	if err != nil {
		if ctx.Err() == nil && !w.failing.Swap(true) {
			w.log.WarnContext(ctx, "oauthflow: the worker cannot claim due work; it retries every pass", "error", err.Error())
		}
		return nil, err
	}
	w.failing.Store(false)
	return members, nil
}

// close stops the passes and waits for the one running, if any.
func (w *worker) close() {
	w.stopOnce.Do(func() {
		if w.stop != nil {
			w.stop()
			<-w.done
		}
	})
}

// pass claims what is due, up to maxInFlight pieces, does them side by side
// as their shares allow (each piece is safe beside any other: they are the
// same as on other instances) and returns how many it claimed. Tests drive
// the worker with it.
func (w *worker) pass(ctx context.Context) int {
	members, _ := w.claim(ctx, maxInFlight)
	back := 0
	w.dispatch(ctx, members, &back)
	w.running.Wait()
	return len(members)
}

func (w *worker) do(ctx context.Context, member string) {
	name, id, _ := strings.Cut(member, ":")
	j, ok := w.jobs[name]
	if !ok {
		return // work of a newer version of the library: left to the instances that know it
	}
	err := runJob(ctx, j, id)
	if errors.Is(err, errHandled) {
		return // the job placed its entry itself
	}
	if err != nil {
		w.log.WarnContext(ctx, "oauthflow: due work failed; it is retried when its lease lapses",
			"job", name, "id", id, "error", logSafeError(err))
		return
	}
	if err := w.cancel(ctx, name, id); err != nil {
		w.log.WarnContext(ctx, "oauthflow: done work could not be removed", "job", name, "error", err.Error())
	}
}

// runJob does one piece of work, bounded so that a run whose lock a dead
// instance still holds does not hold up the rest of the pass for long.
func runJob(ctx context.Context, j job, id string) (err error) {
	ctx, cancel := context.WithTimeout(ctx, workLease/2)
	defer cancel()
	defer errs.Recover(&err, "due work")
	return j(ctx, id)
}
