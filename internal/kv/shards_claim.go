package kv

import (
	"cmp"
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/oauthflow/oauthflow/internal/xcontext"
	"github.com/redis/go-redis/v9"
)

// Claims of a sharded index on Redis, and the moves that bring members up
// to the current level (see shards_redis.go for the layout).

// ClaimSharded takes up to n due members, leased until now+lease: first
// from the index as one sorted set (an earlier version's members), then
// from the shards the head shows due, an even share of what is left from
// each, and then what is still left from those that hold more, as they
// hold it. A member taken from the index as one set, or from a shard below
// the current level, is moved to its shard at the current level, and
// returned unless a shard above where it was taken holds it already:
// there, the later write, its copy is the one that runs. While levels
// below the current one hold members, a claim also moves up the members of
// one of their shards (sweep).
func (r *Redis) ClaimSharded(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	if err := checkClaim(lease, n); err != nil {
		return nil, err
	}
	nowMs, untilMs := claimWindow(now, lease)
	x := r.sharded(index)
	ctx = xcontext.OrBackground(ctx)
	got, err := x.claim(ctx, nowMs, untilMs, n)
	x.sweep(ctx, untilMs+(untilMs-nowMs))
	return got, err
}

// move is a member to move to its shard at the current level, due at due,
// from the shard id it was found in ("" for the index as one set); claimed
// when a claim found it, leased until due there.
type move struct {
	member, from string
	due          int64
	claimed      bool
}

// claim is ClaimSharded's claim, in rounds of one round trip each.
func (x *shardedIndex) claim(ctx context.Context, nowMs, untilMs int64, n int) ([]string, error) {
	moves, due, err := x.firstLook(ctx, nowMs, untilMs, n)
	if err != nil {
		return nil, err
	}
	var got []string
	share := shares(n-len(moves), len(due))
	for round := 0; round < claimRounds && len(share) > 0; round++ {
		fresh, stale, more, counts, cerr := x.claimShards(ctx, due, share, nowMs, untilMs)
		got, moves, err = append(got, fresh...), append(moves, stale...), cerr
		left := n - len(got) - len(moves)
		if err != nil || len(more) == 0 || left <= 0 {
			break
		}
		due, share = more, fill(counts, left)
	}
	got = append(got, x.move(ctx, moves)...)
	if len(got) > 0 {
		return got, nil // what failed is claimed again once its lease lapses
	}
	return nil, err
}

// firstLook claims up to n due members of the index as one set and reads
// the head for up to n shards with due members, in one round trip: all a
// pass sends when nothing is due.
func (x *shardedIndex) firstLook(ctx context.Context, nowMs, untilMs int64, n int) ([]move, []string, error) {
	var earlier *redis.Cmd
	var due *redis.StringSliceCmd
	_, _ = x.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		earlier = pipedScript{claimDue}.queue(ctx, p, []string{x.index}, nowMs, n, untilMs)
		due = x.queueDueShards(ctx, p, nowMs, n)
		return nil
	})
	members, err := pipedScript{claimDue}.again(ctx, x.c, earlier).StringSlice()
	if err != nil {
		return nil, nil, err
	}
	moves := make([]move, len(members))
	for i, m := range members {
		moves[i] = move{member: m, due: untilMs, claimed: true}
	}
	return moves, due.Val(), due.Err()
}

func (x *shardedIndex) queueDueShards(ctx context.Context, c redis.Cmdable, nowMs int64, n int) *redis.StringSliceCmd {
	return c.ZRangeByScore(ctx, x.base, &redis.ZRangeBy{Min: "-inf", Max: strconv.FormatInt(nowMs, 10), Count: int64(n)})
}

// claimShards claims from each shard of due its share, in one round trip:
// fresh are the members of shards at the current level, stale those to
// move up, and more the shards that still hold due members, counts of them.
func (x *shardedIndex) claimShards(ctx context.Context, due []string, share []int, nowMs, untilMs int64) (fresh []string, stale []move, more []string, counts []int64, err error) {
	cmds := make([]*redis.Cmd, len(share))
	_, _ = x.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range share {
			if n > 0 {
				cmds[i] = shardScript.queue(ctx, p, x.keys(due[i]), "claim", idLevel(due[i]), due[i], nowMs, untilMs, n)
			}
		}
		return nil
	})
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		cmd = shardScript.again(ctx, x.c, cmd)
		err = cmp.Or(err, cmd.Err())
		at, members, left := x.claimed(cmd)
		if left > 0 {
			more, counts = append(more, due[i]), append(counts, left)
		}
		if idLevel(due[i]) == at {
			fresh = append(fresh, members...)
			continue
		}
		for _, m := range members {
			stale = append(stale, move{member: m, from: due[i], due: untilMs, claimed: true})
		}
	}
	return fresh, stale, more, counts, err
}

