package oauthflow

import (
	"context"
	"errors"
	"time"

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
// round trips (MemoryKV), the commands run one by one.

// opKind is what a kvOp does.
type opKind int

const (
	opGet              opKind = iota // got, or ErrNotFound in err
	opSetNX                          // ok: set
	opSet                            //
	opCompareAndExpire               // ok: key held value
	opCompareAndDelete               // ok: key held value
	opSchedule                       //
	opUnschedule                     //
)

// kvOp is one command of a batch, and its result once the batch has run.
type kvOp struct {
	kind   opKind
	key    string // the index, for opSchedule and opUnschedule
	value  []byte // to store, or to compare with
	ttl    time.Duration
	member string
	due    time.Time

	ok  bool
	got []byte
	err error
}

// orderedBatcher is a KV that can run a batch in one round trip. runInOrder
// reports false, having run nothing, when it cannot keep the order.
type orderedBatcher interface {
	runInOrder(ctx context.Context, ops []*kvOp) bool
}

// runBatch runs ops on kv in order, in one round trip where kv can.
func runBatch(ctx context.Context, kv KV, ops ...*kvOp) {
	if b, ok := kv.(orderedBatcher); ok && b.runInOrder(ctx, ops) {
		return
	}
	for _, op := range ops {
		op.runOn(ctx, kv)
	}
}

func (op *kvOp) runOn(ctx context.Context, kv KV) {
	switch op.kind {
	case opGet:
		op.got, op.err = kv.Get(ctx, op.key)
	case opSetNX:
		op.ok, op.err = kv.SetNX(ctx, op.key, op.value, op.ttl)
	case opSet:
		op.err = kv.Set(ctx, op.key, op.value, op.ttl)
	case opCompareAndExpire:
		op.ok, op.err = kv.CompareAndExpire(ctx, op.key, op.value, op.ttl)
	case opCompareAndDelete:
		op.ok, op.err = kv.CompareAndDelete(ctx, op.key, op.value)
	case opSchedule:
		op.err = kv.Schedule(ctx, op.key, op.member, op.due)
	case opUnschedule:
		op.err = kv.Unschedule(ctx, op.key, op.member)
	}
}

func (p *prefixKV) runInOrder(ctx context.Context, ops []*kvOp) bool {
	b, ok := p.kv.(orderedBatcher)
	if !ok {
		return false
	}
	inner := make([]*kvOp, len(ops))
	for i, op := range ops {
		c := *op
		c.key = p.prefix + op.key
		inner[i] = &c
	}
	if !b.runInOrder(ctx, inner) {
		return false
	}
	for i, op := range ops {
		op.ok, op.got, op.err = inner[i].ok, inner[i].got, inner[i].err
	}
	return true
}

// runInOrder pipelines ops on a single node (or a Sentinel-managed primary):
// one connection runs them in the order sent. A Cluster client splits a
// pipeline by node, so there it declines.
func (r *RedisKV) runInOrder(ctx context.Context, ops []*kvOp) bool {
	c, single := r.c.(*redis.Client)
	if !single {
		return false
	}
	for _, op := range ops {
		if op.kind == opSet || op.kind == opSetNX || op.kind == opCompareAndExpire {
			if op.err = checkTTL(op.ttl); op.err != nil {
				return false
			}
		}
	}
	ctx = xcontext.OrBackground(ctx)
	cmds := make([]redis.Cmder, len(ops))
	_, _ = c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, op := range ops {
			cmds[i] = queue(ctx, p, op)
		}
		return nil
	})
	for i, op := range ops {
		op.read(cmds[i])
	}
	return true
}

// queue adds op to p as the command RedisKV's method of the same name sends.
// The compare scripts go as EVAL, not EVALSHA: a pipeline cannot fall back
// when the server has forgotten a script, and the order must hold.
func queue(ctx context.Context, p redis.Pipeliner, op *kvOp) redis.Cmder {
	switch op.kind {
	case opGet:
		return p.Get(ctx, op.key)
	case opSetNX:
		return p.SetArgs(ctx, op.key, op.value, redis.SetArgs{Mode: "NX", TTL: op.ttl})
	case opSet:
		return p.Set(ctx, op.key, op.value, op.ttl)
	case opCompareAndExpire:
		return compareAndExpire.Eval(ctx, p, []string{op.key}, op.value, pxMillis(op.ttl))
	case opCompareAndDelete:
		return compareAndDelete.Eval(ctx, p, []string{op.key}, op.value)
	case opSchedule:
		return p.ZAdd(ctx, op.key, redis.Z{Score: float64(op.due.UnixMilli()), Member: op.member})
	default: // opUnschedule
		return p.ZRem(ctx, op.key, op.member)
	}
}

// read takes op's result from its command, as RedisKV's methods do.
func (op *kvOp) read(cmd redis.Cmder) {
	switch c := cmd.(type) {
	case *redis.StringCmd: // GET
		s, err := c.Result()
		op.got, op.err = readOnlyBytes(s), redisErr(err)
	case *redis.StatusCmd: // SET, SET NX
		op.err = c.Err()
		if op.kind == opSetNX {
			op.ok = op.err == nil
			if errors.Is(op.err, redis.Nil) { // NX: the key was there
				op.err = nil
			}
		}
	case *redis.Cmd: // the compare scripts
		n, err := c.Int()
		op.err = err
		switch op.kind {
		case opCompareAndExpire:
			op.ok = n >= 1
		default:
			op.ok = n == 1
		}
	default: // ZADD, ZREM
		op.err = cmd.Err()
	}
}
