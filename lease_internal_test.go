package oauthflow

import (
	"context"
	"testing"
	"time"
)

// A holder whose lease ran out and was taken by another owner neither frees
// nor confirms the other owner's lock.
func TestLeaseIsOnlyItsOwners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	kv := NewMemoryKV()
	l, ok, err := tryLease(ctx, kv, "oauth:lock:x", time.Minute)
	if err != nil || !ok {
		t.Fatalf("tryLease = %v, %v", ok, err)
	}
	if held, err := l.confirm(ctx); err != nil || !held {
		t.Fatalf("confirm while held = %v, %v", held, err)
	}
	if err := kv.Set(ctx, "oauth:lock:x", []byte("other-owner"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if held, err := l.confirm(ctx); err != nil || held {
		t.Fatalf("confirm after another owner took the lock = %v, %v; want false", held, err)
	}
	l.release(ctx)
	v, err := kv.Get(ctx, "oauth:lock:x")
	if err != nil || string(v) != "other-owner" {
		t.Fatalf("after release the lock holds %q, %v; want the other owner's", v, err)
	}
}

// A lease shorter than the ticker's resolution renews without panicking.
func TestLeaseTinyTTL(t *testing.T) {
	t.Parallel()
	l, ok, err := tryLease(context.Background(), NewMemoryKV(), "oauth:lock:y", time.Nanosecond)
	if err != nil || !ok {
		t.Fatalf("tryLease = %v, %v", ok, err)
	}
	time.Sleep(3 * time.Millisecond) // let the renewal tick at least once
	l.release(context.Background())
}
