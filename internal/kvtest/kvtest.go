// Package kvtest is the conformance suite every oauthflow.KV backend passes,
// in the manner of testing/slogtest: a backend's own test calls Run with a
// function that makes a fresh, empty store.
package kvtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
)

// Harness describes the backend under test.
type Harness struct {
	// New returns a fresh store with no keys in it.
	New func(t *testing.T) oauthflow.KV
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, h) })
	}
}

var ctx = context.Background()

func mustSet(t *testing.T, kv oauthflow.KV, key, value string, ttl time.Duration) {
	t.Helper()
	if err := kv.Set(ctx, key, []byte(value), ttl); err != nil {
		t.Fatalf("Set(%q): %v", key, err)
	}
}

func wantValue(t *testing.T, kv oauthflow.KV, key, want string) {
	t.Helper()
	got, err := kv.Get(ctx, key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantAbsent(t *testing.T, kv oauthflow.KV, key string) {
	t.Helper()
	if v, err := kv.Get(ctx, key); !errors.Is(err, oauthflow.ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, v, err)
	}
}

func testGetAbsent(t *testing.T, h Harness) {
	kv := h.New(t)
	wantAbsent(t, kv, "nope")
	if _, err := kv.TTL(ctx, "nope"); !errors.Is(err, oauthflow.ErrNotFound) {
		t.Fatalf("TTL(absent) err = %v, want ErrNotFound", err)
	}
}

func testSetGet(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "a", "1", 0)
	wantValue(t, kv, "a", "1")
	mustSet(t, kv, "a", "2", time.Minute)
	wantValue(t, kv, "a", "2")
}

func testValuesAreCopied(t *testing.T, h Harness) {
	kv := h.New(t)
	v := []byte("original")
	if err := kv.Set(ctx, "k", v, 0); err != nil {
		t.Fatal(err)
	}
	copy(v, "XXXXXXXX")
	wantValue(t, kv, "k", "original")
}

func testBinaryAndEmpty(t *testing.T, h Harness) {
	kv := h.New(t)
	bin := string([]byte{0, 0xff, 0xfe, '\n', '"', 0x80})
	mustSet(t, kv, "bin", bin, 0)
	wantValue(t, kv, "bin", bin)
	mustSet(t, kv, "empty", "", 0)
	wantValue(t, kv, "empty", "")
}

// wantTTL checks key's ttl as read back after it was set to set: exactly set on a
// frozen clock, within (0, set] on real time.
func wantTTL(t *testing.T, h Harness, kv oauthflow.KV, key string, set time.Duration) {
	t.Helper()
	d, err := kv.TTL(ctx, key)
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
func wantGone(t *testing.T, h Harness, kv oauthflow.KV, key string) {
	t.Helper()
	if h.frozen() {
		wantAbsent(t, kv, key)
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := kv.Get(ctx, key)
		if errors.Is(err, oauthflow.ErrNotFound) {
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
	kv := h.New(t)
	mustSet(t, kv, "forever", "x", 0)
	if d, err := kv.TTL(ctx, "forever"); err != nil || d != 0 {
		t.Fatalf("TTL(no expiry) = %v, %v; want 0, nil", d, err)
	}
	mustSet(t, kv, "hour", "x", time.Hour)
	wantTTL(t, h, kv, "hour", time.Hour)
	mustSet(t, kv, "hour", "y", 0) // a plain Set replaces the ttl
	if d, err := kv.TTL(ctx, "hour"); err != nil || d != 0 {
		t.Fatalf("TTL after Set without ttl = %v, %v; want 0", d, err)
	}
}

// testExpiry never races the clock: on a frozen clock it moves time itself; on
// real time it asserts nothing about a short-lived key but that it goes.
func testExpiry(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "long", "y", time.Hour)
	if h.frozen() {
		mustSet(t, kv, "short", "x", time.Second)
		wantTTL(t, h, kv, "short", time.Second)
		h.Advance(time.Second / 2)
		wantValue(t, kv, "short", "x")
		h.Advance(time.Second)
	} else {
		mustSet(t, kv, "short", "x", 10*time.Millisecond)
	}
	wantGone(t, h, kv, "short")
	wantValue(t, kv, "long", "y")
	if _, err := kv.TTL(ctx, "short"); !errors.Is(err, oauthflow.ErrNotFound) {
		t.Fatalf("TTL(expired) err = %v, want ErrNotFound", err)
	}
	if _, err := kv.GetDel(ctx, "short"); !errors.Is(err, oauthflow.ErrNotFound) {
		t.Fatalf("GetDel(expired) err = %v, want ErrNotFound", err)
	}
	ok, err := kv.SetNX(ctx, "short", []byte("z"), time.Hour)
	if err != nil || !ok {
		t.Fatalf("SetNX over an expired key = %v, %v; want true", ok, err)
	}
	wantValue(t, kv, "short", "z")
}

func testSetNX(t *testing.T, h Harness) {
	kv := h.New(t)
	ok, err := kv.SetNX(ctx, "k", []byte("first"), time.Minute)
	if err != nil || !ok {
		t.Fatalf("first SetNX = %v, %v; want true", ok, err)
	}
	ok, err = kv.SetNX(ctx, "k", []byte("second"), time.Minute)
	if err != nil || ok {
		t.Fatalf("second SetNX = %v, %v; want false", ok, err)
	}
	wantValue(t, kv, "k", "first")
	ok, err = kv.SetNX(ctx, "forever", []byte("v"), 0)
	if err != nil || !ok {
		t.Fatalf("SetNX without ttl = %v, %v", ok, err)
	}
	if d, err := kv.TTL(ctx, "forever"); err != nil || d != 0 {
		t.Fatalf("TTL after SetNX without ttl = %v, %v; want 0", d, err)
	}
}

func testGetDel(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "k", "v", time.Minute)
	got, err := kv.GetDel(ctx, "k")
	if err != nil || string(got) != "v" {
		t.Fatalf("GetDel = %q, %v; want v", got, err)
	}
	wantAbsent(t, kv, "k")
	if _, err := kv.GetDel(ctx, "k"); !errors.Is(err, oauthflow.ErrNotFound) {
		t.Fatalf("second GetDel err = %v, want ErrNotFound", err)
	}
}

func testDel(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "k", "v", 0)
	if err := kv.Del(ctx, "k"); err != nil {
		t.Fatal(err)
	}
	wantAbsent(t, kv, "k")
	if err := kv.Del(ctx, "k"); err != nil {
		t.Fatalf("Del(absent) = %v, want nil", err)
	}
}

