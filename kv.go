package oauthflow

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/redis/go-redis/v9"
)

// ErrNotFound is what a KV returns for a key that is absent or expired.
var ErrNotFound = errs.NotFound

// KV is the key-value store that tokens, sessions, runs and documents live in.
// Every method takes ctx first. A ttl of 0 means the key never expires.
// A value returned by Get or GetDel belongs to the caller but must not be modified
// when it came from a shared cache; treat it as read-only.
//
// Schedule, Unschedule and Claim keep due-time indexes: sorted sets of members
// keyed by due time, stored to the millisecond, that a background worker shared
// by many instances claims work from. An index lives under its own key (one
// Redis sorted set, so Claim is atomic on Cluster too) and never expires by
// itself: a member stays until it is unscheduled. Index names and value keys
// must not collide; Redis refuses a GET on an index with WRONGTYPE.
type KV interface {
	Get(ctx context.Context, key string) ([]byte, error)
	Set(ctx context.Context, key string, value []byte, ttl time.Duration) error
	// SetNX sets key only when it is absent and reports whether it did.
	SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// GetDel returns the value and removes the key in one atomic step.
	GetDel(ctx context.Context, key string) ([]byte, error)
	Del(ctx context.Context, key string) error
	// TTL returns the time left; 0 for a key without expiry; ErrNotFound when absent.
	TTL(ctx context.Context, key string) (time.Duration, error)
	// CompareAndDelete removes key only while it holds value (a lock release).
	CompareAndDelete(ctx context.Context, key string, value []byte) (bool, error)
	// CompareAndExpire resets key's ttl only while it holds value (a lease renewal).
	CompareAndExpire(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error)
	// CompareAndSwap sets key to value with ttl only while it holds old, and
	// reports whether it did (a fenced write: nobody wrote since old was read).
	CompareAndSwap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error)

	// Schedule sets member's due time in the index named index (a sorted set
	// keyed by due time), adding member if absent.
	Schedule(ctx context.Context, index, member string, due time.Time) error
	// Unschedule removes member from index; an absent member is not an error.
	Unschedule(ctx context.Context, index, member string) error
	// Claim takes up to n members of index that are due at or before now, in
	// due order, and in the same atomic step moves each one's due time to
	// now+lease, so that no other caller claims it again until the lease
	// lapses. It returns the members it took (empty when none is due).
	Claim(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error)
}

// Env variables KVFromEnv reads, with their defaults.
const (
	envKVHost     = "KVSTORE_HOST"     // default localhost
	envKVPort     = "KVSTORE_PORT"     // default 6379
	envKVPassword = "KVSTORE_PASSWORD" // default none
)

// KVFromEnv connects to the Redis named by KVSTORE_HOST, KVSTORE_PORT and
// KVSTORE_PASSWORD and pings it once. When it cannot be reached, it logs a warning
// and returns a memory KV, which serves for the life of the process (it never
// tries Redis again), together with an error wrapping [ErrStoreUnavailable] that
// a caller who needs Redis can act on; the KV it returns is never nil.
func KVFromEnv(ctx context.Context, log *slog.Logger) (KV, error) {
	return kvFromLookup(ctx, log, os.LookupEnv)
}

func kvFromLookup(ctx context.Context, log *slog.Logger, lookup func(string) (string, bool)) (KV, error) {
	if log == nil {
		log = slog.Default()
	}
	kv, addr, err := redisFromLookup(ctx, log, lookup)
	if err != nil {
		log.Warn("oauthflow: key-value store unreachable, using in-memory storage for this process",
			slog.String("addr", addr), slog.String("error", err.Error()))
		return NewMemoryKV(), err
	}
	return kv, nil
}

// redisFromLookup connects to the Redis the KVSTORE_* variables name, with no
// fallback: the error wraps ErrStoreUnavailable when it cannot be reached.
func redisFromLookup(ctx context.Context, log *slog.Logger, lookup func(string) (string, bool)) (KV, string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	addr := net.JoinHostPort(envOr(lookup, envKVHost, "localhost"), envOr(lookup, envKVPort, "6379"))
	password, _ := lookup(envKVPassword)
	opts := &redis.Options{Addr: addr, Password: password}
	if err := ping(ctx, opts); err != nil {
		return nil, addr, errs.Store(ctx, "ping "+addr, err)
	}
	client := redis.NewClient(opts)
	log.Info("oauthflow: using Redis key-value store", slog.String("addr", addr))
	return NewRedisKV(client, WithOwnedClient()), addr, nil
}

