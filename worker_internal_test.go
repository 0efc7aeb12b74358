package oauthflow

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

// A pass does its pieces of work side by side, all of them up to maxInFlight:
// every piece here waits until maxInFlight of them run, which only a pass
// that runs that many at once lets happen, and none sees more.
func TestWorkerPassRunsPiecesSideBySide(t *testing.T) {
	t.Parallel()
	store := NewMemoryKV()
	now := time.Now()
	w := newWorker(store, func() time.Time { return now }, slog.New(slog.DiscardHandler), time.Hour)
	var mu sync.Mutex
	running, most := 0, 0
	full := make(chan struct{})
	w.handle("slow", func(ctx context.Context, _ string) error {
		mu.Lock()
		running++
		most = max(most, running)
		if running == maxInFlight {
			close(full)
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-full:
			return nil
		case <-ctx.Done(): // only if the pass never runs maxInFlight at once
			return ctx.Err()
		}
	})
	ctx := context.Background()
	for i := range maxInFlight {
		if err := w.schedule(ctx, "slow", string(rune('a'+i)), now); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a deadlock breaker, not a measure
	defer cancel()
	if n := w.pass(ctx); n != maxInFlight {
		t.Fatalf("the pass did %d pieces, want %d", n, maxInFlight)
	}
	if most != maxInFlight {
		t.Fatalf("at most %d pieces ran at once, want %d", most, maxInFlight)
	}
}

// Work due in bulk is drained in one go, claim after claim as pieces end,
// never more than maxInFlight at once.
func TestWorkerDrainsBulkWork(t *testing.T) {
	t.Parallel()
	store := NewMemoryKV()
	now := time.Now()
	w := newWorker(store, func() time.Time { return now }, slog.New(slog.DiscardHandler), time.Hour)
	var mu sync.Mutex
	running, most, done := 0, 0, 0
	w.handle("quick", func(context.Context, string) error {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(time.Millisecond) // keeps pieces overlapping; the counts, not the time, are checked
		mu.Lock()
		running--
		done++
		mu.Unlock()
		return nil
	})
	ctx := context.Background()
	const due = 3*maxInFlight + 17
	for i := range due {
		if err := w.schedule(ctx, "quick", fmt.Sprint(i), now); err != nil {
			t.Fatal(err)
		}
	}
	w.drain(ctx)
	waitfor.Group(t, &w.running, "the drained pieces")
	if done != due {
		t.Fatalf("one drain did %d of %d due pieces", done, due)
	}
	if most > maxInFlight {
		t.Fatalf("%d pieces ran at once, more than %d", most, maxInFlight)
	}
	if left, err := store.Claim(ctx, dueIndex, now, workLease, 1); err != nil || len(left) != 0 {
		t.Fatalf("left due: %v, %v", left, err)
	}
}

// One kind of work that hangs holds only its share of the worker: the
// pieces beyond it wait here up to maxHeld, the rest go back to the index
// due in a second or so (not a lease away), another kind of work still runs,
// and a piece held for half a lease is let go rather than started late.
func TestWorkerHoldsBackWhatItsShareHasNoRoomFor(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	store := kv.NewMemory(nil)
	w := newWorker(store, clock.Now, slog.New(slog.DiscardHandler), time.Hour)
	hang := make(chan struct{})
	var started, ended, inFlight atomic.Int64
	w.handle(jobDevice, func(ctx context.Context, _ string) error { // a device endpoint that hangs
		started.Add(1)
		defer ended.Add(1)
		if inFlight.Add(1) > kindShare {
			return nil // beyond the share: ends at once, and the lapse below sees it
		}
		defer inFlight.Add(-1)
		select {
		case <-hang:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	lapsed := make(chan int64, 1)
	w.handle(jobLapse, func(context.Context, string) error {
		lapsed <- ended.Load()
		return nil
	})
	ctx := context.Background()
	const over = 100
	const due = kindShare + maxHeld + over
	for i := range due {
		if err := w.schedule(ctx, jobDevice, fmt.Sprint(i), clock.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.schedule(ctx, jobLapse, "run-1", clock.Now()); err != nil { // due after every poll
		t.Fatal(err)
	}
	w.drain(ctx)
	if n := waitfor.Recv(t, lapsed, "the lapse"); n != 0 {
		t.Fatalf("the lapse ran once %d device polls had given up, want while all of them hang", n)
	}
	w.mu.Lock()
	running, held := w.busy[jobDevice], w.nHeld
	w.mu.Unlock()
	if running != kindShare || held != maxHeld {
		t.Fatalf("%d device polls in flight and %d held, want %d and %d", running, held, kindShare, maxHeld)
	}
	index, err := store.Members(ctx, dueIndex)
	if err != nil {
		t.Fatal(err)
	}
	back := 0
	for _, at := range index {
		if at > clock.Now().UnixMilli() && at <= clock.Now().Add(2*busyRetry).UnixMilli() {
			back++
		}
	}
	if back != over {
		t.Fatalf("%d device polls put back due within %s, want the %d beyond what is held", back, 2*busyRetry, over)
	}
	clock.Advance(workLease / 2) // the held polls could no longer end within their lease
	close(hang)
	waitfor.Group(t, &w.running, "the worker's pieces")
	if n := started.Load(); n != kindShare {
		t.Fatalf("%d device polls ran, want the %d in flight: the held ones are let go", n, kindShare)
	}
	if w.nHeld != 0 {
		t.Fatalf("%d pieces still held", w.nHeld)
	}
}

// Once the worker stops, the pieces it holds back are left to their leases:
// the end of a piece in flight starts none of them.
func TestWorkerStartsNoHeldPieceOnceStopped(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	store := NewMemoryKV()
	w := newWorker(store, clock.Now, slog.New(slog.DiscardHandler), time.Hour)
	var started atomic.Int64
	full := make(chan struct{})
	w.handle(jobDevice, func(ctx context.Context, _ string) error {
		if started.Add(1) == kindShare {
			close(full)
		}
		<-ctx.Done() // hangs until the worker stops
		return ctx.Err()
	})
	ctx, stop := context.WithCancel(context.Background())
	for i := range kindShare + 10 {
		if err := w.schedule(ctx, jobDevice, fmt.Sprint(i), clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	w.drain(ctx)
	waitfor.Recv(t, full, "the device polls' share in flight")
	stop()
	waitfor.Group(t, &w.running, "the worker's pieces")
	if n := started.Load(); n != kindShare {
		t.Fatalf("%d device polls started, want %d: held ones started after the worker stopped", n, kindShare)
	}
}
