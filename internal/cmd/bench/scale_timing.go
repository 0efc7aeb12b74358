package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/kv"
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
	entries                  int64 // members of the due index
	level                    int64 // its level: 2^level shards
	ping, idle, one, hundred latency
}

// workerCost times, interleaved, a PING, a pass's claim when nothing is due
// (what every idle pass sends) and a claim that finds one piece due; then
// claims that find a whole batch due. All through the sharded claim the
// worker calls, on the module's store and the index it reads, swept (see
// config). The pieces are members of a job no instance knows, scheduled
// (and removed) outside the timing.
func (s *scaler) workerCost(ctx context.Context, store kv.Store) (workerCost, error) {
	var w workerCost
	members, err := kv.MembersSharded(ctx, store, dueIndex)
	if err != nil {
		return w, err
	}
	w.entries, w.level = int64(len(members)), s.dueLevels(ctx)[1]
	var ping, idle, one []float64
	for i := range passReps {
		member := "scale:" + strconv.Itoa(i)
		err = firstErr(timed(&ping, func() error { return s.e.rdb.Ping(ctx).Err() }),
			timed(&idle, claimOf(ctx, store, 0)),
			kv.ScheduleSharded(ctx, store, dueIndex, member, time.Now().Add(-time.Hour)),
			timed(&one, claimOf(ctx, store, 1)),
			kv.UnscheduleSharded(ctx, store, dueIndex, member))
		if err != nil {
			return w, err
		}
	}
	w.ping, w.idle, w.one = latencyOf(ping), latencyOf(idle), latencyOf(one)
	w.hundred, err = s.batchClaims(ctx, store)
	return w, err
}

// dueIndex is the worker's index of due work.
const dueIndex = "oauth:sys:due"

// claimOf is a claim of a batch on the due index that must take want pieces.
func claimOf(ctx context.Context, store kv.Store, want int) func() error {
	return func() error {
		got, err := kv.ClaimSharded(ctx, store, dueIndex, time.Now(), time.Minute, batch)
		if err == nil && len(got) != want {
			err = fmt.Errorf("a claim took %d pieces, want %d", len(got), want)
		}
		return err
	}
}

// sweepLevels runs idle passes until no level below the due index's own
// holds members, as the worker's passes do after the level rose while the
// connections were stored, and returns how many it ran and how long they
// took.
func (s *scaler) sweepLevels(ctx context.Context, store kv.Store) (int, time.Duration, error) {
	start := time.Now()
	for passes := 0; ; passes++ {
		if lv := s.dueLevels(ctx); lv[0] >= lv[1] {
			return passes, time.Since(start), nil
		} else if passes > 2<<lv[1] {
			return passes, 0, fmt.Errorf("%d passes left levels %d to %d", passes, lv[0], lv[1])
		}
		if err := claimOf(ctx, store, 0)(); err != nil {
			return passes, 0, err
		}
	}
}

// dueLevels are the due index's lowest level holding members, and its own.
func (s *scaler) dueLevels(ctx context.Context) [2]int64 {
	var lv [2]int64
	v, _ := s.e.rdb.HMGet(ctx, s.e.prefix+"oauth:sys:{due}:levels", "from", "at").Result()
	for i := range lv {
		if len(v) > i {
			if str, ok := v[i].(string); ok {
				lv[i], _ = strconv.ParseInt(str, 10, 64)
			}
		}
	}
	return lv
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
func (s *scaler) batchClaims(ctx context.Context, store kv.Store) (latency, error) {
	var us []float64
	past := time.Now().Add(-time.Hour)
	for i := range batchReps {
		add, remove := make([]*kv.Op, batch), make([]*kv.Op, batch)
		for j := range add {
			member := "scale:" + strconv.Itoa(i) + ":" + strconv.Itoa(j)
			add[j] = &kv.Op{Kind: kv.OpScheduleSharded, Key: dueIndex, Member: member, Due: past}
			remove[j] = &kv.Op{Kind: kv.OpUnscheduleSharded, Key: dueIndex, Member: member}
		}
		kv.RunBatch(ctx, store, add...)
		err := firstErr(opsErr(add), timed(&us, claimOf(ctx, store, batch)))
		kv.RunBatch(ctx, store, remove...)
		if err = cmp.Or(err, opsErr(remove)); err != nil {
			return latency{}, err
		}
	}
	return latencyOf(us), nil
}

// opsErr is the first error of ops.
func opsErr(ops []*kv.Op) error {
	for _, op := range ops {
		if op.Err != nil {
			return op.Err
		}
	}
	return nil
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
