package kv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/xcontext"
	"github.com/redis/go-redis/v9"
)

// A batch is a list of single-key commands that must run in the order given,
// sent in one round trip where the store can: on one Redis node a pipeline on
// one connection runs them in order. A batch is not atomic: each command
// stands alone, a later one runs even when an earlier one failed or answered
// "no", so a guard never relies on one; it only saves round trips between
// commands that would have been sent one after another anyway. Where the
// store cannot keep the order (Cluster spreads keys over nodes) or has no
// round trips (Memory), the commands run one by one.

// OpKind is what an Op does.
type OpKind int

// The kinds of Op, each the Store method (or the function) of the same
// name; the result fields each one sets.
const (
	OpGet               OpKind = iota // Got, or errs.NotFound in Err
	OpSetNX                           // OK: set
	OpSet                             //
	OpCompareAndExpire                // OK: key held Value
	OpCompareAndDelete                // OK: key held Value
	OpSchedule                        //
	OpUnschedule                      //
	OpCompareAndSwap                  // OK: key held Old, and now holds Value
	OpScheduleSharded                 // ScheduleSharded
	OpUnscheduleSharded               // UnscheduleSharded
)

// KeepTTL, as an OpCompareAndSwap's TTL, keeps the time to live the key
// has. Run alone (on a store that cannot batch), the op reads it first with
// TTL: a change to it between that read and the swap is not kept.
const KeepTTL time.Duration = -1

// Op is one command of a batch, and its result once the batch has run.
type Op struct {
	Kind   OpKind
	Key    string // the index, for the kinds that schedule and unschedule
	Value  []byte // to store, or to compare with
	Old    []byte // what OpCompareAndSwap compares with
	TTL    time.Duration
	Member string
	Due    time.Time

	OK  bool
	Got []byte
	Err error
}

// RunBatch runs ops on s in order, in one round trip where s can.
func RunBatch(ctx context.Context, s Store, ops ...*Op) {
	if b, ok := s.(Batcher); ok && b.RunInOrder(ctx, ops) {
		return
	}
	for _, op := range ops {
		op.Run(ctx, s)
	}
}

// InOneTrip reports whether RunBatch sends a batch to s in one round trip,
// in order (Pipeliner).
func InOneTrip(s Store) bool {
	p, ok := s.(Pipeliner)
	return ok && p.Pipelines()
}

// Run runs op alone on s, as the Store method of its kind.
func (op *Op) Run(ctx context.Context, s Store) {
	switch op.Kind {
	case OpGet:
		op.Got, op.Err = s.Get(ctx, op.Key)
	case OpSetNX:
		op.OK, op.Err = s.SetNX(ctx, op.Key, op.Value, op.TTL)
	case OpSet:
		op.Err = s.Set(ctx, op.Key, op.Value, op.TTL)
	case OpCompareAndExpire:
		op.OK, op.Err = s.CompareAndExpire(ctx, op.Key, op.Value, op.TTL)
	case OpCompareAndDelete:
		op.OK, op.Err = s.CompareAndDelete(ctx, op.Key, op.Value)
	case OpSchedule:
		op.Err = s.Schedule(ctx, op.Key, op.Member, op.Due)
	case OpUnschedule:
		op.Err = s.Unschedule(ctx, op.Key, op.Member)
	case OpCompareAndSwap:
		op.OK, op.Err = swapAlone(ctx, s, op)
	case OpScheduleSharded:
		op.Err = ScheduleSharded(ctx, s, op.Key, op.Member, op.Due)
	case OpUnscheduleSharded:
		op.Err = UnscheduleSharded(ctx, s, op.Key, op.Member)
	}
}

