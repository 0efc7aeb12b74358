package oauthflow

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
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
// a caller who needs Redis can act on ([Config.RequireKV] makes New fail
// instead). A malformed value (a port that is not a number from 1 to 65535, a
// host that is not a host name or an IP address) is a configuration error,
// not an outage: KVFromEnv returns no KV and an error wrapping
// [ErrInvalidArgument] that names the variable.
func KVFromEnv(ctx context.Context, log *slog.Logger) (KV, error) {
	return kvFromLookup(ctx, log, os.LookupEnv)
}

func kvFromLookup(ctx context.Context, log *slog.Logger, lookup func(string) (string, bool)) (KV, error) {
	if log == nil {
		log = slog.Default()
	}
	store, addr, err := redisFromLookup(ctx, log, lookup)
	if errors.Is(err, errs.InvalidArgument) {
		return nil, err
	}
	if err != nil {
		log.Warn("oauthflow: key-value store unreachable, using in-memory storage for this process; set Config.RequireKV to fail instead",
			slog.String("addr", addr), slog.String("error", err.Error()))
		return NewMemoryKV(), err
	}
	return store, nil
}

// redisFromLookup connects to the Redis the KVSTORE_* variables name, with no
// fallback: the error wraps ErrStoreUnavailable when it cannot be reached, and
// ErrInvalidArgument when a variable is malformed.
func redisFromLookup(ctx context.Context, log *slog.Logger, lookup func(string) (string, bool)) (KV, string, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	addr, err := redisAddr(envOr(lookup, envKVHost, "localhost"), envOr(lookup, envKVPort, "6379"))
	if err != nil {
		return nil, "", err
	}
	password, _ := lookup(envKVPassword)
	opts := &redis.Options{Addr: addr, Password: password}
	if err := ping(ctx, opts); err != nil {
		return nil, addr, errs.Store(ctx, "ping "+addr, err)
	}
	store := NewRedisKV(redis.NewClient(opts))
	store.r.OwnClient() // the store made the client, so its Close closes it
	log.Info("oauthflow: using Redis key-value store", slog.String("addr", addr))
	return store, addr, nil
}

// redisAddr joins host and port once each is well formed: a port from 1 to
// 65535, and a host name or an IP address (an IPv6 one with or without
// brackets), not a URL or a host with its port.
func redisAddr(host, port string) (string, error) {
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "", errs.Invalid("%s=%q: want a port number from 1 to 65535", envKVPort, port)
	}
	if ip := net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); ip != nil {
		return net.JoinHostPort(ip.String(), port), nil
	}
	if !validHostName(host) {
		return "", errs.Invalid("%s=%q: want a host name or an IP address, without a scheme or a port", envKVHost, host)
	}
	return net.JoinHostPort(host, port), nil
}

