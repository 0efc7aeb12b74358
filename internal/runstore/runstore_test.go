package runstore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/lease"
)

// recordingStore is a store that keeps the order of the writes it runs, and
// refuses every Schedule when refuse is set. It runs a batch one command at a
// time, in order, like any store without a batch of its own.
type recordingStore struct {
	kv.Store
	refuse bool

	mu    sync.Mutex
	order []string
}

var errRefused = errors.New("refused")

func (s *recordingStore) note(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.order = append(s.order, what)
}

func (s *recordingStore) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	s.note("set " + key)
	return s.Store.Set(ctx, key, value, ttl)
}

func (s *recordingStore) CompareAndDelete(ctx context.Context, key string, value []byte) (bool, error) {
	s.note("release " + key)
	return s.Store.CompareAndDelete(ctx, key, value)
}

func (s *recordingStore) Schedule(ctx context.Context, index, member string, due time.Time) error {
	if s.refuse {
		return errRefused
	}
	return s.Store.Schedule(ctx, index, member, due)
}

func newStore() *recordingStore { return &recordingStore{Store: kv.NewMemory(nil)} }

func take(t *testing.T, ctx context.Context, store kv.Store, id string) (context.Context, *Hold, *kv.Op) {
	t.Helper()
	hctx, h, read, err := Take(ctx, store, id, "lock:"+id, time.Minute, time.Now, "run:"+id)
	if err != nil {
		t.Fatalf("Take(%s): %v", id, err)
	}
	return hctx, h, read
}

// A hold is on the call path that took it, and on the paths derived from it;
// never on the path above.
func TestHoldIsOnItsPathOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore()
	actx, a, _ := take(t, ctx, store, "a")
	bctx, b, _ := take(t, actx, store, "b")
	if Holds(ctx, "a") || Holds(actx, "b") {
		t.Fatal("a path above the take holds the run")
	}
	if Of(bctx, "a") != a || Of(bctx, "b") != b {
		t.Fatal("a path below the takes does not hold both runs")
	}
	b.Release(bctx, store)
	a.Release(actx, store)
	if _, ok, _ := lease.Try(ctx, store, "lock:a", time.Minute); !ok {
		t.Fatal("the lock is not free after the release")
	}
}

