package oauthflow_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/redis/go-redis/v9"
)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return strconv.Itoa(port)
}

// With RequireKV and no Redis, New fails, and what it logs says so: never
// that it goes on in memory.
func TestRequireKVFailsWithoutClaimingAFallback(t *testing.T) {
	t.Setenv("KVSTORE_HOST", "127.0.0.1")
	t.Setenv("KVSTORE_PORT", closedPort(t))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{RequireKV: true, Logger: log})
	if err == nil {
		_ = m.Close()
		t.Fatal("New succeeded with RequireKV and no Redis")
	}
	if !errors.Is(err, oauthflow.ErrStoreUnavailable) {
		t.Errorf("err = %v, want ErrStoreUnavailable", err)
	}
	if strings.Contains(logs.String(), "in-memory") {
		t.Errorf("the log claims a fallback that does not happen:\n%s", logs.String())
	}
}

// Without RequireKV the fallback is taken and said.
func TestKVFromEnvFallsBackToMemoryAndSaysSo(t *testing.T) {
	t.Setenv("KVSTORE_HOST", "127.0.0.1")
	t.Setenv("KVSTORE_PORT", closedPort(t))
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if !strings.Contains(logs.String(), "in-memory") {
		t.Errorf("the fallback to memory is not logged:\n%s", logs.String())
	}
}

// go-redis's own lines reach the app's logger once it installs RedisLogger.
func TestRedisLoggerRoutesGoRedisLines(t *testing.T) {
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	redis.SetLogger(oauthflow.RedisLogger(log))
	t.Cleanup(func() { redis.SetLogger(oauthflow.RedisLogger(slog.New(slog.DiscardHandler))) })
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + closedPort(t), MaxRetries: -1, PoolSize: 1})
	defer c.Close()
	_ = c.Ping(context.Background()).Err()
	if !strings.Contains(logs.String(), "source=go-redis") || !strings.Contains(logs.String(), "dial") {
		t.Errorf("go-redis's dial failure did not reach the logger:\n%s", logs.String())
	}
}
