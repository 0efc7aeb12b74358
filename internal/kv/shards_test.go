package kv

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/redis/go-redis/v9"
)

// The Redis layout of a sharded index (shards_redis.go). What any store
// owes of it, the conformance suite checks (kvtest, "ShardedIndex").

var shardT0 = time.Unix(1_700_000_000, 0)

// eachRedis runs fn on miniredis and on the real Redis, under a prefix of
// the test's own there.
func eachRedis(t *testing.T, fn func(t *testing.T, c redis.UniversalClient, prefix string)) {
	t.Run("miniredis", func(t *testing.T) {
		t.Parallel()
		_, c := redistest.Mini(t)
		fn(t, c, "")
	})
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		c := redistest.Real(t)
		fn(t, c, redistest.Prefix(t, c))
	})
}

func shardMember(i int) string { return fmt.Sprintf("ahead:acme:user-%05d", i) }

// scheduleMembers schedules members from..to-1 of shardMember due at due.
func scheduleMembers(t *testing.T, r *Redis, index string, from, to int, due time.Time) {
	t.Helper()
	for i := from; i < to; i++ {
		if err := r.ScheduleSharded(context.Background(), index, shardMember(i), due); err != nil {
			t.Fatal(err)
		}
	}
}

// checkHead checks the head against the shards: each shard that holds
// members is in the head due at its earliest member, no empty one is, and
// the levels count them. A head entry later than its shard's earliest
// member would leave that member unclaimed.
func checkHead(t *testing.T, c redis.UniversalClient, index string) {
	t.Helper()
	ctx := context.Background()
	base := shardBase(index)
	head, err := c.ZRangeWithScores(ctx, base, 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int64{}
	for _, z := range head {
		id := z.Member.(string)
		first, err := c.ZRangeWithScores(ctx, base+":"+id, 0, 0).Result()
		if err != nil || len(first) == 0 || first[0].Score != z.Score {
			t.Errorf("head entry %s due at %.0f; its shard's earliest: %v, %v", id, z.Score, first, err)
		}
		count["n"+strconv.FormatInt(idLevel(id), 10)]++
	}
	levels, err := c.HGetAll(ctx, base+":levels").Result()
	if err != nil {
		t.Fatal(err)
	}
	for field, v := range levels {
		if n, _ := strconv.ParseInt(v, 10, 64); strings.HasPrefix(field, "n") && n != count[field] {
			t.Errorf("levels say %s = %d; the head holds %d shards of that level", field, n, count[field])
		}
	}
	keys, _ := c.Keys(ctx, base+":*").Result()
	if len(keys) != len(head)+min(len(levels), 1) {
		t.Errorf("%d keys under %s: the head names %d shards", len(keys), base, len(head))
	}
}

// Shards stay in Redis's compact encoding as the index grows: no shard
// holds more than shardRaiseAt members, the level rose to keep it so, and
// the head names every shard at its earliest due time.
func TestShardsStayCompact(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	ctx := context.Background()
	prefix := redistest.Prefix(t, c)
	r := NewRedis(c)
	index := prefix + "due"
	const n = 3000
	scheduleMembers(t, r, index, 0, n, shardT0)
	keys, err := c.Keys(ctx, shardBase(index)+":*:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	for _, key := range keys {
		size, enc := c.ZCard(ctx, key).Val(), c.ObjectEncoding(ctx, key).Val()
		if size > shardRaiseAt || enc != "listpack" {
			t.Errorf("%s holds %d members, encoded %s; want at most %d, listpack", key, size, enc, shardRaiseAt)
		}
		total += size
	}
	if total != n {
		t.Errorf("the shards hold %d members, want %d", total, n)
	}
	if at := r.sharded(index).levels.at.Load(); at < 5 {
		t.Errorf("level %d for %d members: shards of %d", at, n, n>>at)
	}
	checkHead(t, c, index)
}

// commandCounter counts the commands sent, pipelined ones too, and the
// round trips.
type commandCounter struct{ commands, trips atomic.Int64 }

func (h *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			h.commands.Add(1)
			h.trips.Add(1)
		}
		return next(ctx, cmd)
	}
}
func (h *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds[0]) {
			h.commands.Add(int64(len(cmds)))
			h.trips.Add(1)
		}
		return next(ctx, cmds)
	}
}

