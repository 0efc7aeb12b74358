package kv

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// batchScript is a batch whose every command depends on the ones before it:
// run out of order, some answer would differ.
func batchScript() []*Op {
	return []*Op{
		{Kind: OpSetNX, Key: "lock", Value: []byte("me"), TTL: time.Minute},
		{Kind: OpSetNX, Key: "lock", Value: []byte("you"), TTL: time.Minute},
		{Kind: OpGet, Key: "lock"},
		{Kind: OpCompareAndExpire, Key: "lock", Value: []byte("me"), TTL: time.Hour},
		{Kind: OpCompareAndExpire, Key: "lock", Value: []byte("you"), TTL: time.Hour},
		{Kind: OpSet, Key: "run", Value: []byte(`{"state":"end"}`), TTL: time.Hour},
		{Kind: OpGet, Key: "run"},
		{Kind: OpSchedule, Key: "idx", Member: "m", Due: time.UnixMilli(1000)},
		// Compare-and-swaps in a row, one of them on a key of another type.
		{Kind: OpCompareAndSwap, Key: "run", Old: []byte(`{"state":"run"}`), Value: []byte("x"), TTL: time.Minute},
		{Kind: OpCompareAndSwap, Key: "idx", Old: []byte("m"), Value: []byte("x")},
		{Kind: OpCompareAndSwap, Key: "run", Old: []byte(`{"state":"end"}`), Value: []byte(`{"state":"gone"}`)},
		{Kind: OpCompareAndSwap, Key: "absent", Old: []byte("a"), Value: []byte("b")},
		{Kind: OpSet, Key: "kept", Value: []byte("a"), TTL: time.Hour},
		{Kind: OpCompareAndSwap, Key: "kept", Old: []byte("a"), Value: []byte("b"), TTL: KeepTTL},
		{Kind: OpCompareAndSwap, Key: "absent", Old: []byte("a"), Value: []byte("b"), TTL: KeepTTL},
		{Kind: OpUnschedule, Key: "idx", Member: "m"},
		{Kind: OpGet, Key: "run"},
		{Kind: OpSchedule, Key: "due", Member: "lapse:r", Due: time.UnixMilli(1000)},
		{Kind: OpUnschedule, Key: "due", Member: "lapse:r"},
		{Kind: OpCompareAndDelete, Key: "lock", Value: []byte("you")},
		{Kind: OpCompareAndDelete, Key: "lock", Value: []byte("me")},
		{Kind: OpGet, Key: "lock"},
	}
}

// checkBatchAnswers compares a batch's answers with those of the same
// commands sent one by one, and checks on s, the store the batch ran on,
// that a compare-and-swap that keeps the key's time to live kept it.
func checkBatchAnswers(t *testing.T, s Store, got, want []*Op) {
	t.Helper()
	for _, op := range got {
		if op.Kind == OpCompareAndSwap && op.Key == "kept" && (op.Err != nil || !op.OK) {
			t.Errorf("the swap that keeps the time to live answered %v, %v", op.OK, op.Err)
		}
	}
	if ttl, err := s.TTL(context.Background(), "kept"); err != nil || ttl < 59*time.Minute {
		t.Errorf("the swap that keeps the time to live left %v, %v", ttl, err)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.OK != w.OK || string(g.Got) != string(w.Got) || !errors.Is(g.Err, w.Err) && (g.Err == nil) != (w.Err == nil) {
			t.Errorf("command %d (kind %d %s): batch answered ok=%v got=%q err=%v; one by one ok=%v got=%q err=%v",
				i, g.Kind, g.Key, g.OK, g.Got, g.Err, w.OK, w.Got, w.Err)
		}
	}
}

type pipelineCounter struct{ commands, pipelines atomic.Int64 }

func (h *pipelineCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *pipelineCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !handshake(cmd) {
			h.commands.Add(1)
		}
		return next(ctx, cmd)
	}
}

// handshake tells the commands a new connection sends before any of ours.
func handshake(cmd redis.Cmder) bool {
	return cmd.Name() == "hello" || cmd.Name() == "client" || cmd.Name() == "auth" || cmd.Name() == "select"
}

func (h *pipelineCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if !handshake(cmds[0]) {
			h.pipelines.Add(1)
		}
		return next(ctx, cmds)
	}
}

// On one Redis node a batch is one round trip and answers exactly as its
// commands sent one by one do, in order, under a key prefix too.
func TestBatchOnOneNodeIsOneRoundTripInOrder(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t).(*redis.Client)
	ctx := context.Background()
	hook := &pipelineCounter{}
	c.AddHook(hook)
	want := batchScript()
	one := WithPrefix(NewRedis(c), redistest.Prefix(t, c))
	for _, op := range want {
		op.Run(ctx, one)
	}
	hook.commands.Store(0)
	prefix := redistest.Prefix(t, c)
	got := batchScript()
	batched := WithPrefix(NewRedis(c), prefix)
	RunBatch(ctx, batched, got...)
	if n, p := hook.commands.Load(), hook.pipelines.Load(); n != 0 || p != 1 {
		t.Fatalf("the batch took %d commands and %d pipelines; want one pipeline", n, p)
	}
	checkBatchAnswers(t, batched, got, want)
	if !InOneTrip(NewRedis(c)) || !InOneTrip(WithPrefix(NewRedis(c), prefix)) {
		t.Error("InOneTrip says a single node's batch takes more than one round trip")
	}
	if v, err := c.Get(ctx, prefix+"run").Result(); err != nil || v != `{"state":"gone"}` {
		t.Fatalf("the batch's write is under %q: %q, %v", prefix+"run", v, err)
	}
}

// A store that cannot keep the order (Memory here, Cluster in production)
// runs the commands one by one, with the same answers.
func TestBatchElsewhereRunsOneByOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	want := batchScript()
	one := NewMemory(nil)
	for _, op := range want {
		op.Run(ctx, one)
	}
	got := batchScript()
	batched := WithPrefix(NewMemory(nil), "p:")
	RunBatch(ctx, batched, got...)
	checkBatchAnswers(t, batched, got, want)
	if InOneTrip(WithPrefix(NewMemory(nil), "p:")) {
		t.Error("InOneTrip says a store without batches sends one in one round trip")
	}
}

// A Cluster client would split a pipeline by node and lose the order: there a
// batch goes one command at a time, with the same answers.
func TestBatchOnClusterRunsOneByOne(t *testing.T) {
	t.Parallel()
	c := redistest.Cluster(t)
	ctx := context.Background()
	want := batchScript()
	one := WithPrefix(NewRedis(c), "one:")
	for _, op := range want {
		op.Run(ctx, one)
	}
	hook := &pipelineCounter{}
	c.AddHook(hook)
	got := batchScript()
	batched := WithPrefix(NewRedis(c), "batch:")
	RunBatch(ctx, batched, got...)
	if p := hook.pipelines.Load(); p != 0 {
		t.Fatalf("the batch went as %d pipelines on a Cluster; want none", p)
	}
	checkBatchAnswers(t, batched, got, want)
	if InOneTrip(WithPrefix(NewRedis(c), "batch:")) {
		t.Error("InOneTrip says a Cluster sends a batch in one round trip")
	}
}
