package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster starts a throwaway Redis Cluster of three masters (no replicas) from
// the local redis-server binary and returns a cluster client for it. The servers
// are killed and their files removed when the test ends, so tests need no key
// cleanup. Where redis-server or redis-cli is missing the test is skipped, except
// under CI=true, where it fails.
//
// The cluster is ready about 2 s after it starts: a master refuses to report
// cluster_state:ok during its first 2 s (CLUSTER_WRITABLE_DELAY in Redis).
func Cluster(t testing.TB) redis.UniversalClient {
	t.Helper()
	needBinaries(t, "redis-server", "redis-cli")
	addrs := make([]string, 3)
	for i := range addrs {
		addrs[i] = startServer(t, func(port int, dir string) []string {
			return []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
				// Far above a loaded machine's scheduling stalls; the default 15 s
				// makes redis-cli wait a second longer for the nodes to join.
				"--cluster-node-timeout", "5000",
			}
		}).addr
	}
	createCluster(t, addrs)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs, PoolSize: 64})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// createCluster spreads the slots over addrs with redis-cli and waits until
// every node reports the cluster healthy.
func createCluster(t testing.TB, addrs []string) {
	t.Helper()
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	out, err := exec.Command("redis-cli", args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "All 16384 slots covered") {
		t.Fatalf("redis-cli --cluster create: %v\n%s", err, out)
	}
	for _, addr := range addrs {
		waitClusterOK(t, addr)
	}
}

// waitClusterOK waits until the node at addr says cluster_state:ok.
func waitClusterOK(t testing.TB, addr string) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer func() { _ = c.Close() }()
	var info string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		info, err = c.ClusterInfo(context.Background()).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return
		}
	}
	t.Fatalf("redis cluster node %s never reported cluster_state:ok:\n%s", addr, info)
}

// needBinaries skips the test when a binary is missing, or fails it under CI=true.
func needBinaries(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		if _, err := exec.LookPath(name); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required under CI=true (apt-get install redis-server): %v", name, err)
			}
			t.Skipf("%s not installed (%v); install the redis-server package to run this test", name, err)
		}
	}
}

// server is one redis-server process started by a test.
type server struct {
	addr   string
	log    string
	exited chan struct{} // closed once the process has exited and been reaped
	cmd    *exec.Cmd
}

// kill ends the server at once, as a crash would, and waits until it is gone.
func (s *server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}

// startServer starts redis-server on a free loopback port with the common test
// settings plus extra(port, dir), waits until it answers PING, and kills it when
// the test ends. A port taken between choosing it and binding it is retried.
func startServer(t testing.TB, extra func(port int, dir string) []string) *server {
	t.Helper()
	var lastErr error
	for range 5 {
		s, err := tryStartServer(t, extra)
		if err == nil {
			return s
		}
		lastErr = err
		if !strings.Contains(err.Error(), "in use") {
			break
		}
	}
	t.Fatalf("starting redis-server: %v", lastErr)
	return nil
}

func tryStartServer(t testing.TB, extra func(port int, dir string) []string) (*server, error) {
	port, dir := freePort(t), t.TempDir()
	s := &server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		log: filepath.Join(dir, "redis.log"), exited: make(chan struct{})}
	args := append(extra(port, dir), "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", dir, "--logfile", s.log)
	cmd := exec.Command("redis-server", args...)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.cmd = cmd
	go func() { _ = cmd.Wait(); close(s.exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-s.exited })
	if err := s.waitReady(); err != nil {
		_ = cmd.Process.Kill()
		<-s.exited
		logs, _ := os.ReadFile(s.log)
		return nil, fmt.Errorf("redis-server %s: %w\n%s", strings.Join(args, " "), err, logs)
	}
	return s, nil
}

// waitReady waits until the server answers PING, or reports why it cannot.
func (s *server) waitReady() error {
	c := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond})
	defer func() { _ = c.Close() }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		select {
		case <-s.exited:
			return errors.New("exited before answering PING")
		case <-time.After(10 * time.Millisecond):
		}
		if c.Ping(context.Background()).Err() == nil {
			return nil
		}
	}
	return errors.New("no answer to PING within 10s")
}

// freePort returns a loopback port that is free now and whose cluster bus port
// (port+10000) is free too, so it must be below 55536.
func freePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("finding a free port: %v", err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if port > 65535-10000 {
			continue
		}
		bus, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port+10000)))
		if err != nil {
			continue
		}
		_ = bus.Close()
		return port
	}
	t.Fatal("no free loopback port below 55536 with a free bus port")
	return 0
}
