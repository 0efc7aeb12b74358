package kv

import (
	"context"
	"errors"
	"maps"
	"time"

	"github.com/oauthflow/oauthflow/internal/xcontext"
	"github.com/redis/go-redis/v9"
)

// The due-time indexes besides Schedule, Unschedule and Claim: reading an
// index (IndexReader) and adding members only where absent
// (AbsentScheduler), on each backend.

// Members lists index's members with their due times.
func (m *Memory) Members(_ context.Context, index string) (map[string]int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return maps.Clone(m.idx[index]), nil
}

// Members lists index's members with their scores (ZRANGE WITHSCORES).
func (r *Redis) Members(ctx context.Context, index string) (map[string]int64, error) {
	zs, err := r.c.ZRangeWithScores(xcontext.OrBackground(ctx), index, 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make(map[string]int64, len(zs))
	for _, z := range zs {
		if m, ok := z.Member.(string); ok {
			out[m] = int64(z.Score)
		}
	}
	return out, nil
}

// Members lists index under the prefix; none when the store under it cannot.
func (p *Prefixed) Members(ctx context.Context, index string) (map[string]int64, error) {
	r, ok := p.s.(IndexReader)
	if !ok {
		return map[string]int64{}, nil
	}
	return r.Members(ctx, p.prefix+index)
}

// Score is member's due time in index; ok is false when it is not there.
func (m *Memory) Score(_ context.Context, index, member string) (int64, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	ms, ok := m.idx[index][member]
	return ms, ok, nil
}

// Score is member's score in index (ZSCORE); ok is false when it is not there.
func (r *Redis) Score(ctx context.Context, index, member string) (int64, bool, error) {
	f, err := r.c.ZScore(xcontext.OrBackground(ctx), index, member).Result()
	if errors.Is(err, redis.Nil) {
		return 0, false, nil
	}
	return int64(f), err == nil, err
}

// Score is member's due time in index under the prefix; errors.ErrUnsupported
// when the store under it cannot tell.
func (p *Prefixed) Score(ctx context.Context, index, member string) (int64, bool, error) {
	r, ok := p.s.(IndexReader)
	if !ok {
		return 0, false, errors.ErrUnsupported
	}
	return r.Score(ctx, p.prefix+index, member)
}

// ScheduleAbsent adds members to index where they are absent when s is an
// AbsentScheduler; otherwise it sets them all.
func ScheduleAbsent(ctx context.Context, s Store, index string, members []string, due time.Time) error {
	if a, ok := s.(AbsentScheduler); ok {
		return a.ScheduleAbsent(ctx, index, members, due)
	}
	for _, member := range members {
		if err := s.Schedule(ctx, index, member, due); err != nil {
			return err
		}
	}
	return nil
}

// ScheduleAbsent adds each of members to index, due at due, where it is
// not there already.
func (m *Memory) ScheduleAbsent(_ context.Context, index string, members []string, due time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.idx == nil {
		m.idx = make(map[string]map[string]int64)
	}
	if m.idx[index] == nil {
		m.idx[index] = make(map[string]int64)
	}
	for _, member := range members {
		if _, ok := m.idx[index][member]; !ok {
			m.idx[index][member] = due.UnixMilli()
		}
	}
	return nil
}

// ScheduleAbsent adds each of members to index, due at due, where it is not
// there already (ZADD NX, one key).
func (r *Redis) ScheduleAbsent(ctx context.Context, index string, members []string, due time.Time) error {
	zs := make([]redis.Z, len(members))
	for i, member := range members {
		zs[i] = redis.Z{Score: float64(due.UnixMilli()), Member: member}
	}
	return r.c.ZAddNX(xcontext.OrBackground(ctx), index, zs...).Err()
}

// ScheduleAbsent adds members to index under the prefix where they are absent.
func (p *Prefixed) ScheduleAbsent(ctx context.Context, index string, members []string, due time.Time) error {
	return ScheduleAbsent(ctx, p.s, p.prefix+index, members, due)
}
