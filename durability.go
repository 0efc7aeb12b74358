package oauthflow

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// Durability across a Redis failover. Redis replicates asynchronously: a
// master can acknowledge a write and die before any replica has it, and the
// promoted replica then holds the record as it was. For most records that
// costs a retry; for a rotated refresh token it costs the grant (the store
// keeps the spent token, the provider refuses it). With replica
// acknowledgements on, a write that holds a rotated refresh token or a new
// sign-in's tokens is followed by Redis WAIT on the key's master, and a
// refreshed record that is not on enough replicas in time is kept in the
// refreshing process: when it finds the record it replaced back in the
// store (a failover lost the write), it writes it again.

// WithReplicaAcks makes writes that hold a rotated refresh token or a new
// sign-in's tokens wait until n replicas of the key's master have them, at
// most timeout each (Redis WAIT). 0 turns it off (the default). Only a
// RedisKV (or one wrapped by WithKeyPrefix) can wait; other stores ignore it.
func WithReplicaAcks(n int, timeout time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if n > 0 && timeout > 0 {
			s.acks, s.ackTimeout = n, timeout
		}
	}
}

// replicaWaiter is a store that can wait for the replicas of key's master
// to hold every write the master acknowledged so far.
type replicaWaiter interface {
	waitReplicas(ctx context.Context, key string, n int, timeout time.Duration) (int, error)
}

// replicated reports whether the write of key just made is on the replicas
// WithReplicaAcks asks for: true when it is, or when nothing is asked or
// the store cannot tell.
func (s *TokenStore) replicated(ctx context.Context, key string) bool {
	w, ok := s.kv.(replicaWaiter)
	if s.acks == 0 || !ok {
		return true
	}
	got, err := w.waitReplicas(ctx, key, s.acks, s.ackTimeout)
	if err == nil && got >= s.acks {
		return true
	}
	attrs := []any{slog.Int("want", s.acks), slog.Int("replicas", got)}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	s.events.log.WarnContext(ctx, "oauthflow: tokens written to the Redis master are not on enough replicas yet", attrs...)
	return false
}

// waitReplicas runs PING then WAIT on one connection to key's master: WAIT
// waits for the replication offset of its connection's last command, and
// the PING brings that offset up to every write the master has
// acknowledged, the caller's own included.
func (r *RedisKV) waitReplicas(ctx context.Context, key string, n int, timeout time.Duration) (int, error) {
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

func (p *prefixKV) waitReplicas(ctx context.Context, key string, n int, timeout time.Duration) (int, error) {
	w, ok := p.kv.(replicaWaiter)
	if !ok {
		return n, nil
	}
	return w.waitReplicas(ctx, p.prefix+key, n, timeout)
}
