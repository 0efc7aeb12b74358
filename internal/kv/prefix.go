package kv

import (
	"context"
	"time"
)

// WithPrefix returns a Store that puts prefix before every key of s, so that
// several applications can share one Redis; s itself when prefix is empty.
func WithPrefix(s Store, prefix string) Store {
	if prefix == "" {
		return s
	}
	return &Prefixed{s: s, prefix: prefix}
}

// Prefixed is a Store under a key prefix. It has every capability of the
// store under it, with the prefix put before each key and index.
type Prefixed struct {
	s      Store
	prefix string
}

var _ Store = (*Prefixed)(nil)

// Unprefixed returns the store under s's key prefix, and the prefix; s and
// "" when s has none.
func Unprefixed(s Store) (Store, string) {
	if p, ok := s.(*Prefixed); ok {
		return p.s, p.prefix
	}
	return s, ""
}

func (p *Prefixed) Get(ctx context.Context, key string) ([]byte, error) {
	return p.s.Get(ctx, p.prefix+key)
}
func (p *Prefixed) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	return p.s.Set(ctx, p.prefix+key, v, ttl)
}
func (p *Prefixed) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	return p.s.SetNX(ctx, p.prefix+key, v, ttl)
}
func (p *Prefixed) GetDel(ctx context.Context, key string) ([]byte, error) {
	return p.s.GetDel(ctx, p.prefix+key)
}
func (p *Prefixed) Del(ctx context.Context, key string) error { return p.s.Del(ctx, p.prefix+key) }
func (p *Prefixed) TTL(ctx context.Context, key string) (time.Duration, error) {
	return p.s.TTL(ctx, p.prefix+key)
}
func (p *Prefixed) CompareAndDelete(ctx context.Context, key string, v []byte) (bool, error) {
	return p.s.CompareAndDelete(ctx, p.prefix+key, v)
}
func (p *Prefixed) CompareAndExpire(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	return p.s.CompareAndExpire(ctx, p.prefix+key, v, ttl)
}
func (p *Prefixed) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	return p.s.CompareAndSwap(ctx, p.prefix+key, old, v, ttl)
}
func (p *Prefixed) Schedule(ctx context.Context, index, member string, due time.Time) error {
	return p.s.Schedule(ctx, p.prefix+index, member, due)
}
func (p *Prefixed) Unschedule(ctx context.Context, index, member string) error {
	return p.s.Unschedule(ctx, p.prefix+index, member)
}
func (p *Prefixed) Claim(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	return p.s.Claim(ctx, p.prefix+index, now, lease, n)
}

// Close closes the store under the prefix when it has a Close method.
func (p *Prefixed) Close() error { return Close(p.s) }