// swapAlone runs op, an OpCompareAndSwap, alone on s: the key's TTL read
// first when op keeps it.
func swapAlone(ctx context.Context, s Store, op *Op) (bool, error) {
	ttl := op.TTL
	if ttl == KeepTTL {
		var err error
		if ttl, err = s.TTL(ctx, op.Key); errors.Is(err, errs.NotFound) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return s.CompareAndSwap(ctx, op.Key, op.Old, op.Value, ttl)
}

// RunInOrder runs ops in the order given on the store under the prefix,
// when that store can.
func (p *Prefixed) RunInOrder(ctx context.Context, ops []*Op) bool {
	b, ok := p.s.(Batcher)
	if !ok {
		return false
	}
	inner := make([]*Op, len(ops))
	for i, op := range ops {
		c := *op
		c.Key = p.prefix + op.Key
		inner[i] = &c
	}
	if !b.RunInOrder(ctx, inner) {
		return false
	}
	for i, op := range ops {
		op.OK, op.Got, op.Err = inner[i].OK, inner[i].Got, inner[i].Err
	}
	return true
}

// Pipelines reports whether the store under the prefix sends a batch in one
// round trip.
func (p *Prefixed) Pipelines() bool { return InOneTrip(p.s) }

// Pipelines reports whether r pipelines its batches: on a single node (or a
// Sentinel-managed primary), not on a Cluster.
func (r *Redis) Pipelines() bool {
	_, single := r.c.(*redis.Client)
	return single
}

// RunInOrder pipelines ops on a single node (or a Sentinel-managed primary):
// one connection runs them in the order sent. A Cluster client splits a
// pipeline by node, so there it declines. Consecutive compare-and-swaps go
// as one script (up to maxSwapsPerScript a script), which runs them in order
// and answers each as its own script would: a script's own cost is most of
// a compare-and-swap's, and a re-encryption sends hundreds.
func (r *Redis) RunInOrder(ctx context.Context, ops []*Op) bool {
	c, single := r.c.(*redis.Client)
	if !single {
		return false
	}
	for _, op := range ops {
		if op.Kind == OpSet || op.Kind == OpSetNX || op.Kind == OpCompareAndExpire || op.Kind == OpCompareAndSwap && op.TTL != KeepTTL {
			if op.Err = checkTTL(op.TTL); op.Err != nil {
				return false
			}
		}
	}
	ctx = xcontext.OrBackground(ctx)
	reads := make([]func(), 0, len(ops))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := 0; i < len(ops); {
			op := ops[i]
			if n := swapsAt(ops[i:]); n > 0 {
				run := ops[i : i+n]
				cmd := queueSwaps(ctx, p, run)
				reads = append(reads, func() { readSwaps(cmd, run) })
				i += n
				continue
			}
			if op.sharded() {
				reads = append(reads, r.sharded(op.Key).queueOp(ctx, p, op))
			} else {
				cmd := queue(ctx, p, op)
				reads = append(reads, func() { op.read(cmd) })
			}
			i++
		}
		return nil
	})
	for _, read := range reads {
		read()
	}
	return true
}

// maxSwapsPerScript bounds the compare-and-swaps one script runs: the node
// serves no one else while a script runs.
const maxSwapsPerScript = 100

// swapsAt counts the compare-and-swaps at the head of ops, up to
// maxSwapsPerScript: those that go as one script.
func swapsAt(ops []*Op) int {
	n := 0
	for n < len(ops) && n < maxSwapsPerScript && ops[n].Kind == OpCompareAndSwap {
		n++
	}
	return n
}

// compareAndSwapEach is compareAndSwap for each of its keys in turn, with
// ARGV holding old, value and px for each (px -1: keep the key's time to
// live); it answers 1 or 0 for each key, or the error a key's command met,
// as compareAndSwap alone would.
var compareAndSwapEach = redis.NewScript(`
local out = {}
for i, key in ipairs(KEYS) do
  local got = redis.pcall("GET", key)
  if type(got) == "table" and got.err then
    out[i] = got
  elseif got ~= ARGV[3*i-2] then
    out[i] = 0
  else
    local px, set = tonumber(ARGV[3*i]), nil
    if px > 0 then
      set = redis.pcall("SET", key, ARGV[3*i-1], "PX", px)
    elseif px < 0 then
      set = redis.pcall("SET", key, ARGV[3*i-1], "KEEPTTL")
    else
      set = redis.pcall("SET", key, ARGV[3*i-1])
    end
    if set.err then out[i] = set else out[i] = 1 end
  end
end
return out`)