// claimed reads a shard claim's answer: the current level, the members,
// and how many are still due there.
func (x *shardedIndex) claimed(cmd *redis.Cmd) (at int64, members []string, left int64) {
	reply, _ := cmd.Val().([]any)
	if cmd.Err() != nil || len(reply) != 5 {
		return -1, nil, 0
	}
	left, _ = reply[4].(int64)
	at, _ = reply[1].(int64)
	from, _ := reply[2].(int64)
	x.levels.saw(at, from)
	list, _ := reply[3].([]any)
	for _, m := range list {
		if s, ok := m.(string); ok {
			members = append(members, s)
		}
	}
	return at, members, left
}

// shares splits budget over k shards, as evenly as it goes and the first
// ones first; no more shards than budget get a share. A claim's first
// round gives each shard with due members its share so: one full of due
// work takes no more than the others.
func shares(budget, k int) []int {
	k = min(k, budget)
	s := make([]int, k)
	for i := range s {
		s[i] = budget / k
		if i < budget%k {
			s[i]++
		}
	}
	return s
}

// fill splits budget over shards holding counts due members: each as much
// as the others and no more than it holds, the first ones first. A claim's
// later rounds share what the first left so, knowing what each shard holds.
func fill(counts []int64, budget int) []int {
	share := make([]int, len(counts))
	for budget > 0 {
		open := 0
		for i, c := range counts {
			if int64(share[i]) < c {
				open++
			}
		}
		if open == 0 {
			break
		}
		each := max(budget/open, 1)
		for i, c := range counts {
			add := min(each, int(c)-share[i], budget)
			if add > 0 {
				share[i], budget = share[i]+add, budget-add
			}
		}
	}
	return share
}

// move adds each member to its shard at the current level where it is
// absent, due at its due time, and then removes it from where it was found
// while it is still due at that time there. It returns the claimed members
// it added and removed (or found due at another time there: a newer
// write). A member that a shard above where it was found holds already,
// the later write, is removed and left to that copy. A claimed member no
// longer where it was found was unscheduled since (nothing else takes a
// leased member): its new copy is removed again. One whose move failed
// part-way is found again (claimed once its lease lapses, or swept), and
// runs from its shard at the current level.
func (x *shardedIndex) move(ctx context.Context, moves []move) []string {
	if len(moves) == 0 {
		return nil
	}
	if _, _, err := x.readLevels(ctx); err != nil {
		return nil
	}
	held := x.heldAbove(ctx, moves)
	var settled, tries []move
	for _, m := range moves {
		if above, known := held[m]; known && above {
			settled = append(settled, m)
		} else if known {
			tries = append(tries, m)
		}
	}
	added, tried := x.addAll(ctx, tries)
	left := x.removeMoved(ctx, append(settled, tried...))
	var out []string
	for _, m := range tried {
		switch was, known := left[m]; {
		case added[m] < 0 || !known || !m.claimed:
		case was == 0: // unscheduled since it was claimed: the copy added goes too
			id := shardID(added[m], m.member)
			_ = shardScript.Run(ctx, x.c, x.keys(id), "unschedule", added[m], id, m.member, m.due).Err()
		default:
			out = append(out, m.member)
		}
	}
	return out
}

// pipelineMost bounds the commands of one round trip of moves, which may
// be a shard's whole content.
const pipelineMost = 16

// pipelined sends n commands that queue adds, pipelineMost to a round trip.
func (x *shardedIndex) pipelined(ctx context.Context, n int, queue func(p redis.Pipeliner, i int)) {
	for from := 0; from < n; from += pipelineMost {
		_, _ = x.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for i := from; i < min(from+pipelineMost, n); i++ {
				queue(p, i)
			}
			return nil
		})
	}
}

// heldAbove tells, for each move, whether a shard holds its member at a
// level above the one it was found at and below the current one; a move it
// could not tell of is left out.
func (x *shardedIndex) heldAbove(ctx context.Context, moves []move) map[move]bool {
	from, at := x.levels.from.Load(), x.levels.at.Load()
	probes := make([][]*redis.FloatCmd, len(moves))
	x.pipelined(ctx, len(moves), func(p redis.Pipeliner, i int) {
		lo := from
		if moves[i].from != "" {
			lo = max(lo, idLevel(moves[i].from)+1)
		}
		for level := lo; level < at; level++ {
			probes[i] = append(probes[i], p.ZScore(ctx, x.base+":"+shardID(level, moves[i].member), moves[i].member))
		}
	})
	held := make(map[move]bool, len(moves))
	for i, m := range moves {
		if above, known := anyScore(probes[i]); known {
			held[m] = above
		}
	}
	return held
}

