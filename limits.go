package oauthflow

import (
	"context"
	"errors"

	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
)

// Refreshing ahead at scale, politely: a hundred thousand connections may
// come due in one hour, and a fleet of instances must not hammer a provider
// with them. Each provider's refreshes ahead are bounded on each instance
// (Concurrency) and across the fleet (PerSecond), and a provider that
// answers 429 slows the whole fleet's refreshes ahead of its tokens, not
// just the instance that heard it. Refreshes on read are never held back:
// a user is waiting on them.
//
// The fleet-wide rate is a bucket of permits kept in the store as a due
// index per provider (oauth:sys:rate:{provider}): PerSecond members, each
// claimed for one second by the refresh that uses it, with the same atomic
// Claim the worker takes its work with. When a claim finds no permit, the
// instance looks the bucket over (at most once a second): it puts back the
// permits missing, as after a failover or an eviction, and frees those
// leased into the future by a clock running ahead. A permit numbered at or
// beyond the instance's own PerSecond is removed when claimed, so a limit
// lowered on every instance lowers the rate. The slow-down is one key per
// provider (oauth:sys:slow:{provider}) whose value is when it ends.

// RefreshLimit bounds the refreshes ahead of one provider's tokens.
type RefreshLimit struct {
	// Concurrency is how many of the provider's tokens one instance
	// refreshes ahead at once; 0: 100, GitHub's documented secondary limit
	// on concurrent requests, which at 100 ms a refresh is 1,000 a second.
	Concurrency int
	// PerSecond is how many refreshes ahead a second the provider gets
	// from all the instances that share the store; 0: no limit but
	// Concurrency.
	PerSecond int
}

// Defaults of the refresh limits.
const (
	defaultRefreshConcurrency = 100              // GitHub's secondary limit: no more than 100 concurrent requests
	fleetSlowDown             = 30 * time.Second // how long a 429 slows the fleet's refreshes ahead of a provider
	slowKeyPrefix             = "oauth:sys:slow:"
	rateIndexPrefix           = "oauth:sys:rate:"
)

// defaultRefreshLimits are the limits of providers that document one for
// their token endpoint.
var defaultRefreshLimits = map[string]RefreshLimit{}

// WithRefreshLimits sets the refresh-ahead limits of providers by ID; the
// limit under "" applies to every provider not named.
func WithRefreshLimits(limits map[string]RefreshLimit) TokenStoreOption {
	return func(s *TokenStore) {
		s.limiter.limits = limits
	}
}

// refreshLimiter is a TokenStore's bounds on refreshes ahead.
type refreshLimiter struct {
	limits map[string]RefreshLimit

	mu      sync.Mutex
	slots   map[string]chan struct{} // per provider: one per refresh in flight here
	buckets map[string]bucketSeen    // per provider: what this process did to its bucket of permits

	onQueue func() // tests: called as a refresh starts waiting for a slot
}

func (l *refreshLimiter) limit(providerID string) RefreshLimit {
	lim, ok := l.limits[providerID]
	if !ok {
		if lim, ok = defaultRefreshLimits[providerID]; !ok {
			lim = l.limits[""]
		}
	}
	if lim.Concurrency <= 0 {
		lim.Concurrency = defaultRefreshConcurrency
	}
	return lim
}

func (l *refreshLimiter) slotsOf(providerID string, n int) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.slots == nil {
		l.slots = map[string]chan struct{}{}
	}
	c, ok := l.slots[providerID]
	if !ok {
		c = make(chan struct{}, n)
		l.slots[providerID] = c
	}
	return c
}

// forgetDropped lets go of what l keeps for providers reg no longer holds
// (those its resolvers built are let go beyond maxResolved), once l keeps
// as many as reg can hold: the slots of a provider with no refresh in
// flight here, and what this process did to its bucket.
func (l *refreshLimiter) forgetDropped(reg *Registry) {
	if reg == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if bound := reg.bound(); len(l.slots) < bound && len(l.buckets) < bound {
		return
	}
	for id, c := range l.slots {
		if len(c) == 0 && !reg.Has(id) {
			delete(l.slots, id)
		}
	}
	for id := range l.buckets {
		if !reg.Has(id) {
			delete(l.buckets, id)
		}
	}
}

