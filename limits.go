package oauthflow

import (
	"context"
	"errors"

	"net/http"
	"strconv"
	"sync"
	"time"
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
// Claim the worker takes its work with. The slow-down is one key per
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

	mu     sync.Mutex
	slots  map[string]chan struct{} // per provider: one per refresh in flight here
	primed map[string]int           // per provider: the permits this process has put in the bucket

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
		return time.Time{}, false, storeErr(ctx, "read a provider's slow-down", err)
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

// takePermit claims one of the fleet's perSecond permits for providerID,
// leased for one second; none left is an *errSlowedDown for a second on.
func (s *TokenStore) takePermit(ctx context.Context, providerID string, perSecond int) error {
	index, now := rateIndexPrefix+providerID, s.now()
	if err := s.primeBucket(ctx, providerID, index, perSecond); err != nil {
		return err
	}
	got, err := s.kv.Claim(ctx, index, now, time.Second, 1)
	if err != nil {
		return storeErr(ctx, "take a refresh permit", err)
	}
	if len(got) == 0 {
		return &errSlowedDown{until: now.Add(time.Second)}
	}
	return nil
}

// absentScheduler is a KV that can add members to an index only where they
// are absent (ZADD NX).
type absentScheduler interface {
	scheduleAbsent(ctx context.Context, index string, members []string, due time.Time) error
}

// scheduleAbsent adds members to index where they are absent; a KV that
// cannot tell sets them all.
func scheduleAbsent(ctx context.Context, kv KV, index string, members []string, due time.Time) error {
	if a, ok := kv.(absentScheduler); ok {
		return a.scheduleAbsent(ctx, index, members, due)
	}
	for _, member := range members {
		if err := kv.Schedule(ctx, index, member, due); err != nil {
			return err
		}
	}
	return nil
}

// primeBucket puts the permits of a provider's bucket in the store once per
// process (and again when the limit grows), adding only those missing: a
// permit another instance took this second keeps its lease. (A KV of the
// app's own that cannot add only where absent fills them all, so a process
// that starts may grant one second's permits twice.)
func (s *TokenStore) primeBucket(ctx context.Context, providerID, index string, perSecond int) error {
	l := &s.limiter
	l.mu.Lock()
	if l.primed == nil {
		l.primed = map[string]int{}
	}
	have := l.primed[providerID]
	l.mu.Unlock()
	if have >= perSecond {
		return nil
	}
	permits := make([]string, 0, perSecond-have)
	for i := have; i < perSecond; i++ {
		permits = append(permits, strconv.Itoa(i))
	}
	if err := scheduleAbsent(ctx, s.kv, index, permits, time.UnixMilli(0)); err != nil {
		return storeErr(ctx, "fill a refresh permit bucket", err)
	}
	l.mu.Lock()
	l.primed[providerID] = max(l.primed[providerID], perSecond)
	l.mu.Unlock()
	return nil
}

// rateLimited reports whether err is a provider's 429.
func rateLimited(err error) bool { return providerStatus(err) == http.StatusTooManyRequests }