// A pass that finds nothing due sends the same two commands in one round
// trip whatever the index holds, once the levels below the current one are
// swept: the claim of the index as one set and the read of the head, never
// a shard.
func TestShardedIdlePassIsFlat(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		for _, n := range []int{10, 2000} {
			hook := &commandCounter{}
			counted := redis.NewClient(c.(*redis.Client).Options())
			counted.AddHook(hook)
			defer counted.Close()
			r, index := NewRedis(counted), prefix+"due"+strconv.Itoa(n)
			scheduleMembers(t, r, index, 0, n, shardT0.Add(8*time.Hour))
			passes := drain(t, r, index)
			hook.commands.Store(0)
			hook.trips.Store(0)
			got, err := r.ClaimSharded(ctx, index, shardT0, time.Minute, 256)
			if err != nil || len(got) != 0 {
				t.Fatalf("idle claim with %d members: %q, %v", n, got, err)
			}
			if cmds, trips := hook.commands.Load(), hook.trips.Load(); cmds != 2 || trips != 1 {
				t.Errorf("with %d members not due, a pass sent %d commands in %d round trips; want 2 in 1", n, cmds, trips)
			}
			t.Logf("%d members: level %d, swept in %d passes", n, r.sharded(index).levels.at.Load(), passes)
		}
	})
}

// drain runs idle passes until the levels below the current one are swept
// empty, at most one a shard, and returns how many it ran: one at least,
// which teaches the server the scripts.
func drain(t *testing.T, r *Redis, index string) int {
	t.Helper()
	x := r.sharded(index)
	for passes := 1; ; passes++ {
		if _, err := r.ClaimSharded(context.Background(), index, shardT0, time.Minute, 256); err != nil {
			t.Fatal(err)
		}
		if _, _, err := x.readLevels(context.Background()); err != nil {
			t.Fatal(err)
		}
		if x.levels.from.Load() == x.levels.at.Load() {
			return passes
		}
		if passes > 1<<x.levels.at.Load() {
			t.Fatalf("%d idle passes leave levels %d to %d", passes, x.levels.from.Load(), x.levels.at.Load())
		}
	}
}

// shardOf finds members of shard id (at its level) among shardMember(from...).
func shardOf(id string, from, count int) []string {
	var out []string
	for i := from; len(out) < count; i++ {
		if shardID(idLevel(id), shardMember(i)) == id {
			out = append(out, shardMember(i))
		}
	}
	return out
}

