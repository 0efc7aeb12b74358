package lease

import (
	"context"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
)

// A holder whose lease ran out and was taken by another owner neither frees
// nor confirms the other owner's lock.
func TestLeaseIsOnlyItsOwners(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := kv.NewMemory(nil)
	l, ok, err := Try(ctx, store, "oauth:lock:x", time.Minute)
	if err != nil || !ok {
		t.Fatalf("Try = %v, %v", ok, err)
	}
	if held, err := l.Confirm(ctx); err != nil || !held {
		t.Fatalf("confirm while held = %v, %v", held, err)
	}
	if err := store.Set(ctx, "oauth:lock:x", []byte("other-owner"), time.Minute); err != nil {
		t.Fatal(err)
	}
	if held, err := l.Confirm(ctx); err != nil || held {
		t.Fatalf("confirm after another owner took the lock = %v, %v; want false", held, err)
	}
	l.Release(ctx)
	v, err := store.Get(ctx, "oauth:lock:x")
	if err != nil || string(v) != "other-owner" {
		t.Fatalf("after release the lock holds %q, %v; want the other owner's", v, err)
	}
}

// A lease shorter than the ticker's resolution renews without panicking.
func TestLeaseTinyTTL(t *testing.T) {
	t.Parallel()
	l, ok, err := Try(context.Background(), kv.NewMemory(nil), "oauth:lock:y", time.Nanosecond)
	if err != nil || !ok {
		t.Fatalf("Try = %v, %v", ok, err)
	}
	time.Sleep(3 * time.Millisecond) // let the renewal tick at least once
	l.Release(context.Background())
}
