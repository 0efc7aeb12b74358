// Package ratelimit bounds work per key (a provider's refreshes ahead) on
// one instance and across the instances that share a store.
package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
)

// A fleet of instances must not hammer a provider: a hundred thousand
// connections may come due for a refresh ahead in one hour. Each key's work
// is bounded on each instance (Concurrency) and across the fleet
// (PerSecond), and a key's slow-down (after a provider's 429) holds back the
// whole fleet's work on it, not just the instance that heard it.
//
// The fleet-wide rate is a bucket of permits kept in the store as a due
// index per key (oauth:sys:rate:{key}): PerSecond members, each claimed for
// one second by the work that uses it, with the same atomic Claim the
// worker takes its work with. When a claim finds no permit, the instance
// looks the bucket over (at most once a second): it puts back the permits
// missing, as after a failover or an eviction, and frees those leased into
// the future by a clock running ahead. A permit numbered at or beyond the
// instance's own PerSecond is removed when claimed, so a limit lowered on
// every instance lowers the rate. The slow-down is one store key per key
// limited (oauth:sys:slow:{key}) whose value is when it ends.

// Limit bounds the work of one key.
type Limit struct {
	Concurrency int // how many at once on this instance; at least 1
	PerSecond   int // how many a second across the fleet; 0: no limit but Concurrency
}

const (
	// SlowDown is how long a slow-down holds the fleet's work on a key.
	SlowDown        = 30 * time.Second
	slowKeyPrefix   = "oauth:sys:slow:"
	rateIndexPrefix = "oauth:sys:rate:"
)

// Limiter holds the work of each key to its Limit. Store and Now are set
// before its first use.
type Limiter struct {
	Store kv.Store
	Now   func() time.Time

	mu      sync.Mutex
	slots   map[string]chan struct{} // per key: one per piece of work in flight here
	buckets map[string]bucketSeen    // per key: what this process did to its bucket of permits

	OnQueue func() // tests: called as a piece of work starts waiting for a slot
}

// Held reports how many of key's slots are held on this instance.
func (l *Limiter) Held(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.slots[key])
}

// Kept reports for how many keys l keeps slots, and buckets of permits.
func (l *Limiter) Kept() (slots, buckets int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.slots), len(l.buckets)
}

func (l *Limiter) slotsOf(key string, n int) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots == nil {
		l.slots = map[string]chan struct{}{}
	}
	c, ok := l.slots[key]
	if !ok {
		c = make(chan struct{}, n)
		l.slots[key] = c
	}
	return c
}

// Forget lets go of what l keeps for the keys that has reports gone, once
// l keeps as many as bound: the slots of a key with no work in flight
// here, and what this process did to its bucket.
func (l *Limiter) Forget(bound int, has func(key string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.slots) < bound && len(l.buckets) < bound {
		return
	}
	for id, c := range l.slots {
		if len(c) == 0 && !has(id) {
			delete(l.slots, id)
		}
	}
	for id := range l.buckets {
		if !has(id) {
			delete(l.buckets, id)
		}
	}
}

// SlowedDownError is Admit's answer while the fleet waits on a key.
type SlowedDownError struct{ Until time.Time }

func (e *SlowedDownError) Error() string {
	return "oauthflow: refreshes ahead wait until " + e.Until.UTC().Format(time.RFC3339)
}