// One shard full of due work holds back no other: a claim takes a share
// from each shard with due members, though every member of the full one
// was due before the other's.
func TestShardedClaimIsFairAcrossShards(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r, index := NewRedis(c), prefix+"due"
		scheduleMembers(t, r, index, 0, shardRaiseAt, shardT0.Add(time.Hour)) // raises the level to 1: two shards
		if at := r.sharded(index).levels.at.Load(); at != 1 {
			t.Fatalf("level %d, want 1", at)
		}
		busy, quiet := shardOf("1:0", 1000, 60), shardOf("1:1", 1000, 1)
		for i, m := range busy {
			if err := r.ScheduleSharded(ctx, index, m, shardT0.Add(-time.Hour+time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		if err := r.ScheduleSharded(ctx, index, quiet[0], shardT0.Add(-time.Second)); err != nil {
			t.Fatal(err)
		}
		got, err := r.ClaimSharded(ctx, index, shardT0, time.Minute, 10)
		if err != nil || len(got) != 10 {
			t.Fatalf("claim: %q, %v; want 10 members", got, err)
		}
		if !contains(got, quiet[0]) {
			t.Errorf("a claim of 10 took %q: none of the shard that holds one due member behind 60 in another", got)
		}
		checkHead(t, c, index)
	})
}

func contains(ms []string, m string) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

// What an earlier version wrote to the index as one sorted set, and goes on
// writing there during a rolling deploy, is claimed and moved to the
// shards: each due member once between racing claimers, never one that is
// not due. A member the shards hold too is claimed at most once: its copy
// in the shards is the later write and wins, unless the level rose under
// the move (TestShardedLaterWriteWins).
func TestShardedClaimMovesTheEarlierLayout(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r, index := NewRedis(c), prefix+"due"
		scheduleMembers(t, r, index, 0, 200, shardT0.Add(time.Hour)) // in the shards, not due: 0-99 are in the old set too
		old := func(from, to int, due time.Time) {
			for i := from; i < to; i++ {
				if err := c.ZAdd(ctx, index, redis.Z{Score: float64(due.UnixMilli()), Member: shardMember(i)}).Err(); err != nil {
					t.Error(err)
				}
			}
		}
		old(0, 100, shardT0.Add(-time.Minute))   // due in the old set, kept in the shards
		old(300, 400, shardT0.Add(-time.Minute)) // due, in the old set only
		old(400, 450, shardT0.Add(time.Hour))    // not due yet
		var mu sync.Mutex
		taken := map[string]int{}
		var wg sync.WaitGroup
		wg.Go(func() { old(450, 500, shardT0.Add(-time.Second)) }) // an old instance writes on
		for range 6 {
			wg.Go(func() {
				for _, m := range claimAllSharded(t, NewRedis(c), index, shardT0) {
					mu.Lock()
					taken[m]++
					mu.Unlock()
				}
			})
		}
		waitfor.Group(t, &wg, "the racing claims")
		for _, m := range claimAllSharded(t, r, index, shardT0) { // what the old instance wrote last
			taken[m]++
		}
		for i := range 500 {
			m, want := shardMember(i), 0
			if i >= 300 && i < 400 || i >= 450 {
				want = 1
			}
			if taken[m] != want && (i >= 100 || taken[m] > 1) {
				t.Errorf("%s claimed %d times, want %d", m, taken[m], want)
			}
		}
		left, err := c.ZCard(ctx, index).Result()
		if err != nil || left != 50 {
			t.Errorf("the old set holds %d members, %v; want the 50 not due yet", left, err)
		}
		later := map[string]int{}
		for _, m := range claimAllSharded(t, r, index, shardT0.Add(2*time.Hour)) {
			later[m]++
		}
		for i := range 500 {
			if m := shardMember(i); later[m] != 1 && (i < 200 || i >= 300) {
				t.Errorf("later, %s claimed %d times, want once", m, later[m])
			}
		}
		if len(later) != 400 {
			t.Errorf("later, %d members claimed, want 400", len(later))
		}
		checkHead(t, c, index)
	})
}

// claimAllSharded claims at now until a claim takes nothing; claims that
// never run dry stop it, failed, after ten thousand members.
func claimAllSharded(t *testing.T, r *Redis, index string, now time.Time) []string {
	t.Helper()
	var all []string
	for len(all) < 10000 {
		got, err := r.ClaimSharded(context.Background(), index, now, time.Minute, 16)
		if err != nil {
			t.Error(err)
			return all
		}
		if len(got) == 0 {
			return all
		}
		all = append(all, got...)
	}
	t.Error("claims took ten thousand members and were still taking more")
	return all
}

// A store that last heard of a lower level never writes there: the script
// refuses the write, and the store writes again at the level it answers.
func TestShardedWriteCatchesUpWithTheLevel(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		index := prefix + "due"
		behind := NewRedis(c)
		if err := behind.ScheduleSharded(ctx, index, "first", shardT0); err != nil { // hears of level 0
			t.Fatal(err)
		}
		scheduleMembers(t, NewRedis(c), index, 0, 3*shardRaiseAt, shardT0) // another store raises it
		ops := []*Op{{Kind: OpScheduleSharded, Key: index, Member: "late", Due: shardT0}}
		RunBatch(ctx, behind, ops...)
		if ops[0].Err != nil {
			t.Fatal(ops[0].Err)
		}
		at := behind.sharded(index).levels.at.Load()
		if at < 2 {
			t.Fatalf("the store that was behind now says level %d", at)
		}
		if n, err := c.ZScore(ctx, shardBase(index)+":"+shardID(at, "late"), "late").Result(); err != nil || n != float64(shardT0.UnixMilli()) {
			t.Errorf("the late write is not in its shard at level %d: %v, %v", at, n, err)
		}
		if got := claimAllSharded(t, NewRedis(c), index, shardT0); len(got) != 3*shardRaiseAt+2 {
			t.Errorf("%d members claimed, want %d", len(got), 3*shardRaiseAt+2)
		}
		checkHead(t, c, index)
	})
}

