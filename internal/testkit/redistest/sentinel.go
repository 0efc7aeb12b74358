package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/redis/go-redis/v9"
)

// SentinelMaster is the master name the Sentinel started by Sentinel monitors.
const SentinelMaster = "mymaster"

// Sentinel starts a throwaway Redis master and one Sentinel that monitors it
// (quorum 1), both from the local redis-server binary, and returns a failover
// client that finds the master through the Sentinel. Both processes are killed
// when the test ends. Where redis-server is missing the test is skipped, except
// under CI=true, where it fails.
func Sentinel(t testing.TB) redis.UniversalClient {
	t.Helper()
	needBinaries(t, "redis-server")
	master := startServer(t, func(int, string) []string { return nil })
	host, port, _ := net.SplitHostPort(master.addr)
	sentinel := startServer(t, func(_ int, dir string) []string {
		// Sentinel rewrites its config file, so each attempt gets its own.
		conf := filepath.Join(dir, "sentinel.conf")
		monitor := fmt.Sprintf("sentinel monitor %s %s %s 1\n", SentinelMaster, host, port)
		if err := os.WriteFile(conf, []byte(monitor), 0o600); err != nil {
			t.Fatalf("writing %s: %v", conf, err)
		}
		return []string{conf, "--sentinel"}
	})
	c := redis.NewFailoverClient(&redis.FailoverOptions{
		MasterName: SentinelMaster, SentinelAddrs: []string{sentinel.addr}, PoolSize: 64})
	t.Cleanup(func() { _ = c.Close() })
	if err := c.Ping(context.Background()).Err(); err != nil {
		t.Fatalf("failover client via sentinel %s: %v", sentinel.addr, err)
	}
	return c
}