// ping checks once, without retries, that a Redis answers at opts.
func ping(ctx context.Context, opts *redis.Options) error {
	probe := *opts
	probe.MaxRetries = -1
	c := redis.NewClient(&probe)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

func envOr(lookup func(string) (string, bool), name, def string) string {
	if v, ok := lookup(name); ok && v != "" {
		return v
	}
	return def
}

// WithKeyPrefix returns a KV that puts prefix before every key, so that several
// applications can share one Redis.
func WithKeyPrefix(kv KV, prefix string) KV {
	if prefix == "" {
		return kv
	}
	return &prefixKV{kv: kv, prefix: prefix}
}

type prefixKV struct {
	kv     KV
	prefix string
}

var _ KV = (*prefixKV)(nil)

func (p *prefixKV) Get(ctx context.Context, key string) ([]byte, error) {
	return p.kv.Get(ctx, p.prefix+key)
}
func (p *prefixKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	return p.kv.Set(ctx, p.prefix+key, v, ttl)
}
func (p *prefixKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	return p.kv.SetNX(ctx, p.prefix+key, v, ttl)
}
func (p *prefixKV) GetDel(ctx context.Context, key string) ([]byte, error) {
	return p.kv.GetDel(ctx, p.prefix+key)
}
func (p *prefixKV) Del(ctx context.Context, key string) error { return p.kv.Del(ctx, p.prefix+key) }
func (p *prefixKV) TTL(ctx context.Context, key string) (time.Duration, error) {
	return p.kv.TTL(ctx, p.prefix+key)
}
func (p *prefixKV) CompareAndDelete(ctx context.Context, key string, v []byte) (bool, error) {
	return p.kv.CompareAndDelete(ctx, p.prefix+key, v)
}
func (p *prefixKV) CompareAndExpire(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	return p.kv.CompareAndExpire(ctx, p.prefix+key, v, ttl)
}
func (p *prefixKV) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	return p.kv.CompareAndSwap(ctx, p.prefix+key, old, v, ttl)
}
func (p *prefixKV) scheduleAbsent(ctx context.Context, index string, members []string, due time.Time) error {
	return scheduleAbsent(ctx, p.kv, p.prefix+index, members, due)
}

func (p *prefixKV) Schedule(ctx context.Context, index, member string, due time.Time) error {
	return p.kv.Schedule(ctx, p.prefix+index, member, due)
}
func (p *prefixKV) Unschedule(ctx context.Context, index, member string) error {
	return p.kv.Unschedule(ctx, p.prefix+index, member)
}
func (p *prefixKV) Claim(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	return p.kv.Claim(ctx, p.prefix+index, now, lease, n)
}
func (p *prefixKV) Close() error { return closeKV(p.kv) }

// closeKV closes kv when it has a Close method.
func closeKV(kv KV) error {
	if c, ok := kv.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < 0 {
		return fmt.Errorf("%w: negative ttl %v", ErrInvalidArgument, ttl)
	}
	return nil
}

// pxMillis is d in whole milliseconds, at least 1 for a positive d: 0 would
// mean "no expiry" to the Redis scripts and "claimable at once" to Claim.
func pxMillis(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return max(d.Milliseconds(), 1)
}

// checkClaim rejects a Claim that could take nothing, or that would leave what
// it took due before now, free for the next caller to take again.
func checkClaim(lease time.Duration, n int) error {
	if n <= 0 {
		return fmt.Errorf("%w: claim count %d, want at least 1", ErrInvalidArgument, n)
	}
	if lease < 0 {
		return fmt.Errorf("%w: negative lease %v", ErrInvalidArgument, lease)
	}
	return nil
}

// claimWindow returns the scores a Claim reads and writes, in Unix
// milliseconds: members due at or before nowMs are taken and moved to untilMs,
// which a positive lease puts at least 1 ms past nowMs.
func claimWindow(now time.Time, lease time.Duration) (nowMs, untilMs int64) {
	nowMs = now.UnixMilli()
	return nowMs, nowMs + pxMillis(lease)
}
