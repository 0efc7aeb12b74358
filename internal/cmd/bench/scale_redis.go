package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/redis/go-redis/v9"
)

// scaler runs the scale mode against one Redis.
type scaler struct {
	e      *env
	reg    *oauthflow.Registry
	floors *floors
	res    scaleResult
}

func newScaler(e *env) (*scaler, error) {
	reg, err := githubRegistry()
	if err != nil {
		return nil, err
	}
	return &scaler{e: e, reg: reg, floors: newFloors(e.rdb, e.prefix), res: scaleResult{opts: e.opts, prefix: e.prefix}}, nil
}

// scalePoint is every Redis figure at one N.
type scalePoint struct {
	n       int
	configs []*configResult
	floor   kindFloors    // Redis's own costs, beside the main configuration's keys
	worker  workerCost    // the worker's pass and claims (main configuration)
	lists   []listCost    // Tokens.Connections (main configuration)
	reenc   reencryptCost // main configuration
	// storeLimit is the time the same commands take sent by hand (main configuration).
	storeLimit time.Duration
}

// main is the point's main configuration (sealed, refresh ahead).
func (p *scalePoint) main() *configResult {
	for _, c := range p.configs {
		if c.cfg.main() {
			return c
		}
	}
	return nil
}

// configResult is one configuration at one N.
type configResult struct {
	cfg         scaleConfig
	census      census
	store, read time.Duration
	usedMemory  int64 // INFO used_memory's growth over the store and the reads
	// sweeps are the idle passes that swept the due index's levels below its
	// own after the store, as the worker's do, before the census; swept is
	// how long they took.
	sweeps int
	swept  time.Duration
}

// perConn is the kind's bytes per connection.
func (c *configResult) perConn(kind string, n int) float64 {
	return float64(c.census.of(kind).bytes) / float64(n)
}

// kindFloors are Redis's own costs for the main configuration's kinds: a key
// of the kind's name length holding a 1-byte string, and a sorted set's cost
// per member with members as long as the kind's and with 1-byte members.
// members are what one of the kind's sorted sets holds (user-0000000's own,
// or the first of a shared one), to show what the library puts in them.
type kindFloors struct {
	key              map[string]int64
	sameLen, oneByte map[string]float64
	members          map[string][]string
}

// shared reports whether the census found kind as one sorted set that every connection shares.
func shared(c census, kind string) bool { return zsetKind(kind) && c.of(kind).keys == 1 }

// point measures every configuration at n, and the main one's timings.
func (s *scaler) point(ctx context.Context, n int) (*scalePoint, error) {
	p := &scalePoint{n: n}
	for _, cfg := range scaleConfigs {
		c, err := s.config(ctx, n, cfg, p)
		if err != nil {
			return nil, fmt.Errorf("encryption %s, refresh ahead %s: %w", onOff(cfg.encrypted), onOff(cfg.ahead), err)
		}
		p.configs = append(p.configs, c)
		s.progress("N=%d, encryption %s, refresh ahead %s: stored in %s", n, onOff(cfg.encrypted), onOff(cfg.ahead), c.store.Round(time.Millisecond))
	}
	return p, nil
}

// config stores n connections in one configuration, takes the census, and in
// the main configuration the timings; it leaves nothing behind.
func (s *scaler) config(ctx context.Context, n int, cfg scaleConfig, p *scalePoint) (_ *configResult, err error) {
	defer func() {
		if cerr := clearPrefix(ctx, s.e.rdb, s.e.prefix); err == nil {
			err = cerr
		}
	}()
	mod, err := scaleModule(ctx, oauthflow.NewRedisKV(s.e.rdb), s.e.prefix, cfg, s.reg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = mod.Close() }()
	c := &configResult{cfg: cfg}
	used := s.usedMemory(ctx)
	if c.store, c.read, err = storeAll(ctx, mod, n); err != nil {
		return nil, err
	}
	if c.sweeps, c.swept, err = s.sweepLevels(ctx, mod.KV); err != nil {
		return nil, fmt.Errorf("sweep: %w", err)
	}
	c.usedMemory = s.usedMemory(ctx) - used
	if c.census, err = takeCensus(ctx, s.e.rdb, s.e.prefix); err != nil {
		return nil, fmt.Errorf("census: %w", err)
	}
	if cfg.main() {
		err = s.mainFigures(ctx, mod, n, c, p)
	}
	return c, err
}

