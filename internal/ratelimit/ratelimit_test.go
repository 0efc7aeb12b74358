package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
)

// stores are the stores the limiter is tried on, each empty.
func stores() map[string]func(t *testing.T) kv.Store {
	return map[string]func(t *testing.T) kv.Store{
		"memory": func(*testing.T) kv.Store { return kv.NewMemory(nil) },
		"redis": func(t *testing.T) kv.Store {
			c := redistest.Real(t)
			return kv.WithPrefix(kv.NewRedis(c), redistest.Prefix(t, c))
		},
	}
}

// limiter is one instance's limiter over store, on the clock now.
func limiter(store kv.Store, now func() time.Time) *Limiter { return &Limiter{Store: store, Now: now} }

// An instance that fills the provider's bucket of permits after another
// instance has taken them this second adds only what is missing: it does not
// hand the taken permits out again.
func TestPermitsFilledOnlyWhereMissing(t *testing.T) {
	t.Parallel()
	for name, newKV := range stores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store, clock := newKV(t), fakeclock.New(time.Unix(1_800_000_000, 0))
			first := limiter(store, clock.Now)
			second := limiter(store, clock.Now)
			ctx := context.Background()
			for i := range 5 {
				if err := first.takePermit(ctx, "acme", 5); err != nil {
					t.Fatalf("permit %d of 5: %v", i+1, err)
				}
			}
			var slowed *SlowedDownError
			if err := second.takePermit(ctx, "acme", 5); !errors.As(err, &slowed) {
				t.Fatalf("a sixth permit in one second, from an instance that filled the bucket anew: %v", err)
			}
			clock.Advance(time.Second)
			if err := second.takePermit(ctx, "acme", 5); err != nil {
				t.Fatalf("the next second's permit: %v", err)
			}
			// An instance with a higher limit fills the bucket up to it:
			// it adds the two permits missing, not the four taken.
			if n := permitsThisSecond(t, first, 5); n != 4 {
				t.Fatalf("%d permits left of 5 after one was taken", n)
			}
			raised := limiter(store, clock.Now)
			if n := permitsThisSecond(t, raised, 7); n != 2 {
				t.Fatalf("an instance that raised the limit from 5 to 7 got %d permits this second, want 2", n)
			}
		})
	}
}

// permitsThisSecond takes permits of s's bucket for "acme" until none is
// left this second, and returns how many it got.
func permitsThisSecond(t *testing.T, s *Limiter, perSecond int) int {
	t.Helper()
	for n := 0; n <= 10*perSecond; n++ {
		err := s.takePermit(context.Background(), "acme", perSecond)
		var slowed *SlowedDownError
		if errors.As(err, &slowed) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Fatalf("more than %d permits in one second", 10*perSecond)
	return 0
}

// A fleet whose PerSecond was lowered on every instance gets the lower rate:
// the permits the old limit put in the bucket are not handed out.
func TestPermitsFollowALoweredLimit(t *testing.T) {
	t.Parallel()
	for name, newKV := range stores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store, clock := newKV(t), fakeclock.New(time.Unix(1_800_000_000, 0))
			if n := permitsThisSecond(t, limiter(store, clock.Now), 10); n != 10 {
				t.Fatalf("%d permits under a limit of 10", n)
			}
			fleet := []*Limiter{ // every instance restarted with the lower limit
				limiter(store, clock.Now),
				limiter(store, clock.Now),
			}
			for second := 1; second <= 3; second++ {
				clock.Advance(time.Second)
				n := 0
				for _, s := range fleet {
					n += permitsThisSecond(t, s, 5)
				}
				if n != 5 {
					t.Fatalf("second %d after the limit went from 10 to 5: the fleet got %d permits", second, n)
				}
			}
			clock.Advance(time.Second)
			if n := permitsThisSecond(t, fleet[0], 8); n != 8 { // and raised again
				t.Fatalf("%d permits after the limit was raised to 8", n)
			}
		})
	}
}

// A bucket the store lost (a failover to a replica that never had it, an
// eviction) is filled again: refresh ahead does not stop on the instances
// that had filled it.
func TestPermitsRefilledAfterTheBucketIsLost(t *testing.T) {
	t.Parallel()
	for name, newKV := range stores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store, clock := newKV(t), fakeclock.New(time.Unix(1_800_000_000, 0))
			s := limiter(store, clock.Now)
			if n := permitsThisSecond(t, s, 5); n != 5 {
				t.Fatalf("%d permits under a limit of 5", n)
			}
			for i := range 5 { // the bucket is gone
				if err := store.Unschedule(context.Background(), rateIndexPrefix+"acme", strconv.Itoa(i)); err != nil {
					t.Fatal(err)
				}
			}
			for second := 1; second <= 3; second++ {
				clock.Advance(time.Second)
				if n := permitsThisSecond(t, s, 5); n != 5 {
					t.Fatalf("second %d after the bucket was lost: %d permits, want 5", second, n)
				}
			}
		})
	}
}

// An instance whose clock runs ahead leases the permits it takes into its
// own future; the instances whose clocks are right are not locked out until
// then: the next second they find the bucket again.
func TestPermitsNotLeasedIntoTheFutureByAFastClock(t *testing.T) {
	t.Parallel()
	for name, newKV := range stores() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			store, clock := newKV(t), fakeclock.New(time.Unix(1_800_000_000, 0))
			ahead := func() time.Time { return clock.Now().Add(time.Hour) }
			fast := limiter(store, ahead)
			right := limiter(store, clock.Now)
			if n := permitsThisSecond(t, fast, 5); n != 5 {
				t.Fatalf("%d permits under a limit of 5", n)
			}
			for second := 1; second <= 3; second++ {
				clock.Advance(time.Second)
				if n := permitsThisSecond(t, right, 5); n != 5 {
					t.Fatalf("second %d after an instance an hour ahead took the permits: %d for the others, want 5", second, n)
				}
			}
		})
	}
}