// Admit lets one piece of work on key go: it waits for one of this
// instance's lim.Concurrency slots for the key (release gives it back),
// then, unless the fleet is slowed down, takes a permit of the fleet's for
// this second. While the fleet is slowed down, or no permit is left this
// second, it returns a *SlowedDownError that says when to try again.
func (l *Limiter) Admit(ctx context.Context, key string, lim Limit) (release func(), err error) {
	slots := l.slotsOf(key, lim.Concurrency)
	if l.OnQueue != nil {
		l.OnQueue()
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release = func() { <-slots }
	// Asked once the slot is held: work that waited for it while
	// another heard 429 does not go out after all.
	if until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed {
		release()
		if err == nil {
			err = &SlowedDownError{Until: until}
		}
		return nil, err
	}
	if lim.PerSecond > 0 {
		if err := l.takePermit(ctx, key, lim.PerSecond); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

// slowedUntil reports whether the fleet's work on key is slowed
// down, and until when.
func (l *Limiter) slowedUntil(ctx context.Context, key string) (time.Time, bool, error) {
	b, err := l.Store.Get(ctx, slowKeyPrefix+key)
	if errors.Is(err, errs.NotFound) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, errs.Store(ctx, "read a provider's slow-down", err)
	}
	ms, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return time.Time{}, false, nil // not ours to read: ignored, and replaced by the next 429
	}
	until := time.UnixMilli(ms)
	return until, until.After(l.Now()), nil
}

// Slow slows the fleet's work on key down for SlowDown (a provider
// answered 429). An error means it could not be shared: only this instance
// slows down.
func (l *Limiter) Slow(ctx context.Context, key string) error {
	until := l.Now().Add(SlowDown)
	return l.Store.Set(ctx, slowKeyPrefix+key, []byte(strconv.FormatInt(until.UnixMilli(), 10)), SlowDown)
}

// Permit bucket timings.
const (
	permitLease = time.Second // a permit is one piece of work in one second
	// permitSkew is how far another instance's clock may run ahead of this
	// one's: a permit leased further ahead than permitLease+permitSkew was
	// leased by a clock out of step, and is free again.
	permitSkew = time.Second
	// maxStalePermits bounds the permits of a higher, older limit one take
	// removes before it gives up for this second.
	maxStalePermits = 64
)

// bucketSeen is what this process did to a key's bucket of permits.
type bucketSeen struct {
	filled  int       // the permits put in (a KV that cannot read the bucket)
	checked time.Time // when the bucket was last looked over
}

// takePermit claims one of the fleet's perSecond permits for key,
// leased for permitLease; none left is a *SlowedDownError for a second on.
// When none is left the bucket is looked over (mendBucket) and the claim
// made once more.
func (l *Limiter) takePermit(ctx context.Context, key string, perSecond int) error {
	index, now := rateIndexPrefix+key, l.Now()
	r, reads := bucketReader(l.Store)
	if !reads {
		if err := l.primeBucket(ctx, key, index, perSecond); err != nil {
			return err
		}
	}
	for range 2 {
		ok, err := l.claimPermit(ctx, index, now, perSecond)
		if ok || err != nil {
			return err
		}
		if !reads || !l.lookOver(key, now) {
			break
		}
		mended, err := l.mendBucket(ctx, r, index, perSecond, now)
		if err != nil {
			return err
		}
		if !mended {
			break
		}
	}
	return &SlowedDownError{Until: now.Add(permitLease)}
}

// claimPermit claims one permit of the bucket index. A permit numbered
// perSecond or beyond was put there under a higher limit: it is taken out
// of the bucket rather than used, so that lowering PerSecond on every
// instance lowers the fleet's rate.
func (l *Limiter) claimPermit(ctx context.Context, index string, now time.Time, perSecond int) (bool, error) {
	for range maxStalePermits {
		got, err := l.Store.Claim(ctx, index, now, permitLease, 1)
		if err != nil {
			return false, errs.Store(ctx, "take a refresh permit", err)
		}
		if len(got) == 0 {
			return false, nil
		}
		if k, err := strconv.Atoi(got[0]); err == nil && k < perSecond && strconv.Itoa(k) == got[0] {
			return true, nil
		}
		if err := l.Store.Unschedule(ctx, index, got[0]); err != nil {
			return false, errs.Store(ctx, "remove a stale refresh permit", err)
		}
	}
	return false, nil
}

// lookOver reports whether this process may look key's bucket over
// at now: at most once a second.
func (l *Limiter) lookOver(key string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if since := now.Sub(b.checked); !b.checked.IsZero() && since < time.Second && since > -time.Second {
		return false
	}
	b.checked = now
	l.setBucket(key, b)
	return true
}

// setBucket records b for key. l.mu is held.
func (l *Limiter) setBucket(key string, b bucketSeen) {
	if l.buckets == nil {
		l.buckets = map[string]bucketSeen{}
	}
	l.buckets[key] = b
}

// bucketReader returns store as an IndexReader when the store under any key
// prefix can list an index and add members only where absent.
func bucketReader(store kv.Store) (kv.IndexReader, bool) {
	under, _ := kv.Unprefixed(store)
	_, lists := under.(kv.IndexReader)
	_, absent := under.(kv.AbsentScheduler)
	r, ok := store.(kv.IndexReader)
	return r, lists && absent && ok
}

// mendBucket puts back what the bucket of permits lacks, and reports
// whether it changed it: when permits are missing (never put in, or lost
// with the store's data in a failover or an eviction) they are all put in
// again, only where absent, so a permit another instance took keeps its
// lease; and a permit leased further ahead than a clock in step with this
// one leases it (an instance whose clock runs ahead took it) is made free,
// instead of holding the whole fleet off until that clock's future.
func (l *Limiter) mendBucket(ctx context.Context, r kv.IndexReader, index string, perSecond int, now time.Time) (bool, error) {
	held, err := r.Members(ctx, index)
	if err != nil {
		return false, errs.Store(ctx, "read a refresh permit bucket", err)
	}
	permits := make([]string, perSecond)
	mended, missing, farthest := false, false, now.Add(permitLease+permitSkew).UnixMilli()
	for i := range permits {
		permits[i] = strconv.Itoa(i)
		due, ok := held[permits[i]]
		missing = missing || !ok
		if ok && due > farthest {
			if err := l.Store.Schedule(ctx, index, permits[i], now); err != nil {
				return false, errs.Store(ctx, "free a refresh permit", err)
			}
			mended = true
		}
	}
	if !missing {
		return mended, nil
	}
	if err := kv.ScheduleAbsent(ctx, l.Store, index, permits, time.UnixMilli(0)); err != nil {
		return false, errs.Store(ctx, "fill a refresh permit bucket", err)
	}
	return true, nil
}

// primeBucket, for a KV of the app's own that cannot list an index, puts
// the permits of a key's bucket in the store once per process (and
// again when the limit grows). Such a KV sets them all, so a process that
// starts may grant one second's permits twice, and a bucket it loses is
// filled again only when a process starts.
func (l *Limiter) primeBucket(ctx context.Context, key, index string, perSecond int) error {
	l.mu.Lock()
	have := l.buckets[key].filled
	l.mu.Unlock()
	if have >= perSecond {
		return nil
	}
	permits := make([]string, 0, perSecond-have)
	for i := have; i < perSecond; i++ {
		permits = append(permits, strconv.Itoa(i))
	}
	if err := kv.ScheduleAbsent(ctx, l.Store, index, permits, time.UnixMilli(0)); err != nil {
		return errs.Store(ctx, "fill a refresh permit bucket", err)
	}
	l.mu.Lock()
	b := l.buckets[key]
	b.filled = max(b.filled, perSecond)
	l.setBucket(key, b)
	l.mu.Unlock()
	return nil
}
