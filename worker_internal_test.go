package oauthflow

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/waitfor"
)

// A pass does its pieces of work side by side, all of them up to maxInFlight:
// every piece here waits until maxInFlight of them run, which only a pass
// that runs that many at once lets happen, and none sees more.
func TestWorkerPassRunsPiecesSideBySide(t *testing.T) {
	t.Parallel()
	kv := NewMemoryKV()
	now := time.Now()
	w := newWorker(kv, func() time.Time { return now }, slog.New(slog.DiscardHandler), time.Hour)
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
	kv := NewMemoryKV()
	now := time.Now()
	w := newWorker(kv, func() time.Time { return now }, slog.New(slog.DiscardHandler), time.Hour)
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
	if left, err := kv.Claim(ctx, dueIndex, now, workLease, 1); err != nil || len(left) != 0 {
		t.Fatalf("left due: %v, %v", left, err)
	}
}
