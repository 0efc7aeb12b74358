package authserver

import (
	"fmt"
	"testing"
	"time"
)

func TestProofLogRefusesAReplay(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	l := proofLog{max: 8}
	lapses := now.Add(time.Minute)
	if !l.spend("a", lapses, now) || !l.spend("b", lapses, now) {
		t.Fatal("a new proof refused")
	}
	if l.spend("a", lapses, now) || l.spend("a", lapses, lapses) {
		t.Fatal("a replay accepted before the proof lapsed")
	}
	if !l.spend("a", lapses.Add(time.Minute), lapses.Add(time.Nanosecond)) {
		t.Fatal("a lapsed proof is still remembered")
	}
}

// TestProofLogIsBounded: past max entries the oldest is forgotten, lapsed or not,
// and no more than max are kept.
func TestProofLogIsBounded(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const bound = 4
	l := proofLog{max: bound}
	for i := range 3 * bound {
		if !l.spend(fmt.Sprint(i), now.Add(time.Hour), now) {
			t.Fatalf("proof %d refused", i)
		}
		if len(l.until) > bound || len(l.order) != len(l.until) {
			t.Fatalf("after %d proofs: %d remembered, %d in order; max %d", i+1, len(l.until), len(l.order), bound)
		}
	}
	if l.spend(fmt.Sprint(3*bound-1), now.Add(time.Hour), now) {
		t.Fatal("the newest proof was forgotten")
	}
	if !l.spend("0", now.Add(time.Hour), now) {
		t.Fatal("the oldest proof is still remembered past the bound")
	}
}
