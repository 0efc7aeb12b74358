package redistest_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/alicebob/miniredis/v2"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// Once the test closes its miniredis, Mini's client fails each command at once,
// dials at most once per command, and never reaches the server that took the
// closed one's port (here on purpose; in a parallel run, another test's).
func TestMiniStaysOffAClosedServer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mr, c := redistest.Mini(t)
	dials := &dialCounter{}
	c.AddHook(dials)
	if err := c.Set(ctx, "k", "mine", 0).Err(); err != nil {
		t.Fatal(err)
	}
	addr := mr.Addr()
	mr.Close()
	other := miniredis.NewMiniRedis()
	if err := other.StartAddr(addr); err != nil {
		t.Fatalf("could not start a server on the closed one's port %s: %v", addr, err)
	}
	t.Cleanup(other.Close)
	if err := other.Set("k", "another test's"); err != nil {
		t.Fatal(err)
	}

	before := dials.n.Load()
	const commands = 5
	for i := range commands - 1 {
		if v, err := c.Get(ctx, "k").Result(); err == nil {
			t.Fatalf("Get %d after Close = %q, want an error", i, v)
		}
	}
	if err := c.Set(ctx, "written", "x", 0).Err(); err == nil {
		t.Fatal("Set after Close succeeded")
	}
	if other.Exists("written") {
		t.Fatal("a write after Close reached the server that took the port")
	}
	if n := dials.n.Load() - before; n > commands {
		t.Fatalf("%d dials for %d commands after Close: the client retries", n, commands)
	}
}

// dialCounter counts the client's dials.
type dialCounter struct{ n atomic.Int64 }

func (h *dialCounter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		h.n.Add(1)
		return next(ctx, network, addr)
	}
}
func (h *dialCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *dialCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// A pipeline far longer than any read buffer goes through Mini's in-memory
// connection as through a socket: the client writes it all before it reads
// the first reply, which miniredis writes before it reads on.
func TestMiniTakesALongPipeline(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, c := redistest.Mini(t)
	value := strings.Repeat("v", 1000)
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range 500 {
			p.Set(ctx, fmt.Sprint("k", i), value, 0)
			p.Get(ctx, fmt.Sprint("k", i))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := cmds[len(cmds)-1].(*redis.StringCmd).Val(); got != value {
		t.Fatalf("the last GET answered %.10q", got)
	}
}
