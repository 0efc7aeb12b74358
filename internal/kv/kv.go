// Package kv is the store mechanism under oauthflow's KV: the Store
// interface, the memory, Redis and key-prefix backends, and what a backend
// may do besides Store (its capabilities, listed below), with the fallback
// the library takes where a store cannot.
//
// Store has the method set of oauthflow.KV, so any KV an app passes in is a
// Store; the library's MemoryKV and RedisKV hold a *Memory and a *Redis, and
// hand those to the mechanism so that it reaches their capabilities.
package kv

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// Store is the key-value store that tokens, sessions, runs and documents
// live in; its contract is oauthflow.KV's. Every method takes ctx first. A
// ttl of 0 means the key never expires. A value Get or GetDel returns is
// read-only. A key that is absent or expired reads as errs.NotFound.
//
// Schedule, Unschedule and Claim keep due-time indexes: sorted sets of
// members keyed by due time, stored to the millisecond, under a key of their
// own that never expires by itself.
type Store interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	GetDel(ctx context.Context, key string) ([]byte, error)
	Del(ctx context.Context, key string) error
	TTL(ctx context.Context, key string) (time.Duration, error)
	CompareAndDelete(ctx context.Context, key string, value []byte) (bool, error)
	CompareAndExpire(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	CompareAndSwap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error)
	Schedule(ctx context.Context, index, member string, due time.Time) error
	Unschedule(ctx context.Context, index, member string) error
	Claim(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error)
}

// The capabilities: what a Store may do besides its methods, each checked
// with a type assertion. Memory, Redis and Prefixed (over a store that has
// it) implement every one that fits them; an app's own KV need implement
// none, and the library then takes the fallback each one names.

// Batcher runs a batch of commands in one round trip (see RunBatch).
// RunInOrder reports false, having run nothing, when it cannot keep the
// order. Without it, or when it declines, the commands run one by one.
type Batcher interface {
	RunInOrder(ctx context.Context, ops []*Op) bool
}

// Pipeliner is a Batcher that tells whether RunInOrder sends every batch in
// one round trip, its commands run in the order sent on one connection (one
// Redis node; not a Cluster, where it declines). A write may then wait to go
// with a later batch at no cost of its own: a connection that fails part-way
// fails the commands after it, never one alone before them. Without it, a
// batch is taken to go one command at a time (see InOneTrip).
type Pipeliner interface {
	Batcher
	Pipelines() bool
}

// Scanner walks the keys under a prefix in batches, for maintenance work
// that must see every record (a re-encryption). Without it, that work
// reports ErrCannotScan.
type Scanner interface {
	// ScanPrefix returns about count keys that start with prefix, from cursor
	// on ("" to start), and the cursor to go on from ("" when every key was
	// seen). A key present for the whole walk is returned at least once.
	ScanPrefix(ctx context.Context, prefix, cursor string, count int) (keys []string, next string, err error)
}

// IndexReader lists an index's members with their due times (Unix
// milliseconds). Without it, a user's connections are listed through the
// registry, and refresh permits are put in once per process.
type IndexReader interface {
	Members(ctx context.Context, index string) (map[string]int64, error)
	// Score is member's due time in index; ok is false when it is not there.
	Score(ctx context.Context, index, member string) (ms int64, ok bool, err error)
}

// AbsentScheduler adds members to an index only where they are absent
// (ZADD NX). Without it, ScheduleAbsent sets them all.
type AbsentScheduler interface {
	ScheduleAbsent(ctx context.Context, index string, members []string, due time.Time) error
}

// ReleaseWatcher lets a lock's holder say "I am done" and every waiter, in
// every process, re-read at once. It is best effort: a lost announcement (a
// reconnect, a waiter that subscribed a moment too late) costs a poll
// interval, never a wrong answer, because the waiter still polls and every
// decision is taken from what it reads. Without it, waiters only poll.
type ReleaseWatcher interface {
	// WatchRelease returns a channel that receives once key's holder announces
	// a release made after WatchRelease returned, and stop, which ends the watch.
	// ok is false when the store cannot watch; the caller then polls only.
	WatchRelease(ctx context.Context, key string) (released <-chan struct{}, stop func(), ok bool)
	// AnnounceRelease tells every watcher of key that its holder let go.
	AnnounceRelease(ctx context.Context, key string)
}

// ReplicaWaiter waits until n replicas of key's master hold every write the
// master acknowledged so far, at most timeout, and returns how many do.
// Without it, a write is taken as durable once the store acknowledged it.
type ReplicaWaiter interface {
	WaitReplicas(ctx context.Context, key string, n int, timeout time.Duration) (int, error)
}

// Close closes s when it has a Close method.
func Close(s Store) error {
	if c, ok := s.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: negative ttl %v", errs.InvalidArgument, ttl)
	}
	return nil
}

// pxMillis is d in whole milliseconds, at least 1 for a positive d: 0 would
// mean "no expiry" to the Redis scripts and "claimable at once" to Claim.
func pxMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// checkClaim rejects a Claim that could take nothing, or that would leave what
// it took due before now, free for the next caller to take again.
func checkClaim(lease time.Duration, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: claim count %d, want at least 1", errs.InvalidArgument, n)
	}
	if lease < 0 {
		return fmt.Errorf("%w: negative lease %v", errs.InvalidArgument, lease)
	}
	return nil
}

// claimWindow returns the scores a Claim reads and writes, in Unix
// milliseconds: members due at or before nowMs are taken and moved to untilMs,
// which a positive lease puts at least 1 ms past nowMs.
func claimWindow(now time.Time, lease time.Duration) (nowMs, untilMs int64) {
	nowMs = now.UnixMilli()
	return nowMs, nowMs + pxMillis(lease)
}
