package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/redis/go-redis/v9"
)

// The kinds of work of these tests, named after the library's.
const (
	device = "device" // a device sign-in's poll
	lapse  = "lapse"  // a sign-in's lapse
)

// A pass does its pieces of work side by side, all of them up to MaxInFlight:
// every piece here waits until MaxInFlight of them run, which only a pass
// that runs that many at once lets happen, and none sees more.
func TestWorkerPassRunsPiecesSideBySide(t *testing.T) {
	t.Parallel()
	store := kv.NewMemory(nil)
	now := time.Now()
	w := New(store, Config{Now: func() time.Time { return now }, Every: time.Hour})
	var mu sync.Mutex
	running, most := 0, 0
	full := make(chan struct{})
	w.Handle("slow", Share{}, func(ctx context.Context, _ string) (bool, error) {
		mu.Lock()
		running++
		most = max(most, running)
		if running == MaxInFlight {
			close(full)
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-full:
			return false, nil
		case <-ctx.Done(): // only if the pass never runs MaxInFlight at once
			return false, ctx.Err()
		}
	})
	ctx := context.Background()
	for i := range MaxInFlight {
		if err := w.Schedule(ctx, "slow", string(rune('a'+i)), now); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a deadlock breaker, not a measure
	defer cancel()
	if n := w.Pass(ctx); n != MaxInFlight {
		t.Fatalf("the pass did %d pieces, want %d", n, MaxInFlight)
	}
	if most != MaxInFlight {
		t.Fatalf("at most %d pieces ran at once, want %d", most, MaxInFlight)
	}
}

// Work due in bulk is drained in one go, claim after claim as pieces end,
// never more than MaxInFlight at once.
func TestWorkerDrainsBulkWork(t *testing.T) {
	t.Parallel()
	store := kv.NewMemory(nil)
	now := time.Now()
	w := New(store, Config{Now: func() time.Time { return now }, Every: time.Hour})
	var mu sync.Mutex
	running, most, done := 0, 0, 0
	w.Handle("quick", Share{}, func(context.Context, string) (bool, error) {
		mu.Lock()
		running++
		most = max(most, running)
		mu.Unlock()
		time.Sleep(time.Millisecond) // keeps pieces overlapping; the counts, not the time, are checked
		mu.Lock()
		running--
		done++
		mu.Unlock()
		return false, nil
	})
	ctx := context.Background()
	const due = 3*MaxInFlight + 17
	for i := range due {
		if err := w.Schedule(ctx, "quick", fmt.Sprint(i), now); err != nil {
			t.Fatal(err)
		}
	}
	w.Drain(ctx)
	waitfor.Group(t, &w.running, "the drained pieces")
	if done != due {
		t.Fatalf("one drain did %d of %d due pieces", done, due)
	}
	if most > MaxInFlight {
		t.Fatalf("%d pieces ran at once, more than %d", most, MaxInFlight)
	}
	if left, err := kv.ClaimSharded(ctx, store, Index, now, Lease, 1); err != nil || len(left) != 0 {
		t.Fatalf("left due: %v, %v", left, err)
	}
}

// memoryWorker is a worker over an empty MemoryKV, on a clock of its own,
// whose passes run only when a test drives them.
func memoryWorker() (*Worker, *fakeclock.Clock, kv.Store) {
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	store := kv.NewMemory(nil)
	return New(store, Config{Now: clock.Now, Every: time.Hour}), clock, store
}

// hangUntil is a job's work that hangs until hang is closed or the worker
// stops it.
func hangUntil(ctx context.Context, hang <-chan struct{}) (bool, error) {
	select {
	case <-hang:
		return false, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// One kind of work that hangs holds only its share of the worker: the
// pieces beyond it wait here up to maxHeld, the rest go back to the index
// due in a second or so (not a lease away), another kind of work still runs,
// and a piece held for half a lease is let go rather than started late.
func TestWorkerHoldsBackWhatItsShareHasNoRoomFor(t *testing.T) {
	t.Parallel()
	w, clock, store := memoryWorker()
	hang := make(chan struct{})
	var started, ended, inFlight atomic.Int64
	w.Handle(device, Share{Most: KindShare}, func(ctx context.Context, _ string) (bool, error) { // a device endpoint that hangs
		started.Add(1)
		defer ended.Add(1)
		if inFlight.Add(1) > KindShare {
			return false, nil // beyond the share: ends at once, and the lapse below sees it
		}
		defer inFlight.Add(-1)
		return hangUntil(ctx, hang)
	})
	lapsed := make(chan int64, 1)
	w.Handle(lapse, Share{Most: KindShare}, func(context.Context, string) (bool, error) {
		lapsed <- ended.Load()
		return false, nil
	})
	ctx := context.Background()
	const over = 100
	const due = KindShare + maxHeld + over
	for i := range due {
		if err := w.Schedule(ctx, device, fmt.Sprint(i), clock.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Schedule(ctx, lapse, "run-1", clock.Now()); err != nil { // due after every poll
		t.Fatal(err)
	}
	w.Drain(ctx)
	if n := waitfor.Recv(t, lapsed, "the lapse"); n != 0 {
		t.Fatalf("the lapse ran once %d device polls had given up, want while all of them hang", n)
	}
	w.mu.Lock()
	running, held := w.busy[device], w.nHeld
	w.mu.Unlock()
	if running != KindShare || held != maxHeld {
		t.Fatalf("%d device polls in flight and %d held, want %d and %d", running, held, KindShare, maxHeld)
	}
	index, err := kv.MembersSharded(ctx, store, Index)
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
	clock.Advance(Lease / 2) // the held polls could no longer end within their lease
	close(hang)
	waitfor.Group(t, &w.running, "the worker's pieces")
	if n := started.Load(); n != KindShare {
		t.Fatalf("%d device polls ran, want the %d in flight: the held ones are let go", n, KindShare)
	}
	if w.nHeld != 0 {
		t.Fatalf("%d pieces still held", w.nHeld)
	}
}

// Past a backlog its shares have no room for, a drain looks at most maxBack
// pieces a second: what it takes beyond what it can hold goes back to the
// index, and once maxBack have gone back the drain stops, where it went on
// claiming and putting back the whole backlog (each piece two scripts on a
// shard) every pass. What is due behind the backlog is reached a second on.
func TestWorkerLooksPastABacklogABoundedWayEachSecond(t *testing.T) {
	t.Parallel()
	w, clock, store := memoryWorker()
	hang := make(chan struct{})
	w.Handle(device, Share{Most: KindShare}, func(ctx context.Context, _ string) (bool, error) { // a device endpoint that hangs
		return hangUntil(ctx, hang)
	})
	lapsed := make(chan struct{}, 1)
	w.Handle(lapse, Share{Most: KindShare}, func(context.Context, string) (bool, error) {
		lapsed <- struct{}{}
		return false, nil
	})
	ctx := context.Background()
	const over = maxBack + 100
	const claim = MaxInFlight - KindShare // what each claim asks for while the polls hang
	for i := range KindShare + maxHeld + over {
		if err := w.Schedule(ctx, device, fmt.Sprint(i), clock.Now().Add(-time.Minute)); err != nil {
			t.Fatal(err)
		}
	}
	lapseDue := clock.Now()
	if err := w.Schedule(ctx, lapse, "run-1", lapseDue); err != nil { // due after every poll
		t.Fatal(err)
	}
	w.Drain(ctx)
	index, err := kv.MembersSharded(ctx, store, Index)
	if err != nil {
		t.Fatal(err)
	}
	back, untouched := 0, 0
	for member, at := range index {
		switch {
		case at > clock.Now().UnixMilli() && at <= clock.Now().Add(2*busyRetry).UnixMilli():
			back++
		case member != Member(lapse, "run-1") && at < clock.Now().UnixMilli():
			untouched++
		}
	}
	if back < maxBack || back >= maxBack+claim || untouched != over-back {
		t.Fatalf("one drain put back %d polls and left %d due, want %d to %d put back and the rest of the %d left",
			back, untouched, maxBack, maxBack+claim-1, over)
	}
	if at, ok := index[Member(lapse, "run-1")]; !ok || at != lapseDue.UnixMilli() {
		t.Fatalf("the lapse behind the backlog was claimed in the same drain (in the index: %v, due %d)", ok, at)
	}
	clock.Advance(busyRetry)
	w.Drain(ctx)
	waitfor.Recv(t, lapsed, "the lapse, a second on")
	clock.Advance(Lease / 2) // the held polls could no longer end within their lease
	close(hang)
	waitfor.Group(t, &w.running, "the worker's pieces")
}

// Once the worker stops, the pieces it holds back are left to their leases:
// the end of a piece in flight starts none of them.
func TestWorkerStartsNoHeldPieceOnceStopped(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	store := kv.NewMemory(nil)
	w := New(store, Config{Now: clock.Now, Every: time.Hour})
	var started atomic.Int64
	full := make(chan struct{})
	w.Handle(device, Share{Most: KindShare}, func(ctx context.Context, _ string) (bool, error) {
		if started.Add(1) == KindShare {
			close(full)
		}
		<-ctx.Done() // hangs until the worker stops
		return false, ctx.Err()
	})
	ctx, stop := context.WithCancel(context.Background())
	for i := range KindShare + 10 {
		if err := w.Schedule(ctx, device, fmt.Sprint(i), clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	w.Drain(ctx)
	waitfor.Recv(t, full, "the device polls' share in flight")
	stop()
	waitfor.Group(t, &w.running, "the worker's pieces")
	if n := started.Load(); n != KindShare {
		t.Fatalf("%d device polls started, want %d: held ones started after the worker stopped", n, KindShare)
	}
}

// stores are the stores the worker is tried on, each empty.
func stores() map[string]func(t *testing.T) kv.Store {
	return map[string]func(t *testing.T) kv.Store{
		"memory": func(*testing.T) kv.Store { return kv.NewMemory(nil) },
		"redis": func(t *testing.T) kv.Store {
			c := redistest.Real(t)
			return kv.WithPrefix(kv.NewRedis(c), redistest.Prefix(t, c))
		},
	}
}

// A piece of work a pass claims is leased for Lease: neither another
// instance's pass nor the claimer's own next one takes it again until the
// lease lapses, so a failing job is retried after its lease, not every pass.
func TestWorkerClaimLeasesTheWork(t *testing.T) {
	t.Parallel()
	for name, newKV := range stores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testWorkerClaimLeasesTheWork(t, newKV(t))
		})
	}
}

func testWorkerClaimLeasesTheWork(t *testing.T, store kv.Store) {
	ctx := context.Background()
	clock := fakeclock.New(time.Now())
	var tries atomic.Int64
	instance := func() *Worker {
		w := New(store, Config{Now: clock.Now, Every: time.Hour})
		w.Handle("flaky", Share{}, func(context.Context, string) (bool, error) {
			tries.Add(1)
			return false, errors.New("the provider is down")
		})
		return w
	}
	a, b := instance(), instance()
	if err := a.Schedule(ctx, "flaky", "c1", clock.Now()); err != nil {
		t.Fatal(err)
	}
	passes := func(want int, when string) {
		t.Helper()
		if n := a.Pass(ctx) + b.Pass(ctx); n != want {
			t.Fatalf("%s: the two instances' passes did %d pieces; want %d", when, n, want)
		}
	}
	passes(1, "due")
	passes(0, "just claimed")
	clock.Advance(Lease - time.Second)
	passes(0, "a second before the lease lapses")
	clock.Advance(2 * time.Second)
	passes(1, "a second after the lease lapsed")
	if n := tries.Load(); n != 2 {
		t.Fatalf("the failing job ran %d times; want 2", n)
	}
}

// A job that reports it rescheduled keeps the entry it placed; one that
// reports nothing has its entry removed once it succeeds.
func TestWorkerKeepsTheEntryAJobRescheduled(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Unix(1_800_000_000, 0))
	store := kv.NewMemory(clock.Now)
	w := New(store, Config{Now: clock.Now, Every: time.Hour})
	later := clock.Now().Add(time.Hour)
	w.Handle("again", Share{}, func(ctx context.Context, id string) (bool, error) {
		return true, w.Schedule(ctx, "again", id, later)
	})
	w.Handle("once", Share{}, func(context.Context, string) (bool, error) { return false, nil })
	ctx := context.Background()
	for _, kind := range []string{"again", "once"} {
		if err := w.Schedule(ctx, kind, "x", clock.Now()); err != nil {
			t.Fatal(err)
		}
	}
	if n := w.Pass(ctx); n != 2 {
		t.Fatalf("the pass did %d pieces, want 2", n)
	}
	index, err := kv.MembersSharded(ctx, store, Index)
	if err != nil {
		t.Fatal(err)
	}
	if len(index) != 1 || index[Member("again", "x")] != later.UnixMilli() {
		t.Fatalf("the index holds %v; want only the rescheduled entry, due at %d", index, later.UnixMilli())
	}
}

// Workers of several instances passing at once run each piece of due work
// exactly once, over a Redis index in many shards at more than one level
// (and with what an earlier version wrote to the index as one sorted set)
// as over a MemoryKV.
func TestWorkersRacingRunEachPieceOnce(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_800_000_000, 0)
	stores := map[string]func(t *testing.T) (kv.Store, func() kv.Store){
		"memory": func(*testing.T) (kv.Store, func() kv.Store) {
			m := kv.NewMemory(func() time.Time { return now })
			return m, func() kv.Store { return m }
		},
		"redis": func(t *testing.T) (kv.Store, func() kv.Store) {
			c := redistest.Real(t)
			prefix := redistest.Prefix(t, c)
			for i := range 100 { // an earlier version's entries, in the index as one set
				z := redis.Z{Score: float64(now.UnixMilli()), Member: Member(device, fmt.Sprint("old-", i))}
				if err := c.ZAdd(context.Background(), prefix+Index, z).Err(); err != nil {
					t.Fatal(err)
				}
			}
			return kv.WithPrefix(kv.NewRedis(c), prefix), func() kv.Store { return kv.WithPrefix(kv.NewRedis(c), prefix) }
		},
	}
	for name, open := range stores {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first, another := open(t)
			ctx := context.Background()
			var mu sync.Mutex
			runs := map[string]int{}
			job := func(_ context.Context, id string) (bool, error) {
				mu.Lock()
				runs[id]++
				mu.Unlock()
				return false, nil
			}
			for i := range 600 {
				if err := New(first, Config{}).Schedule(ctx, device, fmt.Sprint("new-", i), now.Add(-time.Duration(i)*time.Millisecond)); err != nil {
					t.Fatal(err)
				}
			}
			var wg sync.WaitGroup
			for range 4 {
				w := New(another(), Config{Now: func() time.Time { return now }, Every: time.Hour})
				w.Handle(device, Share{}, job)
				wg.Go(func() {
					for w.Pass(ctx) > 0 {
					}
				})
			}
			waitfor.Group(t, &wg, "the racing workers")
			want := 600
			if name == "redis" {
				want += 100
			}
			for id, n := range runs {
				if n != 1 {
					t.Errorf("%s ran %d times, want once", id, n)
				}
			}
			if len(runs) != want {
				t.Errorf("%d pieces ran, want %d", len(runs), want)
			}
			if left, err := kv.MembersSharded(ctx, first, Index); err != nil || len(left) != 0 {
				t.Errorf("the index holds %d entries once every piece is done, %v", len(left), err)
			}
		})
	}
}
