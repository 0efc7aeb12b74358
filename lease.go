package oauthflow

import (
	"context"
	"fmt"
	"time"
)

// lease is a lock in the KV held by one owner, renewed while held and freed by
// its TTL if the holder dies. Every command touches one key (Cluster-safe).
type lease struct {
	kv    KV
	key   string
	owner []byte
	stop  func()
}

// tryLease takes key if it is free.
func tryLease(ctx context.Context, kv KV, key string, ttl time.Duration) (*lease, bool, error) {
	owner := []byte(randomHex(16))
	ok, err := kv.SetNX(ctx, key, owner, ttl)
	if err != nil {
		return nil, false, storeErr("take lock", err)
	}
	if !ok {
		return nil, false, nil
	}
	l := &lease{kv: kv, key: key, owner: owner}
	l.stop = renewEvery(ctx, kv, key, owner, ttl)
	return l, true, nil
}

// waitLease takes key, waiting with a short backoff while someone else holds it.
func waitLease(ctx context.Context, kv KV, key string, ttl time.Duration) (*lease, error) {
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 25*time.Millisecond) {
		l, ok, err := tryLease(ctx, kv, key, ttl)
		if err != nil || ok {
			return l, err
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return nil, fmt.Errorf("oauthflow: waiting for lock %s: %w", key, err)
		}
	}
}

// release stops the renewal and frees the lock if it is still ours.
func (l *lease) release(ctx context.Context) {
	l.stop()
	_, _ = l.kv.CompareAndDelete(context.WithoutCancel(ctx), l.key, l.owner)
}

// renewEvery extends the lease every ttl/3 until the returned stop is called or ctx ends.
func renewEvery(ctx context.Context, kv KV, key string, owner []byte, ttl time.Duration) (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		tick := time.NewTicker(ttl / 3)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
				_, _ = kv.CompareAndExpire(ctx, key, owner, ttl)
			}
		}
	}()
	return func() { close(done); <-exited }
}
