package oauthflow

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// A pass does its pieces of work side by side, at most workParallel at once:
// every piece here waits until workParallel of them run, which only a pass
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
		if running == workParallel {
			close(full)
		}
		mu.Unlock()
		defer func() { mu.Lock(); running--; mu.Unlock() }()
		select {
		case <-full:
			return nil
		case <-ctx.Done(): // only if the pass never runs workParallel at once
			return ctx.Err()
		}
	})
	ctx := context.Background()
	for i := range workParallel {
		if err := w.schedule(ctx, "slow", string(rune('a'+i)), now); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second) // a deadlock breaker, not a measure
	defer cancel()
	if n := w.pass(ctx); n != workParallel {
		t.Fatalf("the pass did %d pieces, want %d", n, workParallel)
	}
	if most != workParallel {
		t.Fatalf("at most %d pieces ran at once, want %d", most, workParallel)
	}
}