func testCompareAndDelete(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "lock", "owner-a", time.Minute)
	if ok, err := kv.CompareAndDelete(ctx, "lock", []byte("owner-b")); err != nil || ok {
		t.Fatalf("CompareAndDelete(wrong owner) = %v, %v; want false", ok, err)
	}
	wantValue(t, kv, "lock", "owner-a")
	if ok, err := kv.CompareAndDelete(ctx, "lock", []byte("owner-a")); err != nil || !ok {
		t.Fatalf("CompareAndDelete(owner) = %v, %v; want true", ok, err)
	}
	wantAbsent(t, kv, "lock")
	if ok, err := kv.CompareAndDelete(ctx, "lock", []byte("owner-a")); err != nil || ok {
		t.Fatalf("CompareAndDelete(absent) = %v, %v; want false", ok, err)
	}
}

func testCompareAndExpire(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "lock", "owner-a", time.Minute)
	if ok, err := kv.CompareAndExpire(ctx, "lock", []byte("owner-b"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndExpire(wrong owner) = %v, %v; want false", ok, err)
	}
	wantTTL(t, h, kv, "lock", time.Minute) // a wrong owner left it alone
	if ok, err := kv.CompareAndExpire(ctx, "lock", []byte("owner-a"), time.Hour); err != nil || !ok {
		t.Fatalf("CompareAndExpire(owner) = %v, %v; want true", ok, err)
	}
	wantTTL(t, h, kv, "lock", time.Hour)
	if d, _ := kv.TTL(ctx, "lock"); d <= time.Minute {
		t.Fatalf("TTL after renewal to 1h = %v, not above the minute it had", d)
	}
	if ok, err := kv.CompareAndExpire(ctx, "absent", []byte("x"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndExpire(absent) = %v, %v; want false", ok, err)
	}
}

func testCompareAndSwap(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "rec", "v1", time.Minute)
	if ok, err := kv.CompareAndSwap(ctx, "rec", []byte("v0"), []byte("v2"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndSwap(stale old) = %v, %v; want false", ok, err)
	}
	wantValue(t, kv, "rec", "v1")
	wantTTL(t, h, kv, "rec", time.Minute) // a stale writer changed nothing
	if ok, err := kv.CompareAndSwap(ctx, "rec", []byte("v1"), []byte("v2"), time.Hour); err != nil || !ok {
		t.Fatalf("CompareAndSwap(current old) = %v, %v; want true", ok, err)
	}
	wantValue(t, kv, "rec", "v2")
	wantTTL(t, h, kv, "rec", time.Hour)
	if ok, err := kv.CompareAndSwap(ctx, "rec", []byte("v2"), []byte("v3"), 0); err != nil || !ok {
		t.Fatalf("CompareAndSwap without ttl = %v, %v; want true", ok, err)
	}
	if d, err := kv.TTL(ctx, "rec"); err != nil || d != 0 {
		t.Fatalf("TTL after CompareAndSwap without ttl = %v, %v; want 0", d, err)
	}
	if ok, err := kv.CompareAndSwap(ctx, "absent", []byte(""), []byte("x"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndSwap(absent) = %v, %v; want false", ok, err)
	}
	wantAbsent(t, kv, "absent")
	if _, err := kv.CompareAndSwap(ctx, "rec", []byte("v3"), []byte("v4"), -time.Second); err == nil {
		t.Fatal("CompareAndSwap with a negative ttl succeeded")
	}
	wantValue(t, kv, "rec", "v3")
}

func testNegativeTTL(t *testing.T, h Harness) {
	kv := h.New(t)
	if err := kv.Set(ctx, "k", []byte("v"), -time.Second); err == nil {
		t.Fatal("Set with a negative ttl succeeded")
	}
	if _, err := kv.SetNX(ctx, "k", []byte("v"), -time.Second); err == nil {
		t.Fatal("SetNX with a negative ttl succeeded")
	}
	wantAbsent(t, kv, "k")
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
	kv := h.New(t)
	mustSet(t, kv, "once", "prize", time.Minute)
	wins := race(t, 1000, func(int) (bool, error) {
		v, err := kv.GetDel(ctx, "once")
		if errors.Is(err, oauthflow.ErrNotFound) {
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
	kv := h.New(t)
	wins := race(t, 1000, func(i int) (bool, error) {
		return kv.SetNX(ctx, "lock", []byte(fmt.Sprint(i)), time.Minute)
	})
	if wins != 1 {
		t.Fatalf("%d goroutines won SetNX, want exactly 1", wins)
	}
}

func testConcurrentCompareAndSwap(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "rec", "v0", time.Minute)
	wins := race(t, 1000, func(i int) (bool, error) {
		return kv.CompareAndSwap(ctx, "rec", []byte("v0"), []byte(fmt.Sprint(i)), time.Minute)
	})
	if wins != 1 {
		t.Fatalf("%d goroutines swapped the record read as v0, want exactly 1", wins)
	}
}