// The head stays exact through every kind of write at once: schedules,
// reschedules, unschedules and claims raced by several stores.
func TestShardedHeadStaysExact(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		index := prefix + "due"
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				r := NewRedis(c)
				for i := range 150 {
					m := shardMember(i*4 + w)
					_ = r.ScheduleSharded(ctx, index, m, shardT0.Add(time.Duration(i-75)*time.Second))
					switch i % 5 {
					case 1:
						_ = r.ScheduleSharded(ctx, index, m, shardT0.Add(time.Hour))
					case 2:
						_ = r.UnscheduleSharded(ctx, index, m)
					case 3:
						_, _ = r.ClaimSharded(ctx, index, shardT0, time.Minute, 8)
					}
				}
			})
		}
		waitfor.Group(t, &wg, "the racing writes")
		checkHead(t, c, index)
	})
}

// A server that forgot the scripts (SCRIPT FLUSH, a restart) still answers a
// batch and a claim: a command it answers NOSCRIPT is sent again alone.
func TestShardedScriptsAfterAFlush(t *testing.T) {
	t.Parallel()
	_, c := redistest.Mini(t)
	ctx := context.Background()
	r := NewRedis(c)
	scheduleMembers(t, r, "due", 0, 10, shardT0)
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ops := []*Op{{Kind: OpScheduleSharded, Key: "due", Member: "new", Due: shardT0}, {Kind: OpUnscheduleSharded, Key: "due", Member: shardMember(0)}}
	RunBatch(ctx, r, ops...)
	if ops[0].Err != nil || ops[1].Err != nil {
		t.Fatalf("batch after a flush: %v, %v", ops[0].Err, ops[1].Err)
	}
	if err := c.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if got := claimAllSharded(t, r, "due", shardT0); len(got) != 10 || contains(got, shardMember(0)) || !contains(got, "new") {
		t.Errorf("claimed after a flush: %q", got)
	}
}

// Idle passes sweep what was written before the level rose up to the
// current level, in as many passes as the levels below have shards: every
// member is then in its shard at the current level alone, due when it was,
// and an unschedule is one command again.
func TestShardedSweepBringsEveryMemberUp(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		hook := &commandCounter{}
		counted := redis.NewClient(c.(*redis.Client).Options())
		counted.AddHook(hook)
		defer counted.Close()
		r, index := NewRedis(counted), prefix+"due"
		const n = 1000
		for i := range n {
			if err := r.ScheduleSharded(ctx, index, shardMember(i), shardT0.Add(8*time.Hour+time.Duration(i)*time.Second)); err != nil {
				t.Fatal(err)
			}
		}
		passes := drain(t, r, index)
		at := r.sharded(index).levels.at.Load()
		if passes > 1<<at {
			t.Errorf("%d passes to sweep the levels below %d", passes, at)
		}
		for i := range n {
			m := shardMember(i)
			for level := int64(0); level <= at; level++ {
				got, err := c.ZScore(ctx, shardBase(index)+":"+shardID(level, m), m).Result()
				if want := level == at; (err == nil) != want || want && got != float64(shardT0.Add(8*time.Hour+time.Duration(i)*time.Second).UnixMilli()) {
					t.Fatalf("%s at level %d (the current one: %v): %v, %v", m, level, want, got, err)
				}
			}
		}
		hook.commands.Store(0)
		if err := r.UnscheduleSharded(ctx, index, shardMember(0)); err != nil {
			t.Fatal(err)
		}
		if n := hook.commands.Load(); n != 1 {
			t.Errorf("an unschedule sent %d commands once the levels below were swept, want 1", n)
		}
		checkHead(t, c, index)
	})
}

