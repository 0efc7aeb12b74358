package redistest

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Pair is a Redis master with one replica, each a redis-server process the
// test started, and a client that follows whichever of them is the master,
// as a Sentinel client would after a failover. The replica reaches its
// master through a link the test can cut, so that a write the master
// acknowledged can be kept from the replica, deterministically.
type Pair struct {
	Client          redis.UniversalClient
	master, replica *server
	link            *link
	current         atomic.Pointer[string] // the address the client dials
}

// Replicated starts a Pair, waits until the replica is in sync, and kills
// both when the test ends. Where redis-server is missing the test is skipped,
// except under CI=true, where it fails.
func Replicated(t testing.TB) *Pair {
	t.Helper()
	needBinaries(t, "redis-server")
	p := &Pair{master: startServer(t, func(int, string) []string { return nil })}
	p.link = newLink(t, p.master.addr)
	host, port, _ := net.SplitHostPort(p.link.addr)
	p.replica = startServer(t, func(int, string) []string { return []string{"--replicaof", host, port} })
	p.current.Store(&p.master.addr)
	p.Client = redis.NewClient(&redis.Options{PoolSize: 16, Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, *p.current.Load())
	}})
	t.Cleanup(func() { _ = p.Client.Close() })
	p.waitInSync(t)
	return p
}

// waitInSync waits until the master counts its replica as connected.
func (p *Pair) waitInSync(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.master.addr})
	defer func() { _ = c.Close() }()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if n, err := c.Do(context.Background(), "WAIT", 1, 100).Int(); err == nil && n == 1 {
			return
		}
	}
	t.Fatalf("the replica of %s did not come in sync within 20 s", p.master.addr)
}

// Synced waits until the replica holds every write the master has
// acknowledged so far (PING then WAIT on one connection to the master).
func (p *Pair) Synced(t testing.TB) {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: p.master.addr})
	defer func() { _ = c.Close() }()
	ctx := context.Background()
	pipe := c.Pipeline()
	pipe.Ping(ctx)
	wait := pipe.Do(ctx, "WAIT", 1, 20000)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("waiting for the replica: %v", err)
	}
	if n, err := wait.Int(); err != nil || n != 1 {
		t.Fatalf("the replica did not catch up within 20 s: %d, %v", n, err)
	}
}

// CutLink stops replication where it stands: from now on the replica gets
// nothing the master writes, while both still believe the link is up.
func (p *Pair) CutLink() { p.link.cut.Store(true) }

// Failover kills the master and promotes the replica, which the client
// reaches from then on: what the master acknowledged but never sent is lost.
func (p *Pair) Failover(t testing.TB) {
	t.Helper()
	p.master.kill()
	c := redis.NewClient(&redis.Options{Addr: p.replica.addr})
	defer func() { _ = c.Close() }()
	if err := c.Do(context.Background(), "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatalf("promoting the replica: %v", err)
	}
	p.current.Store(&p.replica.addr)
}

// link is a TCP relay between the replica and its master that can be cut:
// once cut, it drops the bytes both ways and keeps the connections open.
type link struct {
	addr string
	cut  atomic.Bool
}

func newLink(t testing.TB, target string) *link {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for the replication link: %v", err)
	}
	l := &link{addr: ln.Addr().String()}
	var conns sync.WaitGroup
	t.Cleanup(func() { _ = ln.Close(); conns.Wait() })
	conns.Add(1)
	go func() {
		defer conns.Done()
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			conns.Add(2)
			go func() { defer conns.Done(); l.relay(out, in) }()
			go func() { defer conns.Done(); l.relay(in, out) }()
			t.Cleanup(func() { _ = in.Close(); _ = out.Close() })
		}
	}()
	return l
}

// relay copies from src to dst until either closes, dropping what it reads
// once the link is cut.
func (l *link) relay(dst, src net.Conn) {
	defer func() { _ = dst.Close(); _ = src.Close() }()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !l.cut.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