// queueSwaps adds the compare-and-swaps ops to p as one script.
func queueSwaps(ctx context.Context, p redis.Pipeliner, ops []*Op) redis.Cmder {
	keys, args := make([]string, len(ops)), make([]any, 0, 3*len(ops))
	for i, op := range ops {
		keys[i] = op.Key
		px := pxMillis(op.TTL)
		if op.TTL == KeepTTL {
			px = -1
		}
		args = append(args, op.Old, op.Value, px)
	}
	return compareAndSwapEach.Eval(ctx, p, keys, args...)
}

// readSwaps takes each of ops' answers from the script that ran them.
func readSwaps(cmd redis.Cmder, ops []*Op) {
	answers, err := cmd.(*redis.Cmd).Slice()
	if err == nil && len(answers) != len(ops) {
		err = fmt.Errorf("oauthflow: %d answers to %d compare-and-swaps", len(answers), len(ops))
	}
	for i, op := range ops {
		if err != nil {
			op.Err = err
			continue
		}
		switch a := answers[i].(type) {
		case int64:
			op.OK = a == 1
		case error:
			op.Err = a
		default:
			op.Err = fmt.Errorf("oauthflow: compare-and-swap answered %v", a)
		}
	}
}

// sharded reports whether op writes a sharded index.
func (op *Op) sharded() bool { return op.Kind == OpScheduleSharded || op.Kind == OpUnscheduleSharded }

// queue adds op to p as the command Redis's method of the same name sends.
// The compare scripts go as EVAL, not EVALSHA: a pipeline cannot fall back
// when the server has forgotten a script, and the order must hold.
func queue(ctx context.Context, p redis.Pipeliner, op *Op) redis.Cmder {
	switch op.Kind {
	case OpGet:
		return p.Get(ctx, op.Key)
	case OpSetNX:
		return p.SetArgs(ctx, op.Key, op.Value, redis.SetArgs{Mode: "NX", TTL: op.TTL})
	case OpSet:
		return p.Set(ctx, op.Key, op.Value, op.TTL)
	case OpCompareAndExpire:
		return compareAndExpire.Eval(ctx, p, []string{op.Key}, op.Value, pxMillis(op.TTL))
	case OpCompareAndDelete:
		return compareAndDelete.Eval(ctx, p, []string{op.Key}, op.Value)
	case OpSchedule:
		return p.ZAdd(ctx, op.Key, redis.Z{Score: float64(op.Due.UnixMilli()), Member: op.Member})
	default: // OpUnschedule
		return p.ZRem(ctx, op.Key, op.Member)
	}
}

// read takes op's result from its command, as Redis's methods do.
func (op *Op) read(cmd redis.Cmder) {
	switch c := cmd.(type) {
	case *redis.StringCmd: // GET
		s, err := c.Result()
		op.Got, op.Err = ReadOnlyBytes(s), redisErr(err)
	case *redis.StatusCmd: // SET, SET NX
		op.Err = c.Err()
		if op.Kind == OpSetNX {
			op.OK = op.Err == nil
			if errors.Is(op.Err, redis.Nil) { // NX: the key was there
				op.Err = nil
			}
		}
	case *redis.Cmd: // the compare scripts
		n, err := c.Int()
		op.Err = err
		switch op.Kind {
		case OpCompareAndExpire:
			op.OK = n >= 1
		default:
			op.OK = n == 1
		}
	default: // ZADD, ZREM
		op.Err = cmd.Err()
	}
}
