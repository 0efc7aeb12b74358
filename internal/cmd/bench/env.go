package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// env is what every area measures against: one Redis client, a key prefix of
// this run's own, and the options.
type env struct {
	opts   options
	rdb    *redis.Client
	mini   *miniredis.Miniredis // where no Redis answered
	prefix string
	log    *slog.Logger
}

// newEnv connects to the Redis at KVSTORE_HOST:KVSTORE_PORT, or starts a
// miniredis in this process where none answers, so the harness runs anywhere.
func newEnv(o options) (*env, error) {
	e := &env{opts: o, log: slog.New(slog.DiscardHandler)}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	e.prefix = "bench:" + hex.EncodeToString(b) + ":"
	addr := redisAddr()
	if err := ping(addr); err != nil {
		mr, err := miniredis.Run()
		if err != nil {
			return nil, err
		}
		e.mini, addr = mr, mr.Addr()
	}
	e.rdb = newClient(addr)
	return e, nil
}

func redisAddr() string {
	host, port := os.Getenv("KVSTORE_HOST"), os.Getenv("KVSTORE_PORT")
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "6379"
	}
	return host + ":" + port
}

// newClient is the one client shape both sides of every ratio use.
func newClient(addr string) *redis.Client {
	return redis.NewClient(&redis.Options{Addr: addr, Password: os.Getenv("KVSTORE_PASSWORD"), PoolSize: 128})
}

func ping(addr string) error {
	c := redis.NewClient(&redis.Options{Addr: addr, Password: os.Getenv("KVSTORE_PASSWORD"), MaxRetries: -1})
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return c.Ping(ctx).Err()
}

// close deletes every key this run wrote (never FLUSHALL: the Redis is shared).
func (e *env) close() {
	ctx := context.Background()
	iter := e.rdb.Scan(ctx, 0, e.prefix+"*", 1000).Iterator()
	for iter.Next(ctx) {
		e.rdb.Del(ctx, iter.Val())
	}
	_ = e.rdb.Close()
	if e.mini != nil {
		e.mini.Close()
	}
}

// machine is the report's header line.
func (e *env) machine() string {
	return fmt.Sprintf("%d cores (%s), GOMAXPROCS %d, %s %s/%s, go-redis %s, %s",
		runtime.NumCPU(), cpuModel(), runtime.GOMAXPROCS(0), runtime.Version(),
		runtime.GOOS, runtime.GOARCH, depVersion("github.com/redis/go-redis/v9"), e.redisVersion())
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "CPU model unknown"
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "CPU model unknown"
}

func depVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

func (e *env) redisVersion() string {
	if e.mini != nil {
		return "miniredis in process (no Redis answered; ratios are not meaningful)"
	}
	info, err := e.rdb.Info(context.Background(), "server").Result()
	if err != nil {
		return "Redis version unknown"
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return "Redis " + v + " on " + redisAddrKind()
		}
	}
	return "Redis version unknown"
}

func redisAddrKind() string {
	if h := os.Getenv("KVSTORE_HOST"); h != "" && h != "127.0.0.1" && h != "localhost" {
		return "the network"
	}
	return "loopback"
}