// A member both in the index as one sorted set and in a shard, at the
// current level or below, is the shard's: its copy in the old set is
// dropped when it comes due, and the member runs at the shard's time.
func TestShardedLaterWriteWins(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r, index := NewRedis(c), prefix+"due"
		scheduleMembers(t, r, index, 0, 2*shardRaiseAt, shardT0.Add(time.Hour)) // levels 0 and 1
		for i := range 2 * shardRaiseAt {
			if err := c.ZAdd(ctx, index, redis.Z{Score: float64(shardT0.UnixMilli()), Member: shardMember(i)}).Err(); err != nil {
				t.Fatal(err)
			}
		}
		got, err := r.ClaimSharded(ctx, index, shardT0, time.Minute, 4*shardRaiseAt)
		if err != nil || len(got) != 0 {
			t.Fatalf("claimed %d members due in the old set but later in the shards, %v; want none", len(got), err)
		}
		if n, err := c.ZCard(ctx, index).Result(); err != nil || n != 0 {
			t.Errorf("the old set holds %d members, %v; want none", n, err)
		}
		if got := claimAllSharded(t, r, index, shardT0.Add(time.Hour)); len(got) != 2*shardRaiseAt {
			t.Errorf("%d members due at the shards' time, want %d", len(got), 2*shardRaiseAt)
		}
	})
}

// A claim takes what is due up to its count in a few rounds, however the
// due members fall over the shards: an even share from each, then what the
// fullest hold. (Real Redis only: a pipeline this long outgrows the
// in-memory connection to miniredis, which blocks until either side reads.)
func TestShardedClaimTakesAFullBatch(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	ctx := context.Background()
	r, index := NewRedis(c), redistest.Prefix(t, c)+"due"
	scheduleMembers(t, r, index, 0, 3000, shardT0.Add(8*time.Hour)) // level 5 and more: 32 shards and more
	drain(t, r, index)
	for rep := range 20 {
		ops := make([]*Op, 64)
		for j := range ops {
			ops[j] = &Op{Kind: OpScheduleSharded, Key: index, Member: fmt.Sprint("batch:", rep, ":", j), Due: shardT0.Add(-time.Hour)}
		}
		RunBatch(ctx, r, ops...)
		if got, err := r.ClaimSharded(ctx, index, shardT0, time.Minute, 64); err != nil || len(got) != 64 {
			t.Fatalf("batch %d: a claim of 64 took %d, %v, with 64 due", rep, len(got), err)
		}
		for _, op := range ops {
			op.Kind = OpUnscheduleSharded
		}
		RunBatch(ctx, r, ops...)
	}
}

func TestFillSharesWhatEachHolds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		counts []int64
		budget int
		want   []int
	}{
		{[]int64{5, 1, 2}, 6, []int{3, 1, 2}},
		{[]int64{5, 5, 5}, 4, []int{2, 1, 1}},
		{[]int64{1, 1}, 10, []int{1, 1}},
		{[]int64{0, 9}, 3, []int{0, 3}},
	} {
		if got := fill(tc.counts, tc.budget); !slices.Equal(got, tc.want) {
			t.Errorf("fill(%v, %d) = %v, want %v", tc.counts, tc.budget, got, tc.want)
		}
	}
}

// beforeScript runs do once, just before the first pipeline that sends an
// EVALSHA of script whose arguments hold member: a write of another
// instance that lands between two steps of a move.
type beforeScript struct {
	script *redis.Script
	member string
	do     func()
	once   sync.Once
}

func (h *beforeScript) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *beforeScript) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *beforeScript) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			if a := cmd.Args(); len(a) > 1 && a[0] == "evalsha" && a[1] == h.script.Hash() && slices.Contains(a, any(h.member)) {
				h.once.Do(h.do)
			}
		}
		return next(ctx, cmds)
	}
}

// hooked is a client of c's server that runs h.
func hooked(t *testing.T, c redis.UniversalClient, h redis.Hook) *redis.Client {
	hc := redis.NewClient(c.(*redis.Client).Options())
	hc.AddHook(h)
	t.Cleanup(func() { _ = hc.Close() })
	return hc
}