// validHostName reports whether host is made of DNS labels: letters, digits,
// "-" and "_", separated by dots.
func validHostName(host string) bool {
	if host == "" || len(host) > 253 {
		return false
	}
	for _, label := range strings.Split(strings.TrimSuffix(host, "."), ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range []byte(label) {
			if !keyspace.IsAlnum(c) && c != '-' && c != '_' {
				return false
			}
		}
	}
	return true
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
// applications can share one Redis. The prefix is put as it is: its separator
// is the caller's ("myapp:", not "myapp", whose keys would read
// "myappoauth:..."). [Config.KeyPrefix] must end in one.
func WithKeyPrefix(store KV, prefix string) KV {
	if prefix == "" {
		return store
	}
	return kv.WithPrefix(storeOf(store), prefix)
}

// keyPrefixSeparators are the characters a Config.KeyPrefix may end in.
const keyPrefixSeparators = ":/._-|"

// checkKeyPrefix refuses a prefix that would run into the keys after it, or
// holds a space or a control character.
func checkKeyPrefix(prefix string) error {
	if prefix == "" {
		return nil
	}
	if strings.IndexFunc(prefix, func(r rune) bool { return r <= ' ' || r == 0x7f }) >= 0 {
		return errs.Invalid("Config.KeyPrefix %q holds a space or a control character", prefix)
	}
	if !strings.ContainsAny(prefix[len(prefix)-1:], keyPrefixSeparators) {
		return errs.Invalid("Config.KeyPrefix %q runs into the keys after it: end it with a separator, as in %q", prefix, prefix+":")
	}
	return nil
}

// scannerOf returns the Scanner of store's backend, or kv.ErrCannotScan
// when it cannot list its keys.
func scannerOf(store KV) (kv.Scanner, error) {
	if s, ok := storeOf(store).(kv.Scanner); ok {
		return s, nil
	}
	return nil, kv.ErrCannotScan
}

// storeOf is the backend under a KV an app passed in: the store a MemoryKV or
// RedisKV is made of, whose capabilities the library uses; any other KV as it is.
func storeOf(store KV) kv.Store {
	switch s := store.(type) {
	case *MemoryKV:
		if s != nil && s.m != nil {
			return s.m
		}
	case *RedisKV:
		if s != nil && s.r != nil {
			return s.r
		}
	}
	return store
}

// backend is what MemoryKV and RedisKV are made of: the [KV] methods and Close.
type backend interface {
	KV
	Close() error
}

// MemoryKV is a [KV] held in process memory, for tests and single-instance
// apps. It honours TTLs and frees expired entries as it goes (no background
// goroutine). Values are copied in; Get hands back the stored slice, which
// must be treated as read-only. Close drops every entry and index; the store
// stays usable. Make one with [NewMemoryKV].
//
// Due-time indexes (Schedule, Unschedule, Claim) are kept apart from the
// key/value entries, so an index and a key may share a name here; on Redis they
// may not, and the library never gives them the same name.
type MemoryKV struct {
	backend
	m *kv.Memory
}

var _ KV = (*MemoryKV)(nil)

// NewMemoryKV returns an empty in-memory store on the real clock.
func NewMemoryKV() *MemoryKV { return newMemoryKV(nil) }

// newMemoryKV is an empty in-memory store that reads expiries against the
// clock now (nil: time.Now): the tests' fake clocks.
func newMemoryKV(now func() time.Time) *MemoryKV {
	m := &kv.Memory{}
	m.SetClock(now)
	return &MemoryKV{backend: m, m: m}
}

// RedisKV is a [KV] over any go-redis client: a single node, Sentinel or
// Cluster. Every command touches one key, so it is Cluster-safe. Due-time
// indexes are sorted sets scored by Unix milliseconds; Claim is one script on
// one key. The library's own index of due work, a member per connection, is
// kept in small sorted sets that Redis stores compactly (keys under
// "oauth:sys:{due}", whose hash tag puts them in one Cluster slot); what an
// earlier version wrote to "oauth:sys:due" is still claimed from there.
type RedisKV struct {
	backend
	r *kv.Redis
}

var _ KV = (*RedisKV)(nil)

// NewRedisKV returns a KV over c. The caller keeps c and closes it: Close
// leaves it open. (The store [KVFromEnv] connects makes its own client, and
// its Close closes it.)
func NewRedisKV(c redis.UniversalClient) *RedisKV {
	r := kv.NewRedis(c)
	return &RedisKV{backend: r, r: r}
}

// RedisLogger returns a go-redis logger that writes to log, at warning level
// with source=go-redis, instead of go-redis's own lines on standard error
// (during an outage its connection pool writes a few a second). go-redis
// keeps one logger for the whole process, so oauthflow never sets it for
// you; install it once in main:
//
//	redis.SetLogger(oauthflow.RedisLogger(logger))
//
// Pass a logger whose level is above warning to quiet go-redis.
func RedisLogger(log *slog.Logger) interface {
	Printf(ctx context.Context, format string, v ...any)
} {
	if log == nil {
		log = slog.Default()
	}
	return redisLog{log: log}
}

type redisLog struct{ log *slog.Logger }

func (l redisLog) Printf(ctx context.Context, format string, v ...any) {
	if ctx == nil {
		ctx = context.Background()
	}
	msg := strings.TrimPrefix(fmt.Sprintf(format, v...), "redis: ")
	l.log.WarnContext(ctx, "oauthflow: go-redis: "+msg, slog.String("source", "go-redis"))
}
