package kv

import (
	"cmp"
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow/internal/xcontext"
	"github.com/redis/go-redis/v9"
)

// On Redis a sharded index named "oauth:sys:due" is these keys, the last
// segment of its name in braces, a hash tag: Redis Cluster puts them all in
// one slot, so that a script may touch the head and one shard at once.
//
//	oauth:sys:{due}              head: each shard that holds members, by its earliest due time
//	oauth:sys:{due}:levels       the level writes go to ("at"), the lowest one still holding members
//	                             ("from"), how many shards of each level hold members ("n{level}"),
//	                             and the claims' sweep of each level below "at" ("sweep{level}")
//	oauth:sys:{due}:{level}:{i}  a shard: the members whose hash ends in i, in the level's bits
//
// A level L has 2^L shards. A write goes to its member's shard at the
// current level; a shard that reaches shardRaiseAt members raises the level
// in the same script, so that no shard outgrows Redis's compact encoding
// whatever the number of members (level 0, one shard, for the first
// hundred). Members written before a raise stay in their shard until a
// claim takes them there, due, or sweeps their shard (one a claim), and
// moves them up: a member is only ever run from its shard at the current
// level. Every script touches the head, the levels and one shard, and keeps
// the head exact: a shard with a due member is in the head, due at that
// member's time, so a pass that finds nothing due reads the head alone. A
// write to a shard of a level behind the current one writes nothing and
// answers the level, and the writer tries again there; each Redis store
// keeps the last level it was told per index, so that happens once a level.
//
// The index as one sorted set, "oauth:sys:due", holds what an earlier version
// of the library wrote there. A claim takes from it too and moves what it
// takes to the member's shard.

const (
	// shardRaiseAt is the members a shard holds when its write raises the
	// level: Redis keeps a sorted set of up to 128 (zset-max-listpack-entries)
	// compact, and hash shares are uneven.
	shardRaiseAt = 96
	// shardTopLevel is the last level: 65,536 shards, compact up to about
	// four million members.
	shardTopLevel = 16
	// claimRounds bounds the rounds of one claim: the first claims an even
	// share from each shard with due members, the next what is left from
	// those that hold more, as they hold it; one more is for the shards
	// other claims took from meanwhile.
	claimRounds = 3
)

// shardLevels is what a store last heard of an index's levels.
type shardLevels struct{ at, from atomic.Int64 }

// saw raises the levels to what the store answered (see heard).
func (l *shardLevels) saw(at, from int64) {
	raiseTo(&l.at, at)
	raiseTo(&l.from, from)
}

func raiseTo(v *atomic.Int64, to int64) {
	for cur := v.Load(); to > cur && !v.CompareAndSwap(cur, to); cur = v.Load() {
	}
}

// shardedIndex is one sharded index of a Redis store.
type shardedIndex struct {
	c      redis.UniversalClient
	index  string // the index as one sorted set
	base   string // its name with the hash tag: the head's
	levels *shardLevels
}

func (r *Redis) sharded(index string) *shardedIndex {
	l, _ := r.levels.LoadOrStore(index, new(shardLevels))
	return &shardedIndex{c: r.c, index: index, base: shardBase(index), levels: l.(*shardLevels)}
}

// shardBase is index with its last segment in braces: "oauth:sys:due"
// becomes "oauth:sys:{due}".
func shardBase(index string) string {
	i := strings.LastIndexByte(index, ':') + 1
	return index[:i] + "{" + index[i:] + "}"
}

// shardID names member's shard at level: "{level}:{i}".
func shardID(level int64, member string) string {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	i := h.Sum64() & (1<<level - 1)
	return strconv.FormatInt(level, 10) + ":" + strconv.FormatUint(i, 10)
}

// idLevel is the level of the shard id names.
func idLevel(id string) int64 {
	level, _, _ := strings.Cut(id, ":")
	n, _ := strconv.ParseInt(level, 10, 64)
	return n
}

// keys are the keys a script on shard id touches: the head, the levels, the shard.
func (x *shardedIndex) keys(id string) []string {
	return []string{x.base, x.base + ":levels", x.base + ":" + id}
}

