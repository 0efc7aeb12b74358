package kv

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
// round trips (Memory), the commands run one by one.

// OpKind is what an Op does.
type OpKind int

// The kinds of Op, each the Store method of the same name; the result fields
// each one sets.
const (
	OpGet              OpKind = iota // Got, or errs.NotFound in Err
	OpSetNX                          // OK: set
	OpSet                            //
	OpCompareAndExpire               // OK: key held Value
	OpCompareAndDelete               // OK: key held Value
	OpSchedule                       //
	OpUnschedule                     //
)

// Op is one command of a batch, and its result once the batch has run.
type Op struct {
	Kind   OpKind
	Key    string // the index, for OpSchedule and OpUnschedule
	Value  []byte // to store, or to compare with
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
	}
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
// pipeline by node, so there it declines.
func (r *Redis) RunInOrder(ctx context.Context, ops []*Op) bool {
	c, single := r.c.(*redis.Client)
	if !single {
		return false
	}
	for _, op := range ops {
		if op.Kind == OpSet || op.Kind == OpSetNX || op.Kind == OpCompareAndExpire {
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
