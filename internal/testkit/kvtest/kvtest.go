// Package kvtest is the conformance suite every kv.Store backend passes,
// in the manner of testing/slogtest: a backend's own test calls Run with a
// function that makes a fresh, empty store.
package kvtest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
)

// Harness describes the backend under test.
type Harness struct {
	// New returns a fresh store with no keys in it.
	New func(t *testing.T) kv.Store
	// Advance moves the store's clock forward. A store given one runs on a clock
	// that stands still between Advances (a fake clock, miniredis), so the suite
	// reads TTLs back exactly and checks expiry to the boundary. Nil means the
	// store runs on real time, which moves on its own and, under load, in jumps:
	// the suite then reads TTLs back loosely (within (0, ttl]) and only checks that
	// a short-lived key is gone within a bounded wait, never that it is still there.
	Advance func(d time.Duration)
}

// frozen reports whether the store's clock moves only when the suite advances it.
func (h Harness) frozen() bool { return h.Advance != nil }

// Run runs the whole suite against the backend.
func Run(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, h Harness)
	}{
		{"GetAbsent", testGetAbsent},
		{"SetGet", testSetGet},
		{"ValuesAreCopied", testValuesAreCopied},
		{"BinaryAndEmptyValues", testBinaryAndEmpty},
		{"TTL", testTTL},
		{"Expiry", testExpiry},
		{"SetNX", testSetNX},
		{"GetDel", testGetDel},
		{"Del", testDel},
		{"CompareAndDelete", testCompareAndDelete},
		{"CompareAndExpire", testCompareAndExpire},
		{"CompareAndSwap", testCompareAndSwap},
		{"NegativeTTL", testNegativeTTL},
		{"ConcurrentGetDelOneWinner", testConcurrentGetDel},
		{"ConcurrentSetNXOneWinner", testConcurrentSetNX},
		{"ConcurrentCompareAndSwapOneWinner", testConcurrentCompareAndSwap},
		{"DueIndex", testDueIndex},
		{"ShardedIndex", testShardedIndex},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, h) })
	}
}

var ctx = context.Background()

func mustSet(t *testing.T, store kv.Store, key, value string, ttl time.Duration) {
	t.Helper()
	if err := store.Set(ctx, key, []byte(value), ttl); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}

func wantValue(t *testing.T, store kv.Store, key, want string) {
	t.Helper()
	got, err := store.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantAbsent(t *testing.T, store kv.Store, key string) {
	t.Helper()
	if v, err := store.Get(ctx, key); !errors.Is(err, errs.NotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, v, err)
	}
}

func testGetAbsent(t *testing.T, h Harness) {
	store := h.New(t)
	wantAbsent(t, store, "nope")
	if _, err := store.TTL(ctx, "nope"); !errors.Is(err, errs.NotFound) {
		t.Fatalf("TTL(absent) err = %v, want ErrNotFound", err)
	}
}

func testSetGet(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "a", "1", 0)
	wantValue(t, store, "a", "1")
	mustSet(t, store, "a", "2", time.Minute)
	wantValue(t, store, "a", "2")
}

func testValuesAreCopied(t *testing.T, h Harness) {
	store := h.New(t)
	v := []byte("original")
	if err := store.Set(ctx, "k", v, 0); err != nil {
		t.Fatal(err)
	}
	copy(v, "XXXXXXXX")
	wantValue(t, store, "k", "original")
}

func testBinaryAndEmpty(t *testing.T, h Harness) {
	store := h.New(t)
	bin := string([]byte{0, 0xff, 0xfe, '\n', '"', 0x80})
	mustSet(t, store, "bin", bin, 0)
	wantValue(t, store, "bin", bin)
	mustSet(t, store, "empty", "", 0)
	wantValue(t, store, "empty", "")
}

// wantTTL checks key's ttl as read back after it was set to set: exactly set on a
// frozen clock, within (0, set] on real time.
func wantTTL(t *testing.T, h Harness, store kv.Store, key string, set time.Duration) {
	t.Helper()
	d, err := store.TTL(ctx, key)
	switch {
	case err != nil:
		t.Fatalf("TTL(%q) = %v, %v; want %v", key, d, err, set)
	case h.frozen() && d != set:
		t.Fatalf("TTL(%q) = %v on a clock that stood still, want %v", key, d, set)
	case d <= 0 || d > set:
		t.Fatalf("TTL(%q) = %v, want within (0, %v]", key, d, set)
	}
}