// shardScript is every command on a shard, one script so that a server
// learns it once. KEYS are the head, the levels and the shard; ARGV[1]
// names the command, ARGV[2] the shard's level and ARGV[3] its id. It
// answers {result, at, from}, and a claim its members fourth.
//
//	schedule ARGV[4] due at ARGV[5] (ARGV[6] "NX": only where absent), and raise
//	         the level once the shard holds ARGV[7] members, up to ARGV[8];
//	         result: 1 when it added the member, -1 when the shard's level is
//	         not the current one (it wrote nothing)
//	unschedule ARGV[4], while it is due at ARGV[5] unless that is ""; result: 1 when it
//	         did, 0 when it was not there, 2 when it was, due at another time
//	claim    up to ARGV[6] members due at ARGV[4], moved to ARGV[5]; result: how many;
//	         fifth, how many are still due there
//
// tidy sets the shard's head entry to its earliest due time, or removes it
// once the shard is empty, and counts the shards of each level that hold
// members, so that "from" passes a level left empty.
var shardScript = pipedScript{redis.NewScript(`
local head, levels, shard = KEYS[1], KEYS[2], KEYS[3]
local op, level, id = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local function current()
  local v = redis.call("HMGET", levels, "at", "from")
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0
end
local function tidy()
  local first = redis.call("ZRANGE", shard, 0, 0, "WITHSCORES")
  if first[2] then
    if redis.call("ZADD", head, first[2], id) == 1 then redis.call("HINCRBY", levels, "n" .. level, 1) end
  elseif redis.call("ZREM", head, id) == 1 and redis.call("HINCRBY", levels, "n" .. level, -1) <= 0 then
    local at, from = current()
    while from < at and (tonumber(redis.call("HGET", levels, "n" .. from)) or 0) <= 0 do from = from + 1 end
    redis.call("HSET", levels, "from", from)
  end
end
local at, from = current()
if op == "schedule" then
  if level ~= at then return {-1, at, from} end
  local added
  if ARGV[6] == "NX" then added = redis.call("ZADD", shard, "NX", ARGV[5], ARGV[4])
  else added = redis.call("ZADD", shard, ARGV[5], ARGV[4]) end
  tidy()
  if at < tonumber(ARGV[8]) and redis.call("ZCARD", shard) >= tonumber(ARGV[7]) then
    at = at + 1
    redis.call("HSET", levels, "at", at)
  end
  return {added, at, from}
elseif op == "unschedule" then
  local score = redis.call("ZSCORE", shard, ARGV[4])
  if not score then return {0, at, from} end
  if ARGV[5] ~= "" and tonumber(score) ~= tonumber(ARGV[5]) then return {2, at, from} end
  redis.call("ZREM", shard, ARGV[4])
  tidy()
  at, from = current()
  return {1, at, from}
end
local due = redis.call("ZRANGEBYSCORE", shard, "-inf", ARGV[4], "LIMIT", 0, ARGV[6])
for _, member in ipairs(due) do redis.call("ZADD", shard, ARGV[5], member) end
tidy()
return {#due, at, from, due, redis.call("ZCOUNT", shard, "-inf", ARGV[4])}`)}

var (
	// unscheduleAt removes ARGV[1] from the sorted set KEYS[1] while it is
	// due at ARGV[2]: 1 when it did, 0 when it was not there, 2 when it
	// was, due at another time.
	unscheduleAt = pipedScript{redis.NewScript(`
local score = redis.call("ZSCORE", KEYS[1], ARGV[1])
if not score then return 0 end
if tonumber(score) ~= tonumber(ARGV[2]) then return 2 end
return redis.call("ZREM", KEYS[1], ARGV[1])`)}
)

// pipedScript is a script that a pipeline sends by its SHA1 (EVALSHA): a
// short command whatever the script's length. A command the server answers
// NOSCRIPT (it never held the script, or flushed it) is sent again alone by
// again, as EVAL, which loads it.
type pipedScript struct{ *redis.Script }

func (s pipedScript) queue(ctx context.Context, p redis.Pipeliner, keys []string, args ...any) *redis.Cmd {
	return s.EvalSha(ctx, p, keys, args...)
}

