package oauthflow

import (
	"context"
	"log/slog"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
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

// replicated reports whether the write of key just made is on the replicas
// WithReplicaAcks asks for: true when it is, or when nothing is asked or
// the store cannot tell.
func (s *TokenStore) replicated(ctx context.Context, key string) bool {
	w, ok := s.kv.(kv.ReplicaWaiter)
	if s.acks == 0 || !ok {
		return true
	}
	got, err := w.WaitReplicas(ctx, key, s.acks, s.ackTimeout)
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