// Take reads the run's record, and the reads WithTake sent serve the hold,
// kept current by its own writes.
func TestTakeReadsServeTheHold(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore()
	for key, v := range map[string]string{"run:r": "record", "doc:r": "v1"} {
		if err := store.Set(ctx, key, []byte(v), time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	doc := &kv.Op{Kind: kv.OpGet, Key: "doc:r"}
	hctx, h, read := take(t, WithTake(ctx, "r", doc), store, "r")
	defer h.Release(hctx, store)
	if string(read.Got) != "record" || read.Err != nil {
		t.Fatalf("the record read with the take = %q, %v", read.Got, read.Err)
	}
	if op := h.ReadWithTake("doc:r"); op == nil || string(op.Got) != "v1" {
		t.Fatalf("ReadWithTake = %+v; want the document sent with the take", op)
	}
	h.Wrote("doc:r", []byte("v2"))
	h.Wrote("doc:other", []byte("x"))
	if op := h.ReadWithTake("doc:r"); op == nil || string(op.Got) != "v2" {
		t.Fatalf("ReadWithTake after a write = %+v; want the hold's own write", op)
	}
	if op := h.ReadWithTake("doc:other"); op != nil {
		t.Fatalf("ReadWithTake of a key not read with the take = %+v; want nil", op)
	}
}

// A write sent with the take that fails comes back with the hold, whose
// release frees the lock.
func TestTakeWriteFailedIsReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore()
	store.refuse = true
	watch := &kv.Op{Kind: kv.OpSchedule, Key: "due", Member: "watch:r", Due: time.Now()}
	hctx, h, _, err := Take(WithTake(ctx, "r", watch), store, "r", "lock:r", time.Minute, time.Now, "")
	if !errors.Is(err, errRefused) || !errors.Is(err, errs.StoreUnavailable) || h == nil {
		t.Fatalf("Take = %v, %v; want the refused write's error with the hold", h, err)
	}
	h.Release(hctx, store)
	if _, ok, _ := lease.Try(ctx, store, "lock:r", time.Minute); !ok {
		t.Fatal("the lock is not free after the release")
	}
}

// The release saves the record and tidies before it frees the lock, in one
// batch; a record that could not be saved keeps its due work.
func TestReleaseSavesBeforeTheLockIsFree(t *testing.T) {
	t.Parallel()
	for _, unsaved := range []bool{false, true} {
		ctx := context.Background()
		store := newStore()
		if err := store.Schedule(ctx, "due", "lapse:r", time.Now()); err != nil {
			t.Fatal(err)
		}
		hctx, h, _ := take(t, ctx, store, "r")
		var failed error
		if unsaved {
			failed = errors.New("a write the save needed was refused")
		}
		if err := h.SaveAtRelease([]*kv.Op{{Kind: kv.OpSet, Key: "run:r", Value: []byte("ended"), TTL: time.Minute}}, failed); err != failed {
			t.Fatalf("SaveAtRelease = %v; want %v", err, failed)
		}
		h.TidyAtRelease(&kv.Op{Kind: kv.OpUnschedule, Key: "due", Member: "lapse:r"})
		save, tidy, err := h.Release(hctx, store)
		if err != nil {
			t.Fatalf("unsaved %v: Release = %v", unsaved, err)
		}
		members, err := store.Store.(*kv.Memory).Members(ctx, "due")
		if err != nil {
			t.Fatal(err)
		}
		_, kept := members["lapse:r"]
		want := []string{"set run:r", "release lock:r"}
		if unsaved {
			want = want[1:]
		}
		switch {
		case !slices.Equal(store.order, want):
			t.Errorf("unsaved %v: the store ran %q; want %q", unsaved, store.order, want)
		case kept != unsaved:
			t.Errorf("unsaved %v: the due work is kept: %v", unsaved, kept)
		case unsaved != (len(save) == 0 && len(tidy) == 0):
			t.Errorf("unsaved %v: Release returned save %v, tidy %v", unsaved, save, tidy)
		}
	}
}

// A hold whose lock another owner took is no longer held: StillHeld says so
// once its proof is old. A path that does not hold the run is not fenced.
func TestStillHeldFencesALostLock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore()
	var mu sync.Mutex
	at := time.Unix(1_000_000, 0)
	now := func() time.Time { mu.Lock(); defer mu.Unlock(); return at }
	hctx, h, _, err := Take(ctx, store, "r", "lock:r", time.Minute, now, "")
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(hctx, store)
	if err := store.Set(ctx, "lock:r", []byte("another-owner"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := StillHeld(hctx, "r"); err != nil {
		t.Fatalf("StillHeld right after the take = %v; want the take's proof trusted", err)
	}
	mu.Lock()
	at = at.Add(time.Minute)
	mu.Unlock()
	if err := StillHeld(hctx, "r"); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("StillHeld once the proof is old = %v; want lease.ErrLost", err)
	}
	if err := StillHeld(ctx, "r"); err != nil {
		t.Fatalf("StillHeld on a path that does not hold the run = %v; want nil", err)
	}
}

// The writes a call makes whatever becomes of the run go first in the
// release's batch, before the record's save, and are sent even when that
// save is not made; once the batch has run, their landed function reads
// them, and what AfterRelease gave hears its failure.
func TestReleaseSendsItsOwnWritesFirst(t *testing.T) {
	t.Parallel()
	errUnwritten := errors.New("the write did not land")
	for _, tc := range []struct {
		name    string
		unsaved bool
		failed  error
	}{{"saved", false, nil}, {"save not made", true, nil}, {"write failed", false, errUnwritten}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			store := newStore()
			hctx, h, _ := take(t, ctx, store, "r")
			tokens := &kv.Op{Kind: kv.OpSet, Key: "tokens", Value: []byte("t"), TTL: time.Minute}
			var landedSaw []byte
			h.WriteAtRelease(func(ctx context.Context) error {
				landedSaw, _ = store.Get(ctx, "tokens")
				return tc.failed
			}, tokens)
			var heard []error
			h.AfterRelease(func(_ context.Context, failed error) { heard = append(heard, failed) })
			var saveErr error
			if tc.unsaved {
				saveErr = errors.New("a write the save needed was refused")
			}
			_ = h.SaveAtRelease([]*kv.Op{{Kind: kv.OpSet, Key: "run:r", Value: []byte("ended"), TTL: time.Minute}}, saveErr)
			_, _, err := h.Release(hctx, store)
			want := []string{"set tokens", "set run:r", "release lock:r"}
			if tc.unsaved {
				want = []string{"set tokens", "release lock:r"}
			}
			if !slices.Equal(store.order, want) {
				t.Errorf("the store ran %q; want %q", store.order, want)
			}
			if string(landedSaw) != "t" {
				t.Errorf("landed read %q before the batch had run", landedSaw)
			}
			if !errors.Is(err, tc.failed) || (err == nil) != (tc.failed == nil) {
				t.Errorf("Release = %v; want the landed function's %v", err, tc.failed)
			}
			if len(heard) != 1 || !errors.Is(heard[0], tc.failed) || (heard[0] == nil) != (tc.failed == nil) {
				t.Errorf("AfterRelease heard %v; want once, %v", heard, tc.failed)
			}
		})
	}
}

// A write given to go with the record's next save is read back on the
// hold's path at once, replaced by a later write of its key, and handed
// once to the save that carries it.
func TestWithSaveGoesWithTheNextSave(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := newStore()
	hctx, h, _ := take(t, ctx, store, "r")
	defer h.Release(hctx, store)
	h.WithSave(&kv.Op{Kind: kv.OpSet, Key: "doc:r", Value: []byte("v1")})
	h.WithSave(&kv.Op{Kind: kv.OpSet, Key: "doc:r", Value: []byte("v2")})
	if op := h.ReadWithTake("doc:r"); op == nil || string(op.Got) != "v2" {
		t.Fatalf("ReadWithTake = %+v; want the write to go with the save", op)
	}
	ops := h.TakeWithSave()
	if len(ops) != 1 || string(ops[0].Value) != "v2" {
		t.Fatalf("TakeWithSave = %+v; want the later write of the key alone", ops)
	}
	if ops := h.TakeWithSave(); len(ops) != 0 {
		t.Fatalf("TakeWithSave again = %+v; want nothing", ops)
	}
	if v, err := store.Get(ctx, "doc:r"); err == nil {
		t.Fatalf("the write went at once: %q", v)
	}
}