// again is cmd, or the answer to it sent again alone when the server did
// not hold its script.
func (s pipedScript) again(ctx context.Context, c redis.Scripter, cmd *redis.Cmd) *redis.Cmd {
	a := cmd.Args() // evalsha, sha1, len(keys), keys..., args...
	if !redis.HasErrorPrefix(cmd.Err(), "NOSCRIPT") || len(a) < 3 || a[1] != s.Hash() {
		return cmd
	}
	n, _ := a[2].(int)
	keys := make([]string, n)
	for i := range keys {
		keys[i], _ = a[3+i].(string)
	}
	return s.Eval(ctx, c, keys, a[3+n:]...)
}

var _ Sharder = (*Redis)(nil)

// ScheduleSharded sets member's due time in its shard at the current level.
func (r *Redis) ScheduleSharded(ctx context.Context, index, member string, due time.Time) error {
	_, err := r.sharded(index).schedule(xcontext.OrBackground(ctx), member, due.UnixMilli(), "")
	return err
}

// UnscheduleSharded removes member from its shard at every level that holds
// members (an earlier level keeps what was written before the level rose).
func (r *Redis) UnscheduleSharded(ctx context.Context, index, member string) error {
	x := r.sharded(index)
	return x.unschedule(xcontext.OrBackground(ctx), member, x.levels.from.Load(), "")
}

// schedule writes member due at dueMs in its shard at the level last heard
// of, and again at the level the store answers while that one is behind;
// mode "NX" adds it only where absent. It reports the level it wrote at,
// -1 when it added nothing.
func (x *shardedIndex) schedule(ctx context.Context, member string, dueMs int64, mode string) (level int64, err error) {
	for range shardTopLevel + 2 {
		level = x.levels.at.Load()
		keys, args := x.scheduleArgs(level, member, dueMs, mode)
		reply, err := shardScript.Run(ctx, x.c, keys, args...).Int64Slice()
		if err != nil {
			return -1, err
		}
		if x.heard(reply) {
			return addedAt(reply, level), nil
		}
	}
	return -1, errors.New("kv: the sharded index's level kept rising under the write")
}

// addedAt is level when a schedule's reply says it added the member, -1
// when it found it there (ZADD NX).
func addedAt(reply []int64, level int64) int64 {
	if reply[0] == 1 {
		return level
	}
	return -1
}

func (x *shardedIndex) scheduleArgs(level int64, member string, dueMs int64, mode string) ([]string, []any) {
	id := shardID(level, member)
	return x.keys(id), []any{"schedule", level, id, member, dueMs, mode, shardRaiseAt, shardTopLevel}
}

// heard notes the levels a script answered, {result, at, from}, and
// reports whether it ran at the current level (its result is not -1). The
// levels only rise, and answers may come back out of order, so a store
// keeps the highest it heard of; but an answer that refused a write is
// taken as it is, so that a store whose levels were lost (the keys deleted)
// writes at level 0 again rather than never.
func (x *shardedIndex) heard(reply []int64) bool {
	switch {
	case len(reply) != 3:
		return false
	case reply[0] < 0:
		x.levels.at.Store(reply[1])
		x.levels.from.Store(reply[2])
		return false
	}
	x.levels.saw(reply[1], reply[2])
	return true
}

// unschedule removes member from its shard at each level from lo up to the
// current one, in one round trip, and again for the levels a reply shows
// were added meanwhile; where onlyAt is not "", only while it is due then.
func (x *shardedIndex) unschedule(ctx context.Context, member string, lo int64, onlyAt string) error {
	for hi := x.levels.at.Load(); lo <= hi; hi = x.levels.at.Load() {
		var cmds []*redis.Cmd
		_, _ = x.c.Pipelined(ctx, func(p redis.Pipeliner) error {
			for level := lo; level <= hi; level++ {
				cmds = append(cmds, x.queueUnschedule(ctx, p, level, member, onlyAt))
			}
			return nil
		})
		for _, cmd := range cmds {
			reply, err := shardScript.again(ctx, x.c, cmd).Int64Slice()
			if err != nil {
				return err
			}
			x.heard(reply)
		}
		lo = max(hi+1, x.levels.from.Load())
	}
	return nil
}

func (x *shardedIndex) queueUnschedule(ctx context.Context, p redis.Pipeliner, level int64, member, onlyAt string) *redis.Cmd {
	id := shardID(level, member)
	return shardScript.queue(ctx, p, x.keys(id), "unschedule", level, id, member, onlyAt)
}