// anyScore reports whether one of the ZSCOREs found its member; known is
// false when one failed before any did.
func anyScore(cmds []*redis.FloatCmd) (found, known bool) {
	for _, cmd := range cmds {
		if err := cmd.Err(); err == nil {
			return true, true
		} else if !errors.Is(err, redis.Nil) {
			return false, false
		}
	}
	return false, true
}

// addAll adds each move's member to its shard at the current level where it
// is absent (ZADD NX), and alone again where a level that rose meanwhile
// refused it. It returns the level it added each at (-1: found there), and
// the moves it could tell of.
func (x *shardedIndex) addAll(ctx context.Context, moves []move) (added map[move]int64, tried []move) {
	at := x.levels.at.Load()
	cmds := make([]*redis.Cmd, len(moves))
	x.pipelined(ctx, len(moves), func(p redis.Pipeliner, i int) {
		keys, args := x.scheduleArgs(at, moves[i].member, moves[i].due, "NX")
		cmds[i] = shardScript.queue(ctx, p, keys, args...)
	})
	added = make(map[move]int64, len(moves))
	for i, m := range moves {
		if level, err := x.added(ctx, shardScript.again(ctx, x.c, cmds[i]), at, m); err == nil {
			added[m] = level
			tried = append(tried, m)
		}
	}
	return added, tried
}

// added reads the answer to m's add at level, and adds m alone again where
// a level that rose meanwhile refused it; it returns the level it added m
// at, -1 when it found m there.
func (x *shardedIndex) added(ctx context.Context, cmd *redis.Cmd, level int64, m move) (int64, error) {
	reply, err := cmd.Int64Slice()
	switch {
	case err != nil:
		return -1, err
	case x.heard(reply):
		return addedAt(reply, level), nil
	}
	return x.schedule(ctx, m.member, m.due, "NX")
}

// removeMoved removes each moved member from where it was found while it
// is still due there at its move's due time, and tells what it found of
// those it could answer for: 1 removed, 0 not there, 2 due at another time.
func (x *shardedIndex) removeMoved(ctx context.Context, moves []move) map[move]int64 {
	cmds := make([]*redis.Cmd, len(moves))
	x.pipelined(ctx, len(moves), func(p redis.Pipeliner, i int) {
		m, at := moves[i], strconv.FormatInt(moves[i].due, 10)
		if m.from == "" {
			cmds[i] = unscheduleAt.queue(ctx, p, []string{x.index}, m.member, at)
		} else {
			cmds[i] = x.queueUnschedule(ctx, p, idLevel(m.from), m.member, at)
		}
	})
	left := make(map[move]int64, len(moves))
	for i, m := range moves {
		cmd := unscheduleAt.again(ctx, x.c, shardScript.again(ctx, x.c, cmds[i]))
		if m.from == "" {
			if n, err := cmd.Int64(); err == nil {
				left[m] = n
			}
		} else if reply, err := cmd.Int64Slice(); err == nil && x.heard(reply) {
			left[m] = reply[0]
		}
	}
	return left
}

// sweep moves up the members of one shard of the lowest level below the
// current one that are due after afterMs: what was written there before the
// level rose would otherwise wait for its due time, hours away for a
// refresh ahead, and every unschedule goes to each level that holds
// members. Members due sooner, or leased (claimed within a lease, and being
// moved by their claim), are left to claims. A member unscheduled while it
// is swept may be left in its new shard: it then runs once, at the time it
// was due, and its job finds its work gone (as one whose lease lapsed). A claim
// sweeps one shard, taken in turn (the levels count "sweep{level}"), so a
// level empties in about as many passes as it has shards, over every
// instance, and then no longer counts (see tidy in shardScript).
func (x *shardedIndex) sweep(ctx context.Context, afterMs int64) {
	from, at := x.levels.from.Load(), x.levels.at.Load()
	if from >= at {
		return
	}
	i, err := x.c.HIncrBy(ctx, x.base+":levels", "sweep"+strconv.FormatInt(from, 10), 1).Result()
	if err != nil {
		return
	}
	id := strconv.FormatInt(from, 10) + ":" + strconv.FormatInt((i-1)%(1<<from), 10)
	zs, err := x.c.ZRangeWithScores(ctx, x.base+":"+id, 0, -1).Result()
	if err != nil || len(zs) == 0 {
		_, _, _ = x.readLevels(ctx) // the level may be empty: then from has risen past it
		return
	}
	moves := make([]move, 0, len(zs))
	for _, z := range zs {
		if m, ok := z.Member.(string); ok && int64(z.Score) > afterMs {
			moves = append(moves, move{member: m, from: id, due: int64(z.Score)})
		}
	}
	x.move(ctx, moves) // not claimed: what it moves runs at its own time
}