// wantGone waits until key has expired: at once on a frozen clock (the caller
// advanced past its ttl), within a bounded poll on real time.
func wantGone(t *testing.T, h Harness, store kv.Store, key string) {
	t.Helper()
	if h.frozen() {
		wantAbsent(t, store, key)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := store.Get(ctx, key)
		if errors.Is(err, errs.NotFound) {
			return
		}
		if err != nil {
			t.Fatalf("Get(%q): %v", key, err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q is still there 10 s after its ttl should have ended", key)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testTTL(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "forever", "x", 0)
	if d, err := store.TTL(ctx, "forever"); err != nil || d != 0 {
		t.Fatalf("TTL(no expiry) = %v, %v; want 0, nil", d, err)
	}
	mustSet(t, store, "hour", "x", time.Hour)
	wantTTL(t, h, store, "hour", time.Hour)
	mustSet(t, store, "hour", "y", 0) // a plain Set replaces the ttl
	if d, err := store.TTL(ctx, "hour"); err != nil || d != 0 {
		t.Fatalf("TTL after Set without ttl = %v, %v; want 0", d, err)
	}
}

// testExpiry never races the clock: on a frozen clock it moves time itself; on
// real time it asserts nothing about a short-lived key but that it goes.
func testExpiry(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "long", "y", time.Hour)
	if h.frozen() {
		mustSet(t, store, "short", "x", time.Second)
		wantTTL(t, h, store, "short", time.Second)
		h.Advance(time.Second / 2)
		wantValue(t, store, "short", "x")
		h.Advance(time.Second)
	} else {
		mustSet(t, store, "short", "x", 10*time.Millisecond)
	}
	wantGone(t, h, store, "short")
	wantValue(t, store, "long", "y")
	if _, err := store.TTL(ctx, "short"); !errors.Is(err, errs.NotFound) {
		t.Fatalf("TTL(expired) err = %v, want ErrNotFound", err)
	}
	if _, err := store.GetDel(ctx, "short"); !errors.Is(err, errs.NotFound) {
		t.Fatalf("GetDel(expired) err = %v, want ErrNotFound", err)
	}
	ok, err := store.SetNX(ctx, "short", []byte("z"), time.Hour)
	if err != nil || !ok {
		t.Fatalf("SetNX over an expired key = %v, %v; want true", ok, err)
	}
	wantValue(t, store, "short", "z")
}

func testSetNX(t *testing.T, h Harness) {
	store := h.New(t)
	ok, err := store.SetNX(ctx, "k", []byte("first"), time.Minute)
	if err != nil || !ok {
		t.Fatalf("first SetNX = %v, %v; want true", ok, err)
	}
	ok, err = store.SetNX(ctx, "k", []byte("second"), time.Minute)
	if err != nil || ok {
		t.Fatalf("second SetNX = %v, %v; want false", ok, err)
	}
	wantValue(t, store, "k", "first")
	ok, err = store.SetNX(ctx, "forever", []byte("v"), 0)
	if err != nil || !ok {
		t.Fatalf("SetNX without ttl = %v, %v", ok, err)
	}
	if d, err := store.TTL(ctx, "forever"); err != nil || d != 0 {
		t.Fatalf("TTL after SetNX without ttl = %v, %v; want 0", d, err)
	}
}

func testGetDel(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "k", "v", time.Minute)
	got, err := store.GetDel(ctx, "k")
	if err != nil || string(got) != "v" {
		t.Fatalf("GetDel = %q, %v; want v", got, err)
	}
	wantAbsent(t, store, "k")
	if _, err := store.GetDel(ctx, "k"); !errors.Is(err, errs.NotFound) {
		t.Fatalf("second GetDel err = %v, want ErrNotFound", err)
	}
}

func testDel(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "k", "v", 0)
	if err := store.Del(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	wantAbsent(t, store, "k")
	if err := store.Del(ctx, "k"); err != nil {
		t.Fatalf("Del(absent) = %v, want nil", err)
	}
}

func testCompareAndDelete(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "lock", "owner-a", time.Minute)
	if ok, err := store.CompareAndDelete(ctx, "lock", []byte("owner-b")); err != nil || ok {
		t.Fatalf("CompareAndDelete(wrong owner) = %v, %v; want false", ok, err)
	}
	wantValue(t, store, "lock", "owner-a")
	if ok, err := store.CompareAndDelete(ctx, "lock", []byte("owner-a")); err != nil || !ok {
		t.Fatalf("CompareAndDelete(owner) = %v, %v; want true", ok, err)
	}
	wantAbsent(t, store, "lock")
	if ok, err := store.CompareAndDelete(ctx, "lock", []byte("owner-a")); err != nil || ok {
		t.Fatalf("CompareAndDelete(absent) = %v, %v; want false", ok, err)
	}
}