// ScoreSharded is member's due time: in its shard at the highest level
// that holds it, else in the index as one set. The reads go from the index
// as one set up the levels, in one round trip, so a member moving up
// meanwhile (added above before it is removed below) is found.
func (r *Redis) ScoreSharded(ctx context.Context, index, member string) (int64, bool, error) {
	ctx = xcontext.OrBackground(ctx)
	x := r.sharded(index)
	from, at, err := x.readLevels(ctx)
	if err != nil {
		return 0, false, err
	}
	cmds := make([]*redis.FloatCmd, 0, at-from+2)
	_, err = x.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		cmds = append(cmds, p.ZScore(ctx, x.index, member))
		for level := from; level <= at; level++ {
			cmds = append(cmds, p.ZScore(ctx, x.base+":"+shardID(level, member), member))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return 0, false, err
	}
	var ms int64
	var ok bool
	for _, cmd := range cmds {
		if cmd.Err() == nil {
			ms, ok = int64(cmd.Val()), true
		}
	}
	return ms, ok, nil
}

// readLevels reads the index's levels from the store.
func (x *shardedIndex) readLevels(ctx context.Context) (from, at int64, err error) {
	v, err := x.c.HMGet(ctx, x.base+":levels", "from", "at").Result()
	if err != nil {
		return 0, 0, err
	}
	for i, p := range []*int64{&from, &at} {
		if s, ok := v[i].(string); ok {
			*p, _ = strconv.ParseInt(s, 10, 64)
		}
	}
	x.levels.saw(at, from)
	return from, at, nil
}

// MembersSharded lists every member with its due time: the shards the head
// names, and the index as one set, read first; a member in two places is
// given as its shard at the highest level holds it.
func (r *Redis) MembersSharded(ctx context.Context, index string) (map[string]int64, error) {
	ctx = xcontext.OrBackground(ctx)
	x := r.sharded(index)
	out, err := r.Members(ctx, x.index)
	if err != nil {
		return nil, err
	}
	ids, err := x.c.ZRange(ctx, x.base, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	slices.SortFunc(ids, func(a, b string) int { return cmp.Compare(idLevel(a), idLevel(b)) })
	cmds := make([]*redis.ZSliceCmd, len(ids))
	_, err = x.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.ZRangeWithScores(ctx, x.base+":"+id, 0, -1)
		}
		return nil
	})
	for _, cmd := range cmds {
		for _, z := range cmd.Val() {
			if m, ok := z.Member.(string); ok {
				out[m] = int64(z.Score)
			}
		}
	}
	return out, err
}

// queueOp adds a sharded op to a batch at the levels last heard of, a
// schedule at the current level and an unschedule at each level that holds
// members, and returns what reads its result once the batch has run.
func (x *shardedIndex) queueOp(ctx context.Context, p redis.Pipeliner, op *Op) (read func()) {
	at := x.levels.at.Load()
	if op.Kind == OpScheduleSharded {
		keys, args := x.scheduleArgs(at, op.Member, op.Due.UnixMilli(), "")
		cmd := shardScript.queue(ctx, p, keys, args...)
		return func() { x.readOp(ctx, op, at, cmd) }
	}
	var cmds []*redis.Cmd
	for level := x.levels.from.Load(); level <= at; level++ {
		cmds = append(cmds, x.queueUnschedule(ctx, p, level, op.Member, ""))
	}
	return func() { x.readOp(ctx, op, at, cmds...) }
}

// readOp takes a sharded op's result from its commands, sent at level at. A
// level that rose since costs the op a round trip of its own, after the
// batch: the schedule again at the current level, the unschedule at the
// levels added.
func (x *shardedIndex) readOp(ctx context.Context, op *Op, at int64, cmds ...*redis.Cmd) {
	current := true
	for _, cmd := range cmds {
		reply, err := shardScript.again(ctx, x.c, cmd).Int64Slice()
		op.Err = cmp.Or(op.Err, err)
		current = x.heard(reply) && current
	}
	switch {
	case op.Err != nil:
	case op.Kind == OpScheduleSharded && !current:
		_, op.Err = x.schedule(ctx, op.Member, op.Due.UnixMilli(), "")
	case op.Kind == OpUnscheduleSharded && x.levels.at.Load() > at:
		op.Err = x.unschedule(ctx, op.Member, at+1, "")
	}
}
