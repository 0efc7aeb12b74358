package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/redis/go-redis/v9"
)

// Repetitions of the timed calls at each N.
const (
	passReps  = 2000 // idle passes, claims of one piece, PINGs
	batchReps = 200  // claims of a batch
	batch     = 256  // pieces a claim asks for: the most a worker has in flight, what an idle one asks
	listReps  = 400  // listings of each user
)

// latency is one call's time over many calls, in microseconds.
type latency struct{ median, p99 float64 }

func latencyOf(us []float64) latency {
	if len(us) == 0 {
		return latency{}
	}
	s := slices.Clone(us)
	slices.Sort(s)
	return latency{median: sample(s).median(), p99: s[min(len(s)-1, len(s)*99/100)]}
}

// timed runs call once and appends its time in microseconds to into.
func timed(into *[]float64, call func() error) error {
	start := time.Now()
	err := call()
	*into = append(*into, float64(time.Since(start).Nanoseconds())/1e3)
	return err
}

// workerCost is what the worker's commands cost with N connections due for
// a refresh ahead in the index, beside a PING (one round trip that does nothing).
type workerCost struct {
	entries                  int64 // members of oauth:sys:due
	ping, idle, one, hundred latency
}

// workerCost times, interleaved, a PING, a pass's claim when nothing is due
// (what every idle pass sends) and a claim that finds one piece due; then
// claims that find a whole batch due. All through the KV's exported Claim,
// on the index the worker reads. The pieces are members of a job no
// instance knows, scheduled (and removed) outside the timing.
func (s *scaler) workerCost(ctx context.Context, kv oauthflow.KV) (workerCost, error) {
	const index = "oauth:sys:due"
	var w workerCost
	var err error
	if w.entries, err = s.e.rdb.ZCard(ctx, s.e.prefix+index).Result(); err != nil {
		return w, err
	}
	var ping, idle, one []float64
	claim := func(want int) func() error {
		return func() error {
			got, err := kv.Claim(ctx, index, time.Now(), time.Minute, batch)
			if err == nil && len(got) != want {
				err = fmt.Errorf("a claim took %d pieces, want %d", len(got), want)
			}
			return err
		}
	}
	for i := range passReps {
		member := "scale:" + strconv.Itoa(i)
		err = firstErr(timed(&ping, func() error { return s.e.rdb.Ping(ctx).Err() }),
			timed(&idle, claim(0)),
			kv.Schedule(ctx, index, member, time.Now().Add(-time.Hour)),
			timed(&one, claim(1)),
			kv.Unschedule(ctx, index, member))
		if err != nil {
			return w, err
		}
	}
	w.ping, w.idle, w.one = latencyOf(ping), latencyOf(idle), latencyOf(one)
	w.hundred, err = s.batchClaims(ctx, kv, index)
	return w, err
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// batchClaims times claims that each find a whole batch due.
func (s *scaler) batchClaims(ctx context.Context, kv oauthflow.KV, index string) (latency, error) {
	var us []float64
	past := float64(time.Now().Add(-time.Hour).UnixMilli())
	for i := range batchReps {
		zs := make([]redis.Z, batch)
		for j := range zs {
			zs[j] = redis.Z{Score: past, Member: "scale:" + strconv.Itoa(i) + ":" + strconv.Itoa(j)}
		}
		members := make([]any, batch)
		for j, z := range zs {
			members[j] = z.Member
		}
		err := firstErr(s.e.rdb.ZAdd(ctx, s.e.prefix+index, zs...).Err(),
			timed(&us, func() error {
				got, err := kv.Claim(ctx, index, time.Now(), time.Minute, batch)
				if err == nil && len(got) != batch {
					err = fmt.Errorf("a claim took %d pieces, want %d", len(got), batch)
				}
				return err
			}),
			s.e.rdb.ZRem(ctx, s.e.prefix+index, members...).Err())
		if err != nil {
			return latency{}, err
		}
	}
	return latencyOf(us), nil
}

// listCost is Tokens.Connections for a user with k connections, beside the
// reads it cannot do without: the user's index (ZRANGE WITHSCORES) and then
// the k records (one MGET), two round trips.
type listCost struct {
	k          int
	lib, limit latency
}

// listCosts stores users with 1, 10 and 100 connections and times their listings.
func (s *scaler) listCosts(ctx context.Context, mod *oauthflow.Module) ([]listCost, error) {
	var out []listCost
	for _, k := range []int{1, 10, 100} {
		user := "lister-" + strconv.Itoa(k)
		ids := listProviders(k)
		for i, id := range ids {
			if err := mod.Tokens.StoreFromTokenSet(ctx, user, id, connectionTokens(-1-i)); err != nil {
				return nil, err
			}
		}
		c, err := s.listCost(ctx, mod, user, ids)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, nil
}

// listProviders are k provider IDs: GitHub, the registry's own, and others.
func listProviders(k int) []string {
	ids := []string{scaleProvider}
	for i := 1; i < k; i++ {
		ids = append(ids, fmt.Sprintf("svc-%02d", i))
	}
	return ids
}

func (s *scaler) listCost(ctx context.Context, mod *oauthflow.Module, user string, ids []string) (listCost, error) {
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.e.prefix + "oauth:" + user + ":" + id
	}
	var lib, limit []float64
	for range listReps {
		err := firstErr(timed(&limit, func() error {
			if err := s.e.rdb.ZRangeWithScores(ctx, s.e.prefix+"oauth:conn:"+user, 0, -1).Err(); err != nil {
				return err
			}
			return s.e.rdb.MGet(ctx, keys...).Err()
		}), timed(&lib, func() error {
			cs, err := mod.Tokens.Connections(ctx, user)
			if err == nil && len(cs) != len(ids) {
				err = fmt.Errorf("listed %d connections of %d", len(cs), len(ids))
			}
			return err
		}))
		if err != nil {
			return listCost{}, err
		}
	}
	return listCost{k: len(ids), lib: latencyOf(lib), limit: latencyOf(limit)}, nil
}