// mainFigures are the figures taken in the main configuration only, on the
// connections it stored: Redis's floors, the store's limit, the re-encryption,
// the worker's claims and the listings.
func (s *scaler) mainFigures(ctx context.Context, mod *oauthflow.Module, n int, c *configResult, p *scalePoint) error {
	var err error
	if p.floor, err = s.kindFloors(ctx, c.census, n); err != nil {
		return fmt.Errorf("floors: %w", err)
	}
	if p.storeLimit, err = s.storeByHand(ctx, n, c.census); err != nil {
		return fmt.Errorf("store by hand: %w", err)
	}
	if p.reenc, err = s.reencrypt(ctx, mod, n); err != nil {
		return fmt.Errorf("reencrypt: %w", err)
	}
	if p.worker, err = s.workerCost(ctx, mod.KV); err != nil {
		return fmt.Errorf("worker: %w", err)
	}
	if p.lists, err = s.listCosts(ctx, mod); err != nil {
		return fmt.Errorf("connections: %w", err)
	}
	return nil
}

// kindFloors measures Redis's own costs beside the census's kinds.
func (s *scaler) kindFloors(ctx context.Context, c census, n int) (kindFloors, error) {
	f := kindFloors{key: map[string]int64{}, sameLen: map[string]float64{}, oneByte: map[string]float64{}, members: map[string][]string{}}
	for kind, got := range c {
		var err error
		if f.key[kind], err = s.floors.key(ctx, got.nameLen()); err != nil {
			return f, err
		}
		if !zsetKind(kind) {
			continue
		}
		if f.members[kind], err = s.sampleMembers(ctx, kind); err != nil {
			return f, err
		}
		count := n // a shared sorted set holds every connection's member
		switch {
		case kind == "due": // the members of a shard, beside those of a set of a shard's size
			count = int((got.members + got.keys/2) / max(got.keys, 1))
		case !shared(c, kind):
			continue // a sorted set per user is weighed per key
		}
		if f.sameLen[kind], err = s.floors.perMember(ctx, len(f.members[kind][0]), count); err != nil {
			return f, err
		}
		if f.oneByte[kind], err = s.floors.perMember(ctx, 1, count); err != nil {
			return f, err
		}
	}
	return f, nil
}

// sampleMembers are the members of user-0000000's sorted set of kind, or the
// first member of a shared one (of the due index's head, of the shard it
// names first).
func (s *scaler) sampleMembers(ctx context.Context, kind string) ([]string, error) {
	name, stop := "oauth:conn:"+userOf(0), int64(-1)
	switch kind {
	case "conn":
	case "due", "duehead":
		name, stop = "oauth:sys:{due}", 0
		if kind == "due" {
			ids, err := s.e.rdb.ZRange(ctx, s.e.prefix+name, 0, 0).Result()
			if err != nil || len(ids) == 0 {
				return nil, fmt.Errorf("the due index's head names no shard: %v", err)
			}
			name += ":" + ids[0]
		}
	default:
		name, stop = "oauth:sys:"+kind, 0
	}
	ms, err := s.e.rdb.ZRange(ctx, s.e.prefix+name, 0, stop).Result()
	if err == nil && len(ms) == 0 {
		err = fmt.Errorf("%s holds no member", name)
	}
	return ms, err
}

// usedMemory is INFO's used_memory: the whole Redis, others' keys included.
func (s *scaler) usedMemory(ctx context.Context) int64 {
	info, err := s.e.rdb.Info(ctx, "memory").Result()
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// storeByHand is the store's limit: the commands a sign-in's write sends
// (the record's SET with its time to live, the connection index's ZADD and
// refresh ahead's two, its due entry's into one of handShards sorted sets),
// one pipeline per connection, on as many goroutines, with a value as long
// as the library's record, under a prefix of its own.
// handShards are the sorted sets storeByHand writes due entries to, as many
// as the library's due index has shards at a hundred thousand connections.
const handShards = 2048

func (s *scaler) storeByHand(ctx context.Context, n int, c census) (time.Duration, error) {
	prefix := s.e.prefix + "hand:"
	defer func() { _ = clearPrefix(ctx, s.e.rdb, prefix) }()
	token := c.of("token")
	value := strings.Repeat("v", int(token.values/max(token.keys, 1)))
	start := time.Now()
	err := parallel(n, func(i int) error {
		user, now := userOf(i), float64(time.Now().UnixMilli())
		pipe := s.e.rdb.Pipeline()
		pipe.Set(ctx, prefix+"oauth:"+user+":"+scaleProvider, value, refreshableTTL)
		pipe.ZAdd(ctx, prefix+"oauth:conn:"+user, redis.Z{Score: now, Member: scaleProvider})
		pipe.ZAdd(ctx, prefix+"oauth:sys:seen", redis.Z{Score: now, Member: scaleProvider + ":" + user})
		pipe.ZAdd(ctx, prefix+"oauth:sys:{due}:"+strconv.Itoa(i%handShards), redis.Z{Score: now + 7*3600e3, Member: "a:" + scaleProvider + ":" + user})
		_, err := pipe.Exec(ctx)
		return err
	})
	return time.Since(start), err
}
