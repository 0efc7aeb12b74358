// Package redistest gives tests a Redis to talk to: the server named by
// KVSTORE_HOST and KVSTORE_PORT when one answers, miniredis otherwise, and a
// failed test instead of the fallback when CI=true.
package redistest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// Addr is the address of the real Redis the tests use.
func Addr() string {
	host, port := os.Getenv("KVSTORE_HOST"), os.Getenv("KVSTORE_PORT")
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "6379"
	}
	return net.JoinHostPort(host, port)
}

// Real returns a client for the real Redis, closed when the test ends. Where none
// answers, the test is skipped, except under CI=true, where it fails.
func Real(t testing.TB) redis.UniversalClient {
	t.Helper()
	if err := ping(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis at %s is required under CI=true and did not answer: %v", Addr(), err)
		}
		t.Skipf("no redis at %s (%v); the miniredis variant of this test still runs", Addr(), err)
	}
	c := redis.NewClient(&redis.Options{Addr: Addr(), Password: os.Getenv("KVSTORE_PASSWORD"), PoolSize: 64})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// ping checks once, without retries, that the real Redis answers.
func ping() error {
	probe := redis.NewClient(&redis.Options{Addr: Addr(), Password: os.Getenv("KVSTORE_PASSWORD"), MaxRetries: -1})
	defer func() { _ = probe.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return probe.Ping(ctx).Err()
}

// Mini starts a miniredis server for the test and returns it with a client that
// talks to it in memory (miniredis.Dial), never through its port. The client
// neither retries a command nor dials again once the test has closed the
// server: every command after mr.Close() fails at once, as against a store that
// is down, and none can reach another test's miniredis that took the same port.
// A closed server stays closed for this client (mr.Restart is not supported).
func Mini(t testing.TB) (*miniredis.Miniredis, redis.UniversalClient) {
	t.Helper()
	mr := miniredis.RunT(t)
	// miniredis runs one command at a time, so the suites' races of a
	// thousand callers queue for the pool; on a loaded machine (a CI run
	// beside other work) the queue outlasts go-redis's 4 s pool timeout and
	// callers fail with "connection pool timeout" instead of being counted.
	c := redis.NewClient(&redis.Options{Addr: mr.Addr(), Dialer: dialWhileOpen(mr), MaxRetries: -1, DialerRetries: 1,
		PoolTimeout: time.Minute})
	t.Cleanup(func() { _ = c.Close() })
	return mr, c
}

// dialWhileOpen dials mr in memory until it is closed (mr.Ctx ends on Close),
// with a send buffer as a socket has (bufferedConn).
func dialWhileOpen(mr *miniredis.Miniredis) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(_ context.Context, _, addr string) (net.Conn, error) {
		closed := &net.OpError{Op: "dial", Net: "pipe", Err: errors.New("miniredis at " + addr + " was closed by the test")}
		if mr.Ctx.Err() != nil {
			return nil, closed
		}
		conn, err := mr.Dial()
		if err != nil {
			return nil, err
		}
		if mr.Ctx.Err() != nil { // closed while we dialed
			_ = conn.Close()
			return nil, closed
		}
		return buffered(conn), nil
	}
}

// Any returns the real Redis when it answers, miniredis otherwise (never under
// CI=true, where a missing Redis fails the test). It reports which one it gave.
func Any(t testing.TB) (c redis.UniversalClient, real bool) {
	t.Helper()
	if err := ping(); err == nil || os.Getenv("CI") == "true" {
		return Real(t), true
	}
	_, c = Mini(t)
	return c, false
}

// Prefix returns a key prefix unique to this test and deletes every key under it
// when the test ends, so tests can share one Redis.
func Prefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	p := "test:" + hex.EncodeToString(b) + ":"
	t.Cleanup(func() {
		ctx := context.Background()
		iter := c.Scan(ctx, 0, p+"*", 500).Iterator()
		for iter.Next(ctx) {
			c.Del(ctx, iter.Val())
		}
	})
	return p
}