// A move removes a member where it was claimed only while that claim's
// lease is still its due time there: an earlier version's instance that
// wrote the member again in between keeps its write, claimed at its own
// time.
func TestShardedMoveKeepsANewerWrite(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		index, later := prefix+"due", float64(shardT0.Add(time.Hour).UnixMilli())
		if err := c.ZAdd(ctx, index, redis.Z{Score: float64(shardT0.UnixMilli()), Member: "m"}).Err(); err != nil {
			t.Fatal(err)
		}
		h := &beforeScript{script: unscheduleAt.Script, member: "m", do: func() {
			_ = c.ZAdd(ctx, index, redis.Z{Score: later, Member: "m"}).Err() // the old instance writes it again
		}}
		got, err := NewRedis(hooked(t, c, h)).ClaimSharded(ctx, index, shardT0, time.Minute, 10)
		if err != nil || !slices.Equal(got, []string{"m"}) {
			t.Fatalf("claimed %q, %v; want m, claimed before the write", got, err)
		}
		if at, err := c.ZScore(ctx, index, "m").Result(); err != nil || at != later {
			t.Errorf("the old set holds m due at %v, %v; want the newer write's %v", at, err, later)
		}
	})
}

// A claimed member unscheduled before its move completes is not run, and
// not left in the shard it was moved to.
func TestShardedUnscheduleDuringAMoveHolds(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		index, plain := prefix+"due", NewRedis(c)
		if err := plain.ScheduleSharded(ctx, index, "m", shardT0); err != nil { // at level 0, due
			t.Fatal(err)
		}
		scheduleMembers(t, plain, index, 1, shardRaiseAt, shardT0.Add(8*time.Hour)) // the level rises to 1
		h := &beforeScript{script: shardScript.Script, member: "m", do: func() {
			if err := plain.UnscheduleSharded(ctx, index, "m"); err != nil { // lands before the move's add
				t.Error(err)
			}
		}}
		r := NewRedis(hooked(t, c, h))
		if _, _, err := r.sharded(index).readLevels(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := r.ClaimSharded(ctx, index, shardT0, time.Minute, 10)
		if err != nil || len(got) != 0 {
			t.Errorf("claimed %q, %v; want nothing: m was unscheduled before its move", got, err)
		}
		if _, ok, err := plain.ScoreSharded(ctx, index, "m"); ok || err != nil {
			t.Errorf("m is still in the index (%v)", err)
		}
	})
}

// A sweep moves up what is due after a claim's lease, and leaves a member
// leased in its shard (claimed, its claim moving it) to that claim.
func TestShardedSweepLeavesLeasedMembers(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r, index := NewRedis(c), prefix+"due"
		scheduleMembers(t, r, index, 0, shardRaiseAt, shardT0.Add(8*time.Hour)) // all in shard 0:0, the level rises to 1
		lease := float64(shardT0.Add(time.Minute).UnixMilli())
		shard := shardBase(index) + ":0:0"
		if err := c.ZAdd(ctx, shard, redis.Z{Score: lease, Member: "leased"}).Err(); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ClaimSharded(ctx, index, shardT0, time.Minute, 10); err != nil { // sweeps 0:0
			t.Fatal(err)
		}
		if at, err := c.ZScore(ctx, shard, "leased").Result(); err != nil || at != lease {
			t.Errorf("the leased member in the swept shard: %v, %v; want it left, due at %v", at, err, lease)
		}
		if n, err := c.ZCard(ctx, shard).Result(); err != nil || n != 1 {
			t.Errorf("the swept shard holds %d members, %v; want the leased one only", n, err)
		}
	})
}

// An unschedule removes a member written before the level rose from the
// shard it was written to, though writes go to the level above now.
func TestShardedUnscheduleReachesLowerLevels(t *testing.T) {
	t.Parallel()
	eachRedis(t, func(t *testing.T, c redis.UniversalClient, prefix string) {
		ctx := context.Background()
		r, index := NewRedis(c), prefix+"due"
		scheduleMembers(t, r, index, 0, shardRaiseAt, shardT0.Add(time.Hour)) // in shard 0:0; the level rises to 1
		for i := range shardRaiseAt {
			if err := r.UnscheduleSharded(ctx, index, shardMember(i)); err != nil {
				t.Fatal(err)
			}
		}
		if got := claimAllSharded(t, r, index, shardT0.Add(2*time.Hour)); len(got) != 0 {
			t.Errorf("%d unscheduled members claimed at their due time", len(got))
		}
		if n, err := c.Exists(ctx, shardBase(index)+":0:0").Result(); err != nil || n != 0 {
			t.Errorf("shard 0:0 is still there (%d, %v)", n, err)
		}
	})
}
