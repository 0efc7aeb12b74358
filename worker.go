package oauthflow

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The background worker does the Module's time-driven work: sign-ins that lapse
// unused (and, as later work lands, deliveries and completions to re-drive).
// Work waits in one due-time index in the KV, shared by every instance; each
// pass claims what is due with one atomic, single-key command that also leases
// it, so of many instances exactly one does a piece of work, and work whose
// instance died is claimed again when its lease lapses. An idle pass costs one
// command.

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
)

// job does the work named by id; a nil error removes it from the index, any
// other leaves it to be claimed again when its lease lapses.
type job func(ctx context.Context, id string) error

type worker struct {
	kv    KV
	now   func() time.Time
	log   *slog.Logger
	every time.Duration
	jobs  map[string]job

	failing atomic.Bool // the last pass could not reach the store (logged once)

	slots   chan struct{}  // one per piece in flight (maxInFlight)
	running sync.WaitGroup // the pieces in flight

	stopOnce sync.Once
	stop     context.CancelFunc
	done     chan struct{}
}

func newWorker(kv KV, now func() time.Time, log *slog.Logger, every time.Duration) *worker {
	if every <= 0 {
		every = defaultWorkerInterval
	}
	return &worker{kv: kv, now: now, log: log, every: every, jobs: make(map[string]job), slots: make(chan struct{}, maxInFlight)}
}

// handle registers the job run for members "{name}:{id}". Setup only.
func (w *worker) handle(name string, j job) { w.jobs[name] = j }

// schedule makes id's work under job name due at due.
func (w *worker) schedule(ctx context.Context, name, id string, due time.Time) error {
	if err := w.kv.Schedule(ctx, dueIndex, name+":"+id, due); err != nil {
		return storeErr(ctx, "schedule "+name, err)
	}
	return nil
}

// cancel removes id's work under job name, if any.
func (w *worker) cancel(ctx context.Context, name, id string) error {
	if err := w.kv.Unschedule(ctx, dueIndex, name+":"+id); err != nil {
		return storeErr(ctx, "unschedule "+name, err)
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
	for ctx.Err() == nil {
		select {
		case w.slots <- struct{}{}: // wait for one free slot, and hold it
		case <-ctx.Done():
			return
		}
		want := 1 + cap(w.slots) - len(w.slots) // the held slot and those free now
		members, err := w.claim(ctx, want)
		if len(members) == 0 {
			<-w.slots
		}
		for i, member := range members {
			if i > 0 {
				w.slots <- struct{}{} // free: only this goroutine takes slots
			}
			w.running.Add(1)
			go func() {
				defer func() { <-w.slots; w.running.Done() }()
				w.do(ctx, member)
			}()
		}
		if err != nil || len(members) < want {
			return // nothing more is due now
		}
	}
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
// (each piece is safe beside any other: they are the same as on other
// instances) and returns how many it did. Tests drive the worker with it.
func (w *worker) pass(ctx context.Context) int {
	members, _ := w.claim(ctx, maxInFlight)
	var wg sync.WaitGroup
	for _, member := range members {
		wg.Go(func() { w.do(ctx, member) })
	}
	wg.Wait()
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
	defer recoverInto(&err, "due work")
	return j(ctx, id)
}
