package kv

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// WaitReplicas runs PING then WAIT on one connection to key's master: WAIT
// waits for the replication offset of its connection's last command, and
// the PING brings that offset up to every write the master has
// acknowledged, the caller's own included.
func (r *Redis) WaitReplicas(ctx context.Context, key string, n int, timeout time.Duration) (int, error) {
	var node redis.Cmdable = r.c
	if cc, ok := r.c.(*redis.ClusterClient); ok {
		m, err := cc.MasterForKey(ctx, key)
		if err != nil {
			return 0, err
		}
		node = m
	}
	pipe := node.Pipeline()
	pipe.Ping(ctx)
	wait := pipe.Do(ctx, "WAIT", n, max(timeout.Milliseconds(), 1))
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return wait.Int()
}

// WaitReplicas waits for the replicas of key under the prefix; a store under
// it that cannot wait counts as n replicas.
func (p *Prefixed) WaitReplicas(ctx context.Context, key string, n int, timeout time.Duration) (int, error) {
	w, ok := p.s.(ReplicaWaiter)
	if !ok {
		return n, nil
	}
	return w.WaitReplicas(ctx, p.prefix+key, n, timeout)
}
