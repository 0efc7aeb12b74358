package kv

import (
	"context"
	"errors"
	"time"
)

// A sharded index is a due-time index too big for one sorted set to stay
// small: the worker's index of due work, a member for every connection.
// Redis keeps a sorted set of up to 128 members in a compact encoding
// (listpack), about 41 B a member, and a bigger one as a skiplist, about 118
// B. A Sharder keeps such an index in shards that stay compact whatever the
// number of members, with the same contract as Schedule, Unschedule and
// Claim on one index. Where the store is no Sharder the functions below use
// the index as one sorted set, as Store's methods do; the members an earlier
// version of the library wrote there (a rolling deploy) are still claimed by
// ClaimSharded, and never run twice.

// Sharder keeps a due-time index in shards (see above).
type Sharder interface {
	ScheduleSharded(ctx context.Context, index, member string, due time.Time) error
	UnscheduleSharded(ctx context.Context, index, member string) error
	// ClaimSharded is Claim over the shards: it takes up to n due members,
	// leased until now+lease, and no shard full of due work holds back the
	// members due in the others.
	ClaimSharded(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error)
	// ScoreSharded and MembersSharded read the index as IndexReader does.
	ScoreSharded(ctx context.Context, index, member string) (ms int64, ok bool, err error)
	MembersSharded(ctx context.Context, index string) (map[string]int64, error)
}

// ScheduleSharded sets member's due time in the sharded index.
func ScheduleSharded(ctx context.Context, s Store, index, member string, due time.Time) error {
	if sh, ok := s.(Sharder); ok {
		return sh.ScheduleSharded(ctx, index, member, due)
	}
	return s.Schedule(ctx, index, member, due)
}

// UnscheduleSharded removes member from the sharded index.
func UnscheduleSharded(ctx context.Context, s Store, index, member string) error {
	if sh, ok := s.(Sharder); ok {
		return sh.UnscheduleSharded(ctx, index, member)
	}
	return s.Unschedule(ctx, index, member)
}

// ClaimSharded claims up to n due members of the sharded index.
func ClaimSharded(ctx context.Context, s Store, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	if sh, ok := s.(Sharder); ok {
		return sh.ClaimSharded(ctx, index, now, lease, n)
	}
	return s.Claim(ctx, index, now, lease, n)
}

// ScoreSharded is member's due time in the sharded index; errors.ErrUnsupported
// when the store cannot tell.
func ScoreSharded(ctx context.Context, s Store, index, member string) (int64, bool, error) {
	if sh, ok := s.(Sharder); ok {
		return sh.ScoreSharded(ctx, index, member)
	}
	if r, ok := s.(IndexReader); ok {
		return r.Score(ctx, index, member)
	}
	return 0, false, errors.ErrUnsupported
}

// MembersSharded lists the sharded index's members with their due times;
// none when the store cannot tell.
func MembersSharded(ctx context.Context, s Store, index string) (map[string]int64, error) {
	if sh, ok := s.(Sharder); ok {
		return sh.MembersSharded(ctx, index)
	}
	if r, ok := s.(IndexReader); ok {
		return r.Members(ctx, index)
	}
	return map[string]int64{}, nil
}

// A Memory keeps every index in one map, which no size makes dearer: its
// sharded index is the index itself.

var _ Sharder = (*Memory)(nil)

// ScheduleSharded is Schedule.
func (m *Memory) ScheduleSharded(ctx context.Context, index, member string, due time.Time) error {
	return m.Schedule(ctx, index, member, due)
}

// UnscheduleSharded is Unschedule.
func (m *Memory) UnscheduleSharded(ctx context.Context, index, member string) error {
	return m.Unschedule(ctx, index, member)
}

// ClaimSharded is Claim, in due order over the whole index.
func (m *Memory) ClaimSharded(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	return m.Claim(ctx, index, now, lease, n)
}

// ScoreSharded is Score.
func (m *Memory) ScoreSharded(ctx context.Context, index, member string) (int64, bool, error) {
	return m.Score(ctx, index, member)
}

// MembersSharded is Members.
func (m *Memory) MembersSharded(ctx context.Context, index string) (map[string]int64, error) {
	return m.Members(ctx, index)
}

var _ Sharder = (*Prefixed)(nil)

// ScheduleSharded sets member's due time in index under the prefix.
func (p *Prefixed) ScheduleSharded(ctx context.Context, index, member string, due time.Time) error {
	return ScheduleSharded(ctx, p.s, p.prefix+index, member, due)
}

// UnscheduleSharded removes member from index under the prefix.
func (p *Prefixed) UnscheduleSharded(ctx context.Context, index, member string) error {
	return UnscheduleSharded(ctx, p.s, p.prefix+index, member)
}

// ClaimSharded claims due members of index under the prefix.
func (p *Prefixed) ClaimSharded(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	return ClaimSharded(ctx, p.s, p.prefix+index, now, lease, n)
}

// ScoreSharded is member's due time in index under the prefix.
func (p *Prefixed) ScoreSharded(ctx context.Context, index, member string) (int64, bool, error) {
	return ScoreSharded(ctx, p.s, p.prefix+index, member)
}

// MembersSharded lists index under the prefix.
func (p *Prefixed) MembersSharded(ctx context.Context, index string) (map[string]int64, error) {
	return MembersSharded(ctx, p.s, p.prefix+index)
}
