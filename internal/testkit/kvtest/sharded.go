package kvtest

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
)

// testShardedIndex checks the sharded index (kv.ScheduleSharded and the
// rest) on a store, through the functions the library calls: a Sharder's
// own, or the store's index methods. Enough members are written that a
// Redis store raises its level twice or more, so members written before a
// raise are read, moved, rescheduled and removed.
func testShardedIndex(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, store kv.Store)
	}{
		{"ConcurrentClaimsTakeEachDueMemberOnce", testShardedConcurrentClaims},
		{"RescheduleAndUnscheduleAtEveryLevel", testShardedReschedule},
		{"ScoreAndMembers", testShardedRead},
		{"ClaimEmptyIndex", testShardedEmpty},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, h.New(t)) })
	}
}

// shardedMembers is the count of members the sharded tests write: past
// several raises of a Redis store's level.
const shardedMembers = 250

func shardedName(i int) string { return fmt.Sprintf("ahead:acme:user-%04d", i) }

func mustScheduleSharded(t *testing.T, store kv.Store, member string, due time.Time) {
	t.Helper()
	if err := kv.ScheduleSharded(ctx, store, "due", member, due); err != nil {
		t.Fatalf("ScheduleSharded(%q): %v", member, err)
	}
}

// claimAll claims at now until a claim takes nothing, and returns what it
// took. Claims that never run dry (a member claimed without its lease) stop
// it, failed, once they took more than every member twice.
func claimAll(t *testing.T, store kv.Store, now time.Time, n int) []string {
	t.Helper()
	var all []string
	for len(all) <= 2*shardedMembers {
		got, err := kv.ClaimSharded(ctx, store, "due", now, time.Minute, n)
		if err != nil {
			t.Errorf("ClaimSharded: %v", err)
			return all
		}
		if len(got) == 0 {
			return all
		}
		all = append(all, got...)
	}
	t.Errorf("claims took %d members of %d and were still taking more", len(all), shardedMembers)
	return all
}

// Eight callers claim at once until nothing is left: each due member is
// taken exactly once between them, and none that is not due yet.
func testShardedConcurrentClaims(t *testing.T, store kv.Store) {
	due := map[string]bool{}
	for i := range shardedMembers {
		at := t0.Add(-time.Duration(i) * time.Second)
		if i%5 == 0 {
			at = t0.Add(time.Hour)
		} else {
			due[shardedName(i)] = true
		}
		mustScheduleSharded(t, store, shardedName(i), at)
	}
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for _, m := range claimAll(t, store, t0, 16) {
				mu.Lock()
				taken[m]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if left := claimAll(t, store, t0, 16); len(left) > 0 {
		t.Errorf("%d members still due once every caller found nothing: %q", len(left), left)
	}
	for m, n := range taken {
		if n != 1 || !due[m] {
			t.Errorf("%s was claimed %d times (due: %v), want once if due", m, n, due[m])
		}
	}
	if len(taken) != len(due) {
		t.Errorf("%d of %d due members claimed", len(taken), len(due))
	}
}

// A member rescheduled after the level rose is due at its new time only,
// and an unscheduled one at no level, whichever level it was written at.
func testShardedReschedule(t *testing.T, store kv.Store) {
	for i := range shardedMembers {
		mustScheduleSharded(t, store, shardedName(i), t0.Add(time.Hour))
	}
	for i := range shardedMembers {
		mustScheduleSharded(t, store, shardedName(i), t0.Add(-time.Second))
	}
	if got := claimAll(t, store, t0, 16); len(got) != shardedMembers || hasDuplicate(got) {
		t.Fatalf("claimed %d members (duplicates: %v) at their new due time, want each of %d once", len(got), hasDuplicate(got), shardedMembers)
	}
	kept := map[string]bool{}
	for i := range shardedMembers {
		if i%2 == 0 {
			kept[shardedName(i)] = true
		} else if err := kv.UnscheduleSharded(ctx, store, "due", shardedName(i)); err != nil {
			t.Fatal(err)
		}
	}
	got := claimAll(t, store, t0.Add(2*time.Hour), 16) // past the leases and the first due time
	slices.Sort(got)
	if want := slices.Sorted(maps.Keys(kept)); !slices.Equal(got, want) {
		t.Fatalf("after unscheduling half, a claim took %d members, want the %d kept, once each", len(got), len(want))
	}
}

func hasDuplicate(ms []string) bool {
	seen := map[string]bool{}
	for _, m := range ms {
		if seen[m] {
			return true
		}
		seen[m] = true
	}
	return false
}

// Score and Members read each member at its latest due time.
func testShardedRead(t *testing.T, store kv.Store) {
	_, sharder := store.(kv.Sharder)
	if _, reader := store.(kv.IndexReader); !sharder && !reader {
		return // a store that cannot read its indexes: nothing to check
	}
	want := map[string]int64{}
	for i := range shardedMembers {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		mustScheduleSharded(t, store, shardedName(i), at)
		want[shardedName(i)] = at.UnixMilli()
	}
	mustScheduleSharded(t, store, shardedName(0), t0.Add(time.Hour)) // written again at the last level
	want[shardedName(0)] = t0.Add(time.Hour).UnixMilli()
	for _, i := range []int{0, 1, shardedMembers - 1} {
		ms, ok, err := kv.ScoreSharded(ctx, store, "due", shardedName(i))
		if err != nil || !ok || ms != want[shardedName(i)] {
			t.Errorf("ScoreSharded(%s) = %d, %v, %v; want %d", shardedName(i), ms, ok, err, want[shardedName(i)])
		}
	}
	if _, ok, err := kv.ScoreSharded(ctx, store, "due", "absent"); ok || err != nil {
		t.Errorf("ScoreSharded(absent) = %v, %v; want not there", ok, err)
	}
	got, err := kv.MembersSharded(ctx, store, "due")
	if err != nil || !maps.Equal(got, want) {
		t.Errorf("MembersSharded = %d members, %v; want the %d scheduled at their latest times", len(got), err, len(want))
	}
}

func testShardedEmpty(t *testing.T, store kv.Store) {
	if got, err := kv.ClaimSharded(ctx, store, "due", t0, time.Minute, 10); err != nil || len(got) != 0 {
		t.Fatalf("ClaimSharded on an index never written = %q, %v", got, err)
	}
	mustScheduleSharded(t, store, "x", t0)
	if err := kv.UnscheduleSharded(ctx, store, "due", "x"); err != nil {
		t.Fatal(err)
	}
	if got, err := kv.ClaimSharded(ctx, store, "due", t0, time.Minute, 10); err != nil || len(got) != 0 {
		t.Fatalf("ClaimSharded on an emptied index = %q, %v", got, err)
	}
}
