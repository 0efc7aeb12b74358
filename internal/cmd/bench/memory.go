package main

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/kv"
)

// heap is the live heap after a full collection.
func heap() float64 {
	runtime.GC()
	runtime.GC() // the second pass frees what the first one's finalizers released
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.HeapAlloc)
}

// memoryFigures: what MemoryKV holds per token record, and whether it gives
// the memory back after a burst of sign-ins expires.
func memoryFigures(e *env) (*table, error) {
	t := &table{title: "Memory (MemoryKV)"}
	var per, recl, peak sample
	for range e.opts.rounds {
		b, err := bytesPerRecord(e.opts.records)
		if err != nil {
			return t, err
		}
		r, p, err := reclaim(e.opts.sessions)
		if err != nil {
			return t, err
		}
		per, recl, peak = append(per, b), append(recl, r), append(peak, p)
	}
	t.rows = []row{
		{figure: "bytes per stored token record", value: per.format(" B", 0), limit: "the record's JSON", limitValue: fmt.Sprintf("%d B", len(record)),
			ratio: ratios(per, sample(slices.Repeat([]float64{float64(len(record))}, len(per)))), target: "reported"},
		{figure: fmt.Sprintf("heap after %d expired sessions are reclaimed", e.opts.sessions), value: recl.format("x baseline", 3), limit: "heap before them", limitValue: "1.0x",
			ratio: recl, target: "<= 1.10x", want: func(v float64) bool { return v <= 1.10 }},
	}
	t.prose = "While the sessions were live the heap stood at " + peak.format("x baseline", 1) + ": the reclaim figure is not the baseline by default."
	return t, nil
}

// bytesPerRecord stores n records through the TokenStore and divides the heap growth by n.
func bytesPerRecord(n int) (float64, error) {
	ctx := context.Background()
	kv := oauthflow.NewMemoryKV()
	defer func() { _ = kv.Close() }()
	store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	tok := oauthflow.StoredTokens{AccessToken: "gho_16C7e42F292c6912E7710c838347Ae178B4a",
		RefreshToken: "ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498", ExpiresAt: 4102444800000, Scope: "repo read:user"}
	before := heap()
	for i := range n {
		if err := store.StoreTokens(ctx, fmt.Sprintf("user-%07d", i), provID, tok); err != nil {
			return 0, err
		}
	}
	after := heap()
	runtime.KeepAlive(store)
	return (after - before) / float64(n), nil
}

// reclaim registers n sessions on a fake clock, moves it past their TTL, lets
// the store reclaim them, and returns the heap over the baseline, after and at the peak.
func reclaim(n int) (float64, float64, error) {
	ctx := context.Background()
	var now atomic.Int64
	now.Store(time.Now().UnixNano())
	// MemoryKV's own store, on a clock the measure moves.
	store := kv.NewMemory(func() time.Time { return time.Unix(0, now.Load()) })
	defer func() { _ = store.Close() }()
	ss := oauthflow.NewSessionService(store)
	base := heap()
	for range n {
		if err := ss.Register(ctx, randomState(), benchSession()); err != nil {
			return 0, 0, err
		}
	}
	peak := heap()
	now.Add(int64(time.Hour))
	if err := triggerReclaim(ctx, store, now.Load()); err != nil {
		return 0, 0, err
	}
	after := heap()
	runtime.KeepAlive(store)
	return after / base, peak / base, nil
}

// triggerReclaim does what a Module's life does to an idle store: one write and
// the background worker's Claim (MemoryKV sweeps, and rebuilds its map after
// heavy expiry, on either).
func triggerReclaim(ctx context.Context, store *kv.Memory, nowNs int64) error {
	if err := store.Set(ctx, "bench:poke", []byte("1"), time.Second); err != nil {
		return err
	}
	_, err := store.Claim(ctx, "bench:due", time.Unix(0, nowNs), time.Second, 1)
	return err
}
