package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// keyKind is one kind of key the library writes, told by its name.
type keyKind struct {
	name, label string
	zset        bool
}

// keyKinds are the kinds the census tells apart, in the report's order.
var keyKinds = []keyKind{
	{name: "token", label: "token record `oauth:{user}:{provider}`"},
	{name: "conn", label: "connection index `oauth:conn:{user}`", zset: true},
	{name: "due", label: "due index shards `oauth:sys:{due}:{level}:{i}`", zset: true},
	{name: "duehead", label: "due index head `oauth:sys:{due}` and levels (shared)", zset: true},
	{name: "seen", label: "seen index `oauth:sys:seen` (shared)", zset: true},
	{name: "meta", label: "connection health `oauth:meta:{user}:{provider}`"},
	{name: "run", label: "run `oauth:run:{id}`"},
	{name: "doc", label: "run document `oauth:doc:{id}:{name}`"},
	{name: "session", label: "pending sign-in `oauth:session:{state}`"},
	{name: "lock", label: "lock `oauth:lock:…`"},
	{name: "other", label: "any other key"},
}

// kindOf tells the kind of a key named name (without the run's prefix).
func kindOf(name string) string {
	rest, ok := strings.CutPrefix(name, "oauth:")
	if !ok {
		return "other"
	}
	switch first, _, _ := strings.Cut(rest, ":"); first {
	case "conn", "meta", "run", "doc", "session", "lock":
		return first
	case "sys":
		switch {
		case rest == "sys:{due}" || rest == "sys:{due}:levels":
			return "duehead"
		case rest == "sys:due" || strings.HasPrefix(rest, "sys:{due}:"): // the shards, and the index as one set
			return "due"
		case rest == "sys:seen":
			return "seen"
		}
		return "other"
	}
	return "token"
}

func zsetKind(kind string) bool {
	for _, k := range keyKinds {
		if k.name == kind {
			return k.zset
		}
	}
	return false
}

// kindBytes is what the census found of one kind: sums over its keys.
type kindBytes struct {
	keys    int64
	bytes   int64 // MEMORY USAGE key SAMPLES 0
	values  int64 // string values' lengths (STRLEN)
	members int64 // sorted sets' members (ZCARD)
	names   int64 // key names' lengths, the run's prefix included
}

func (k kindBytes) nameLen() int { return int((k.names + k.keys/2) / max(k.keys, 1)) }

// census is every key under the prefix, by kind.
type census map[string]*kindBytes

// takeCensus sums MEMORY USAGE (every element counted: SAMPLES 0) of every
// key under prefix, by kind.
func takeCensus(ctx context.Context, rdb *redis.Client, prefix string) (census, error) {
	c := census{}
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return nil, err
		}
		if err := c.add(ctx, rdb, prefix, keys); err != nil {
			return nil, err
		}
		if cursor = next; cursor == 0 {
			return c, nil
		}
	}
}

// add counts keys, reading their sizes in one round trip. A key of
// another type than its kind's (the due index's levels, a hash) counts no
// members or value bytes.
func (c census) add(ctx context.Context, rdb *redis.Client, prefix string, keys []string) error {
	pipe := rdb.Pipeline()
	usage, size := make([]*redis.IntCmd, len(keys)), make([]*redis.IntCmd, len(keys))
	for i, key := range keys {
		usage[i] = pipe.MemoryUsage(ctx, key, 0)
		if zsetKind(kindOf(strings.TrimPrefix(key, prefix))) {
			size[i] = pipe.ZCard(ctx, key)
		} else {
			size[i] = pipe.StrLen(ctx, key)
		}
	}
	_, _ = pipe.Exec(ctx)
	for i, key := range keys {
		kind := kindOf(strings.TrimPrefix(key, prefix))
		if err := usage[i].Err(); err == redis.Nil {
			continue // expired between the SCAN and the read
		} else if err != nil {
			return err
		}
		k := c.kind(kind)
		k.keys, k.bytes, k.names = k.keys+1, k.bytes+usage[i].Val(), k.names+int64(len(key))
		if zsetKind(kind) {
			k.members += size[i].Val()
		} else {
			k.values += size[i].Val()
		}
	}
	return nil
}

func (c census) kind(name string) *kindBytes {
	if c[name] == nil {
		c[name] = &kindBytes{}
	}
	return c[name]
}

// of is the kind's sums, zero when the census found none.
func (c census) of(name string) kindBytes {
	if k := c[name]; k != nil {
		return *k
	}
	return kindBytes{}
}

// total is the bytes of every kind.
func (c census) total() int64 {
	var t int64
	for _, k := range c {
		t += k.bytes
	}
	return t
}

// clearPrefix deletes every key under prefix, a thousand at a time (never
// FLUSHALL: the Redis is shared).
func clearPrefix(ctx context.Context, rdb *redis.Client, prefix string) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := rdb.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// refreshableTTL is the time to live the library gives a record with a
// refresh token; the floors' keys carry it too.
const refreshableTTL = 30 * 24 * time.Hour

// floors are Redis's own costs, measured on keys of the run's own that hold
// next to nothing: what any key of a name that long costs, and what a sorted
// set's member costs.
type floors struct {
	rdb    *redis.Client
	prefix string
	keys   map[int]int64      // name length → MEMORY USAGE of a 1-byte string under such a name
	member map[[2]int]float64 // {member length, members} → a sorted set's MEMORY USAGE per member
}

func newFloors(rdb *redis.Client, prefix string) *floors {
	return &floors{rdb: rdb, prefix: prefix + "floor:", keys: map[int]int64{}, member: map[[2]int]float64{}}
}

// key is MEMORY USAGE of a key whose name (prefix included) is nameLen bytes
// long and holds a 1-byte string: Redis's minimum for a key of that name.
func (f *floors) key(ctx context.Context, nameLen int) (int64, error) {
	if b, ok := f.keys[nameLen]; ok {
		return b, nil
	}
	name := f.prefix + strings.Repeat("k", max(nameLen-len(f.prefix), 1))
	defer f.rdb.Del(ctx, name)
	if err := f.rdb.Set(ctx, name, "x", refreshableTTL).Err(); err != nil {
		return 0, err
	}
	b, err := f.rdb.MemoryUsage(ctx, name, 0).Result()
	f.keys[nameLen] = b
	return b, err
}

// perMember is MEMORY USAGE per member of a sorted set of count members each
// memberLen bytes long (1-byte members: at most 256 of them).
func (f *floors) perMember(ctx context.Context, memberLen, count int) (float64, error) {
	if memberLen == 1 {
		count = min(count, 256)
	}
	at := [2]int{memberLen, count}
	if b, ok := f.member[at]; ok {
		return b, nil
	}
	name := f.prefix + "zset"
	defer f.rdb.Unlink(ctx, name)
	for from := 0; from < count; from += 1000 {
		zs := make([]redis.Z, 0, 1000)
		for i := from; i < min(from+1000, count); i++ {
			zs = append(zs, redis.Z{Score: float64(i), Member: memberOf(i, memberLen)})
		}
		if err := f.rdb.ZAdd(ctx, name, zs...).Err(); err != nil {
			return 0, err
		}
	}
	b, err := f.rdb.MemoryUsage(ctx, name, 0).Result()
	f.member[at] = float64(b) / float64(count)
	return f.member[at], err
}

// memberOf is the i-th distinct member of length n: a byte for n = 1, else i
// in decimal, padded with zeros.
func memberOf(i, n int) string {
	if n == 1 {
		return string([]byte{byte(i)})
	}
	return fmt.Sprintf("%0*d", n, i)
}