// errSlowedDown is admit's answer while the fleet waits on a provider.
type errSlowedDown struct{ until time.Time }

func (e *errSlowedDown) Error() string {
	return "oauthflow: refreshes ahead wait until " + e.until.UTC().Format(time.RFC3339)
}

// admit lets one refresh ahead of providerID's tokens go: it waits for one
// of this instance's slots for the provider (release gives it back), then,
// unless the fleet is slowed down, takes a permit of the fleet's for this
// second. While the fleet is slowed down, or no permit is left this second,
// it returns an *errSlowedDown that says when to try again.
func (s *TokenStore) admit(ctx context.Context, providerID string) (release func(), err error) {
	l := &s.limiter
	lim := l.limit(providerID)
	l.forgetDropped(s.reg)
	slots := l.slotsOf(providerID, lim.Concurrency)
	if l.onQueue != nil {
		l.onQueue()
	}
	select {
	case slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	release = func() { <-slots }
	// Asked once the slot is held: a refresh that waited for it while
	// another heard 429 does not go out after all.
	if until, slowed, err := s.slowedUntil(ctx, providerID); err != nil || slowed {
		release()
		if err == nil {
			err = &errSlowedDown{until: until}
		}
		return nil, err
	}
	if lim.PerSecond > 0 {
		if err := s.takePermit(ctx, providerID, lim.PerSecond); err != nil {
			release()
			return nil, err
		}
	}
	return release, nil
}

// slowedUntil reports whether the fleet's refreshes ahead of providerID's
// tokens are slowed down, and until when.
func (s *TokenStore) slowedUntil(ctx context.Context, providerID string) (time.Time, bool, error) {
	b, err := s.kv.Get(ctx, slowKeyPrefix+providerID)
	if errors.Is(err, ErrNotFound) {
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
	return until, until.After(s.now()), nil
}

// slowDown slows the fleet's refreshes ahead of providerID's tokens for
// fleetSlowDown, after the provider answered 429.
func (s *TokenStore) slowDown(ctx context.Context, providerID string) {
	until := s.now().Add(fleetSlowDown)
	if err := s.kv.Set(ctx, slowKeyPrefix+providerID, []byte(strconv.FormatInt(until.UnixMilli(), 10)), fleetSlowDown); err != nil {
		s.events.log.WarnContext(ctx, "oauthflow: a provider's slow-down could not be shared; this instance slows down alone",
			"provider", providerID, "error", err.Error())
	}
}

// Permit bucket timings.
const (
	permitLease = time.Second // a permit is one refresh ahead in one second
	// permitSkew is how far another instance's clock may run ahead of this
	// one's: a permit leased further ahead than permitLease+permitSkew was
	// leased by a clock out of step, and is free again.
	permitSkew = time.Second
	// maxStalePermits bounds the permits of a higher, older limit one take
	// removes before it gives up for this second.
	maxStalePermits = 64
)

// bucketSeen is what this process did to a provider's bucket of permits.
type bucketSeen struct {
	filled  int       // the permits put in (a KV that cannot read the bucket)
	checked time.Time // when the bucket was last looked over
}

// takePermit claims one of the fleet's perSecond permits for providerID,
// leased for permitLease; none left is an *errSlowedDown for a second on.
// When none is left the bucket is looked over (mendBucket) and the claim
// made once more.
func (s *TokenStore) takePermit(ctx context.Context, providerID string, perSecond int) error {
	index, now := rateIndexPrefix+providerID, s.now()
	r, reads := bucketReader(s.kv)
	if !reads {
		if err := s.primeBucket(ctx, providerID, index, perSecond); err != nil {
			return err
		}
	}
	for range 2 {
		ok, err := s.claimPermit(ctx, index, now, perSecond)
		if ok || err != nil {
			return err
		}
		if !reads || !s.limiter.lookOver(providerID, now) {
			break
		}
		mended, err := s.mendBucket(ctx, r, index, perSecond, now)
		if err != nil {
			return err
		}
		if !mended {
			break
		}
	}
	return &errSlowedDown{until: now.Add(permitLease)}
}

// claimPermit claims one permit of the bucket index. A permit numbered
// perSecond or beyond was put there under a higher limit: it is taken out
// of the bucket rather than used, so that lowering PerSecond on every
// instance lowers the fleet's rate.
func (s *TokenStore) claimPermit(ctx context.Context, index string, now time.Time, perSecond int) (bool, error) {
	for range maxStalePermits {
		got, err := s.kv.Claim(ctx, index, now, permitLease, 1)
		if err != nil {
			return false, errs.Store(ctx, "take a refresh permit", err)
		}
		if len(got) == 0 {
			return false, nil
		}
		if k, err := strconv.Atoi(got[0]); err == nil && k < perSecond && strconv.Itoa(k) == got[0] {
			return true, nil
		}
		if err := s.kv.Unschedule(ctx, index, got[0]); err != nil {
			return false, errs.Store(ctx, "remove a stale refresh permit", err)
		}
	}
	return false, nil
}

// lookOver reports whether this process may look providerID's bucket over
// at now: at most once a second.
func (l *refreshLimiter) lookOver(providerID string, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[providerID]
	if since := now.Sub(b.checked); !b.checked.IsZero() && since < time.Second && since > -time.Second {
		return false
	}
	b.checked = now
	l.setBucket(providerID, b)
	return true
}

// setBucket records b for providerID. l.mu is held.
func (l *refreshLimiter) setBucket(providerID string, b bucketSeen) {
	if l.buckets == nil {
		l.buckets = map[string]bucketSeen{}
	}
	l.buckets[providerID] = b
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
func (s *TokenStore) mendBucket(ctx context.Context, r kv.IndexReader, index string, perSecond int, now time.Time) (bool, error) {
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
			if err := s.kv.Schedule(ctx, index, permits[i], now); err != nil {
				return false, errs.Store(ctx, "free a refresh permit", err)
			}
			mended = true
		}
	}
	if !missing {
		return mended, nil
	}
	if err := kv.ScheduleAbsent(ctx, s.kv, index, permits, time.UnixMilli(0)); err != nil {
		return false, errs.Store(ctx, "fill a refresh permit bucket", err)
	}
	return true, nil
}

// primeBucket, for a KV of the app's own that cannot list an index, puts
// the permits of a provider's bucket in the store once per process (and
// again when the limit grows). Such a KV sets them all, so a process that
// starts may grant one second's permits twice, and a bucket it loses is
// filled again only when a process starts.
func (s *TokenStore) primeBucket(ctx context.Context, providerID, index string, perSecond int) error {
	l := &s.limiter
	l.mu.Lock()
	have := l.buckets[providerID].filled
	l.mu.Unlock()
	if have >= perSecond {
		return nil
	}
	permits := make([]string, 0, perSecond-have)
	for i := have; i < perSecond; i++ {
		permits = append(permits, strconv.Itoa(i))
	}
	if err := kv.ScheduleAbsent(ctx, s.kv, index, permits, time.UnixMilli(0)); err != nil {
		return errs.Store(ctx, "fill a refresh permit bucket", err)
	}
	l.mu.Lock()
	b := l.buckets[providerID]
	b.filled = max(b.filled, perSecond)
	l.setBucket(providerID, b)
	l.mu.Unlock()
	return nil
}

// rateLimited reports whether err is a provider's 429.
func rateLimited(err error) bool { return providerStatus(err) == http.StatusTooManyRequests }
