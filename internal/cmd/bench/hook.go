package main

import (
	"context"
	"sync/atomic"

	"github.com/redis/go-redis/v9"
)

// countHook counts Redis round trips: one per command, one per pipeline.
type countHook struct{ n atomic.Int64 }

var _ redis.Hook = (*countHook)(nil)

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}
