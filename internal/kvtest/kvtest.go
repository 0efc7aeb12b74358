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
	// Advance moves the store's clock forward. Nil means real time (time.Sleep).
	Advance func(d time.Duration)
}

func (h Harness) advance(d time.Duration) {
	if h.Advance != nil {
		h.Advance(d)
		return
	}
	time.Sleep(d)
}

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
		{"NegativeTTL", testNegativeTTL},
		{"ConcurrentGetDelOneWinner", testConcurrentGetDel},
		{"ConcurrentSetNXOneWinner", testConcurrentSetNX},
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

func testTTL(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "forever", "x", 0)
	if d, err := kv.TTL(ctx, "forever"); err != nil || d != 0 {
		t.Fatalf("TTL(no expiry) = %v, %v; want 0, nil", d, err)
	}
	mustSet(t, kv, "hour", "x", time.Hour)
	d, err := kv.TTL(ctx, "hour")
	if err != nil || d <= 59*time.Minute || d > time.Hour {
		t.Fatalf("TTL(1h key) = %v, %v; want within (59m, 1h]", d, err)
	}
	mustSet(t, kv, "hour", "y", 0) // a plain Set replaces the ttl
	if d, err := kv.TTL(ctx, "hour"); err != nil || d != 0 {
		t.Fatalf("TTL after Set without ttl = %v, %v; want 0", d, err)
	}
}

func testExpiry(t *testing.T, h Harness) {
	kv := h.New(t)
	mustSet(t, kv, "short", "x", 100*time.Millisecond)
	mustSet(t, kv, "long", "y", time.Hour)
	wantValue(t, kv, "short", "x")
	h.advance(300 * time.Millisecond)
	wantAbsent(t, kv, "short")
	wantValue(t, kv, "long", "y")
	if _, err := kv.GetDel(ctx, "short"); !errors.Is(err, oauthflow.ErrNotFound) {
		t.Fatalf("GetDel(expired) err = %v, want ErrNotFound", err)
	}
	ok, err := kv.SetNX(ctx, "short", []byte("z"), time.Hour)
	if err != nil || !ok {
		t.Fatalf("SetNX over an expired key = %v, %v; want true", ok, err)
	}
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
	if d, _ := kv.TTL(ctx, "lock"); d > time.Minute {
		t.Fatalf("a wrong owner changed the ttl to %v", d)
	}
	if ok, err := kv.CompareAndExpire(ctx, "lock", []byte("owner-a"), time.Hour); err != nil || !ok {
		t.Fatalf("CompareAndExpire(owner) = %v, %v; want true", ok, err)
	}
	if d, err := kv.TTL(ctx, "lock"); err != nil || d <= 59*time.Minute {
		t.Fatalf("TTL after renewal = %v, %v; want about 1h", d, err)
	}
	if ok, err := kv.CompareAndExpire(ctx, "absent", []byte("x"), time.Hour); err != nil || ok {
		t.Fatalf("CompareAndExpire(absent) = %v, %v; want false", ok, err)
	}
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