func testCompareAndExpire(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "lock", "owner-a", time.Minute)
	if ok, err := store.CompareAndExpire(ctx, "lock", []byte("owner-b"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndExpire(wrong owner) = %v, %v; want false", ok, err)
	}
	wantTTL(t, h, store, "lock", time.Minute) // a wrong owner left it alone
	if ok, err := store.CompareAndExpire(ctx, "lock", []byte("owner-a"), time.Hour); err != nil || !ok {
		t.Fatalf("CompareAndExpire(owner) = %v, %v; want true", ok, err)
	}
	wantTTL(t, h, store, "lock", time.Hour)
	if d, _ := store.TTL(ctx, "lock"); d <= time.Minute {
		t.Fatalf("TTL after renewal to 1h = %v, not above the minute it had", d)
	}
	if ok, err := store.CompareAndExpire(ctx, "absent", []byte("x"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndExpire(absent) = %v, %v; want false", ok, err)
	}
}

func testCompareAndSwap(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "rec", "v1", time.Minute)
	if ok, err := store.CompareAndSwap(ctx, "rec", []byte("v0"), []byte("v2"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndSwap(stale old) = %v, %v; want false", ok, err)
	}
	wantValue(t, store, "rec", "v1")
	wantTTL(t, h, store, "rec", time.Minute) // a stale writer changed nothing
	if ok, err := store.CompareAndSwap(ctx, "rec", []byte("v1"), []byte("v2"), time.Hour); err != nil || !ok {
		t.Fatalf("CompareAndSwap(current old) = %v, %v; want true", ok, err)
	}
	wantValue(t, store, "rec", "v2")
	wantTTL(t, h, store, "rec", time.Hour)
	if ok, err := store.CompareAndSwap(ctx, "rec", []byte("v2"), []byte("v3"), 0); err != nil || !ok {
		t.Fatalf("CompareAndSwap without ttl = %v, %v; want true", ok, err)
	}
	if d, err := store.TTL(ctx, "rec"); err != nil || d != 0 {
		t.Fatalf("TTL after CompareAndSwap without ttl = %v, %v; want 0", d, err)
	}
	if ok, err := store.CompareAndSwap(ctx, "absent", []byte(""), []byte("x"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndSwap(absent) = %v, %v; want false", ok, err)
	}
	wantAbsent(t, store, "absent")
	if _, err := store.CompareAndSwap(ctx, "rec", []byte("v3"), []byte("v4"), -time.Second); err == nil {
		t.Fatal("CompareAndSwap with a negative ttl succeeded")
	}
	wantValue(t, store, "rec", "v3")
}

func testNegativeTTL(t *testing.T, h Harness) {
	store := h.New(t)
	if err := store.Set(ctx, "k", []byte("v"), -time.Second); err == nil {
		t.Fatal("Set with a negative ttl succeeded")
	}
	if _, err := store.SetNX(ctx, "k", []byte("v"), -time.Second); err == nil {
		t.Fatal("SetNX with a negative ttl succeeded")
	}
	wantAbsent(t, store, "k")
}

// race runs fn from n goroutines released at once and counts the true answers.
func race(t *testing.T, n int, fn func(i int) (bool, error)) int {
	t.Helper()
	var wins atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			ok, err := fn(i)
			if err != nil {
				errs <- err
				return
			}
			if ok {
				wins.Add(1)
			}
		}()
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent call failed: %v", err)
	}
	return int(wins.Load())
}

func testConcurrentGetDel(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "once", "prize", time.Minute)
	wins := race(t, 1000, func(int) (bool, error) {
		v, err := store.GetDel(ctx, "once")
		if errors.Is(err, errs.NotFound) {
			return false, nil
		}
		if err == nil && string(v) != "prize" {
			return false, fmt.Errorf("GetDel returned %q", v)
		}
		return err == nil, err
	})
	if wins != 1 {
		t.Fatalf("%d goroutines took the key, want exactly 1", wins)
	}
}

func testConcurrentSetNX(t *testing.T, h Harness) {
	store := h.New(t)
	wins := race(t, 1000, func(i int) (bool, error) {
		return store.SetNX(ctx, "lock", []byte(fmt.Sprint(i)), time.Minute)
	})
	if wins != 1 {
		t.Fatalf("%d goroutines won SetNX, want exactly 1", wins)
	}
}

