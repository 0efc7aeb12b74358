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
	Kind   opKind
	Key    string // the index, for opSchedule and opUnschedule
	Value  []byte // to store, or to compare with
	TTL    time.Duration
	Member string
	Due    time.Time

	OK  bool
	Got []byte
	Err error
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
	switch op.Kind {
	case opGet:
		op.Got, op.Err = kv.Get(ctx, op.Key)
	case opSetNX:
		op.OK, op.Err = kv.SetNX(ctx, op.Key, op.Value, op.TTL)
	case opSet:
		op.Err = kv.Set(ctx, op.Key, op.Value, op.TTL)
	case opCompareAndExpire:
		op.OK, op.Err = kv.CompareAndExpire(ctx, op.Key, op.Value, op.TTL)
	case opCompareAndDelete:
		op.OK, op.Err = kv.CompareAndDelete(ctx, op.Key, op.Value)
	case opSchedule:
		op.Err = kv.Schedule(ctx, op.Key, op.Member, op.Due)
	case opUnschedule:
		op.Err = kv.Unschedule(ctx, op.Key, op.Member)
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
		c.Key = p.prefix + op.Key
		inner[i] = &c
	}
	if !b.runInOrder(ctx, inner) {
		return false
	}
	for i, op := range ops {
		op.OK, op.Got, op.Err = inner[i].OK, inner[i].Got, inner[i].Err
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
		if op.Kind == opSet || op.Kind == opSetNX || op.Kind == opCompareAndExpire {
			if op.Err = checkTTL(op.TTL); op.Err != nil {
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
	switch op.Kind {
	case opGet:
		return p.Get(ctx, op.Key)
	case opSetNX:
		return p.SetArgs(ctx, op.Key, op.Value, redis.SetArgs{Mode: "NX", TTL: op.TTL})
	case opSet:
		return p.Set(ctx, op.Key, op.Value, op.TTL)
	case opCompareAndExpire:
		return compareAndExpire.Eval(ctx, p, []string{op.Key}, op.Value, pxMillis(op.TTL))
	case opCompareAndDelete:
		return compareAndDelete.Eval(ctx, p, []string{op.Key}, op.Value)
	case opSchedule:
		return p.ZAdd(ctx, op.Key, redis.Z{Score: float64(op.Due.UnixMilli()), Member: op.Member})
	default: // opUnschedule
		return p.ZRem(ctx, op.Key, op.Member)
	}
}

// read takes op's result from its command, as RedisKV's methods do.
func (op *kvOp) read(cmd redis.Cmder) {
	switch c := cmd.(type) {
	case *redis.StringCmd: // GET
		s, err := c.Result()
		op.Got, op.Err = readOnlyBytes(s), redisErr(err)
	case *redis.StatusCmd: // SET, SET NX
		op.Err = c.Err()
		if op.Kind == opSetNX {
			op.OK = op.Err == nil
			if errors.Is(op.Err, redis.Nil) { // NX: the key was there
				op.Err = nil
			}
		}
	case *redis.Cmd: // the compare scripts
		n, err := c.Int()
		op.Err = err
		switch op.Kind {
		case opCompareAndExpire:
			op.OK = n >= 1
		default:
			op.OK = n == 1
		}
	default: // ZADD, ZREM
		op.Err = cmd.Err()
	}
}
