package kv

import (
	"context"
	"errors"
	"sync"
	"time"
	"unsafe"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/xcontext"
	"github.com/redis/go-redis/v9"
)

// Redis is a Store over any go-redis client: a single node, Sentinel or
// Cluster. Every command touches one key, or the keys of one sharded index,
// which a hash tag puts in one slot (see Sharder), so it is Cluster-safe.
type Redis struct {
	c     redis.UniversalClient
	owned bool
	hub   pubsubHub // watchers of lock releases (WatchRelease)
	// channelTag tells this store's release channels from those of stores on
	// other databases of the same server (releaseChannel).
	channelTag string
	levels     sync.Map // index → *shardLevels: what the store last said of a sharded index's levels
}

var (
	_ Store           = (*Redis)(nil)
	_ Batcher         = (*Redis)(nil)
	_ Pipeliner       = (*Redis)(nil)
	_ Scanner         = (*Redis)(nil)
	_ IndexReader     = (*Redis)(nil)
	_ AbsentScheduler = (*Redis)(nil)
	_ ReleaseWatcher  = (*Redis)(nil)
	_ ReplicaWaiter   = (*Redis)(nil)
)

// NewRedis wraps c. The caller keeps ownership of c unless OwnClient is called.
func NewRedis(c redis.UniversalClient) *Redis {
	return &Redis{c: c, channelTag: channelTag(c)}
}

// OwnClient makes Close close the client too.
func (r *Redis) OwnClient() { r.owned = true }

// Client returns the underlying client.
func (r *Redis) Client() redis.UniversalClient { return r.c }

// Close closes the client when the store owns it.
func (r *Redis) Close() error {
	if r.owned {
		return r.c.Close()
	}
	return nil
}

// redisErr maps redis.Nil to errs.NotFound; this is the only place that does.
func redisErr(err error) error {
	if errors.Is(err, redis.Nil) {
		return errs.NotFound
	}
	return err
}

// Get returns the value of key, or errs.NotFound. The value is read-only (see Store).
func (r *Redis) Get(ctx context.Context, key string) ([]byte, error) {
	s, err := r.c.Get(xcontext.OrBackground(ctx), key).Result()
	return ReadOnlyBytes(s), redisErr(err)
}

// Set stores value under key with ttl (0: no expiry).
func (r *Redis) Set(ctx context.Context, key string, value []byte, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	return r.c.Set(xcontext.OrBackground(ctx), key, value, ttl).Err()
}

// SetNX stores value only when key is absent.
func (r *Redis) SetNX(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	// SET key value NX [PX ttl]: SetNX with ttl 0 would mean "keep ttl" in some versions.
	args := redis.SetArgs{Mode: "NX", TTL: ttl}
	err := r.c.SetArgs(xcontext.OrBackground(ctx), key, value, args).Err()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	return err == nil, err
}

// GetDel returns and removes key in one command (Redis 6.2 GETDEL).
func (r *Redis) GetDel(ctx context.Context, key string) ([]byte, error) {
	s, err := r.c.GetDel(xcontext.OrBackground(ctx), key).Result()
	return ReadOnlyBytes(s), redisErr(err)
}

// ReadOnlyBytes is s's memory as a byte slice, without the copy []byte(s)
// makes: a hot read pays for one reply, not two. Nothing may write the result;
// the Store contract makes every value a read returns read-only, and nothing in
// this package writes one.
func ReadOnlyBytes(s string) []byte {
	if s == "" {
		return []byte{}
	}
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// Del removes key.
func (r *Redis) Del(ctx context.Context, key string) error {
	return r.c.Del(xcontext.OrBackground(ctx), key).Err()
}

// TTL returns the time left on key, 0 when it has none. A key in its last
// millisecond, which PTTL answers 0 (Redis clamps the time left to 0, never
// to -1), has a millisecond left: 0 would say it never expires.
func (r *Redis) TTL(ctx context.Context, key string) (time.Duration, error) {
	d, err := r.c.PTTL(xcontext.OrBackground(ctx), key).Result()
	switch {
	case err != nil:
		return 0, redisErr(err)
	case d == -2: // go-redis passes -2 (absent) and -1 (no expiry) through unscaled
		return 0, errs.NotFound
	case d < 0:
		return 0, nil
	}
	return max(d, time.Millisecond), nil
}

var (
	compareAndDelete = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end
return 0`)
	compareAndExpire = redis.NewScript(`
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[2]) > 0 then return redis.call("PEXPIRE", KEYS[1], ARGV[2]) end
return redis.call("PERSIST", KEYS[1]) + 1`)
	compareAndSwap = redis.NewScript(`
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return 0 end
if tonumber(ARGV[3]) > 0 then redis.call("SET", KEYS[1], ARGV[2], "PX", ARGV[3]) else redis.call("SET", KEYS[1], ARGV[2]) end
return 1`)
)

// CompareAndDelete removes key only while it holds value.
func (r *Redis) CompareAndDelete(ctx context.Context, key string, value []byte) (bool, error) {
	n, err := compareAndDelete.Run(xcontext.OrBackground(ctx), r.c, []string{key}, value).Int()
	return n == 1, err
}

// CompareAndExpire resets key's ttl only while it holds value.
func (r *Redis) CompareAndExpire(ctx context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	n, err := compareAndExpire.Run(xcontext.OrBackground(ctx), r.c, []string{key}, value, pxMillis(ttl)).Int()
	return n >= 1, err
}

// CompareAndSwap sets key to value with ttl only while it holds old, in one
// script on one key (Cluster-safe).
func (r *Redis) CompareAndSwap(ctx context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	n, err := compareAndSwap.Run(xcontext.OrBackground(ctx), r.c, []string{key}, old, value, pxMillis(ttl)).Int()
	return n == 1, err
}

var claimDue = redis.NewScript(`
local due = redis.call("ZRANGEBYSCORE", KEYS[1], "-inf", ARGV[1], "LIMIT", 0, ARGV[2])
for _, member in ipairs(due) do redis.call("ZADD", KEYS[1], ARGV[3], member) end
return due`)

// Schedule sets member's due time in index (ZADD; the score is Unix ms). The
// index key is given no expiry: its members live until they are unscheduled.
func (r *Redis) Schedule(ctx context.Context, index, member string, due time.Time) error {
	z := redis.Z{Score: float64(due.UnixMilli()), Member: member}
	return r.c.ZAdd(xcontext.OrBackground(ctx), index, z).Err()
}

// Unschedule removes member from index (ZREM).
func (r *Redis) Unschedule(ctx context.Context, index, member string) error {
	return r.c.ZRem(xcontext.OrBackground(ctx), index, member).Err()
}

// Claim takes up to n due members of index and moves them to now+lease, in one
// script on one key (Cluster-safe). Redis orders ties by member, as Memory does.
func (r *Redis) Claim(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	if err := checkClaim(lease, n); err != nil {
		return nil, err
	}
	nowMs, untilMs := claimWindow(now, lease)
	return claimDue.Run(xcontext.OrBackground(ctx), r.c, []string{index}, nowMs, n, untilMs).StringSlice()
}