func testConcurrentCompareAndSwap(t *testing.T, h Harness) {
	store := h.New(t)
	mustSet(t, store, "rec", "v0", time.Minute)
	wins := race(t, 1000, func(i int) (bool, error) {
		return store.CompareAndSwap(ctx, "rec", []byte("v0"), []byte(fmt.Sprint(i)), time.Minute)
	})
	if wins != 1 {
		t.Fatalf("%d goroutines swapped the record read as v0, want exactly 1", wins)
	}
}

// testDueIndex covers Schedule, Unschedule and Claim. Claim takes now as an
// argument, so the suite moves time by passing a later now: no clock, no sleep.
func testDueIndex(t *testing.T, h Harness) {
	tests := []struct {
		name string
		fn   func(t *testing.T, store kv.Store)
	}{
		{"ClaimsInDueOrder", testClaimOrder},
		{"NotYetDueIsNotClaimed", testClaimNotYetDue},
		{"LeaseHoldsOffTheNextClaim", testClaimLease},
		{"Unschedule", testUnschedule},
		{"RescheduleMovesDueTime", testReschedule},
		{"ClaimCountLimit", testClaimLimit},
		{"ClaimEmptyIndex", testClaimEmpty},
		{"ClaimInvalidArguments", testClaimInvalid},
		{"ConcurrentClaimEachOnce", testConcurrentClaim},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, h.New(t)) })
	}
}

// t0 is the suite's "now" for due-time indexes, far from any real clock.
var t0 = time.Unix(1_700_000_000, 0)

func mustSchedule(t *testing.T, store kv.Store, index, member string, due time.Time) {
	t.Helper()
	if err := store.Schedule(ctx, index, member, due); err != nil {
		t.Fatalf("Schedule(%q, %q): %v", index, member, err)
	}
}

// wantClaim claims at now and checks it took exactly want, in that order.
func wantClaim(t *testing.T, store kv.Store, index string, now time.Time, lease time.Duration, n int, want ...string) {
	t.Helper()
	got, err := store.Claim(ctx, index, now, lease, n)
	if err != nil {
		t.Fatalf("Claim(%q, t0%+dms, n=%d): %v", index, now.Sub(t0).Milliseconds(), n, err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("Claim(%q, t0%+dms, n=%d) = %q, want %q", index, now.Sub(t0).Milliseconds(), n, got, want)
	}
}

func testClaimOrder(t *testing.T, store kv.Store) {
	// Neither the order of scheduling nor of names is the due order; a tie in
	// due time goes by member, and a member due exactly at now is due.
	mustSchedule(t, store, "jobs", "mid", t0.Add(-time.Second))
	mustSchedule(t, store, "jobs", "zeta", t0.Add(-3*time.Second))
	mustSchedule(t, store, "jobs", "atnow", t0)
	mustSchedule(t, store, "jobs", "alpha", t0.Add(-2*time.Second))
	mustSchedule(t, store, "jobs", "beta", t0.Add(-time.Second))
	wantClaim(t, store, "jobs", t0, time.Minute, 10, "zeta", "alpha", "beta", "mid", "atnow")
}

func testClaimNotYetDue(t *testing.T, store kv.Store) {
	mustSchedule(t, store, "jobs", "now", t0)
	mustSchedule(t, store, "jobs", "later", t0.Add(time.Second))
	wantClaim(t, store, "jobs", t0, time.Hour, 10, "now")
	wantClaim(t, store, "jobs", t0.Add(time.Second-time.Millisecond), time.Hour, 10)
	wantClaim(t, store, "jobs", t0.Add(time.Second), time.Hour, 10, "later")
}

func testClaimLease(t *testing.T, store kv.Store) {
	const lease = 10 * time.Second
	mustSchedule(t, store, "jobs", "job", t0)
	mustSchedule(t, store, "jobs", "overdue", t0.Add(-time.Hour)) // the lease runs from now, not from due
	wantClaim(t, store, "jobs", t0, lease, 10, "overdue", "job")
	wantClaim(t, store, "jobs", t0, lease, 10)
	wantClaim(t, store, "jobs", t0.Add(lease-time.Millisecond), lease, 10)
	wantClaim(t, store, "jobs", t0.Add(lease), lease, 10, "job", "overdue")  // lapsed: both due at t0+lease
	wantClaim(t, store, "jobs", t0.Add(2*lease-time.Millisecond), lease, 10) // the second claim's lease
	wantClaim(t, store, "jobs", t0.Add(2*lease), lease, 10, "job", "overdue")
}

func testUnschedule(t *testing.T, store kv.Store) {
	mustSchedule(t, store, "jobs", "a", t0)
	mustSchedule(t, store, "jobs", "b", t0)
	mustSchedule(t, store, "jobs", "c", t0)
	if err := store.Unschedule(ctx, "jobs", "a"); err != nil {
		t.Fatal(err)
	}
	wantClaim(t, store, "jobs", t0, time.Minute, 10, "b", "c")
	if err := store.Unschedule(ctx, "jobs", "b"); err != nil { // a claimed member
		t.Fatal(err)
	}
	wantClaim(t, store, "jobs", t0.Add(time.Hour), time.Minute, 10, "c")
	for _, absent := range [][2]string{{"jobs", "a"}, {"nowhere", "x"}} {
		if err := store.Unschedule(ctx, absent[0], absent[1]); err != nil {
			t.Fatalf("Unschedule(%q, %q) of an absent member = %v, want nil", absent[0], absent[1], err)
		}
	}
}

func testReschedule(t *testing.T, store kv.Store) {
	mustSchedule(t, store, "jobs", "later", t0)
	mustSchedule(t, store, "jobs", "later", t0.Add(time.Hour))
	mustSchedule(t, store, "jobs", "sooner", t0.Add(time.Hour))
	mustSchedule(t, store, "jobs", "sooner", t0.Add(-time.Second))
	wantClaim(t, store, "jobs", t0, time.Minute, 10, "sooner")
	wantClaim(t, store, "jobs", t0.Add(time.Hour), time.Hour, 10, "sooner", "later") // t0+1m, then t0+1h
	mustSchedule(t, store, "jobs", "later", t0)                                      // a claimed member moved back: due again
	wantClaim(t, store, "jobs", t0.Add(time.Hour), time.Hour, 10, "later")
}

func testClaimLimit(t *testing.T, store kv.Store) {
	for i := range 5 {
		mustSchedule(t, store, "jobs", fmt.Sprint("m", i), t0.Add(time.Duration(i-5)*time.Second))
	}
	wantClaim(t, store, "jobs", t0, time.Minute, 2, "m0", "m1")
	wantClaim(t, store, "jobs", t0, time.Minute, 2, "m2", "m3")
	wantClaim(t, store, "jobs", t0, time.Minute, 2, "m4")
	wantClaim(t, store, "jobs", t0, time.Minute, 2)
	wantClaim(t, store, "jobs", t0.Add(time.Minute), time.Minute, 1, "m0")
}

func testClaimEmpty(t *testing.T, store kv.Store) {
	wantClaim(t, store, "never-scheduled", t0, time.Minute, 10)
	mustSchedule(t, store, "emptied", "x", t0)
	if err := store.Unschedule(ctx, "emptied", "x"); err != nil {
		t.Fatal(err)
	}
	wantClaim(t, store, "emptied", t0, time.Minute, 10)
	mustSchedule(t, store, "emptied", "y", t0) // an emptied index takes members again
	wantClaim(t, store, "emptied", t0, time.Minute, 10, "y")
}

func testClaimInvalid(t *testing.T, store kv.Store) {
	mustSchedule(t, store, "jobs", "job", t0)
	for _, c := range []struct {
		lease time.Duration
		n     int
	}{{time.Minute, 0}, {time.Minute, -1}, {-time.Second, 1}} {
		if got, err := store.Claim(ctx, "jobs", t0, c.lease, c.n); !errors.Is(err, errs.InvalidArgument) {
			t.Fatalf("Claim(lease %v, n %d) = %q, %v; want ErrInvalidArgument", c.lease, c.n, got, err)
		}
	}
	wantClaim(t, store, "jobs", t0, time.Minute, 1, "job") // the refused calls took nothing
}

// testConcurrentClaim has 50 callers claim 5 each from 20 due members at once:
// every member must be taken exactly once between them.
func testConcurrentClaim(t *testing.T, store kv.Store) {
	const members = 20
	for i := range members {
		mustSchedule(t, store, "jobs", fmt.Sprint("m", i), t0.Add(-time.Duration(i)*time.Millisecond))
	}
	var mu sync.Mutex
	taken := make(map[string]int)
	race(t, 50, func(int) (bool, error) {
		got, err := store.Claim(ctx, "jobs", t0, time.Minute, 5)
		mu.Lock()
		defer mu.Unlock()
		for _, m := range got {
			taken[m]++
		}
		return len(got) > 0, err
	})
	for i := range members {
		if m := fmt.Sprint("m", i); taken[m] != 1 {
			t.Errorf("%s was claimed %d times, want exactly once", m, taken[m])
		}
	}
	if len(taken) != members {
		t.Errorf("callers claimed %d distinct members, want %d: %v", len(taken), members, taken)
	}
}
