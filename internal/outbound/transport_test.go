package outbound

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

// A burst of concurrent requests through a Client reuses pooled connections:
// far fewer new connections reach the server than requests are made. Over
// http.DefaultTransport (2 idle connections per host) most of the burst would
// dial anew on every round.
func TestClientPoolsConnections(t *testing.T) {
	t.Parallel()
	const workers, rounds = 16, 8
	var opened atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"access_token":"a","token_type":"bearer","expires_in":3600}`))
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	burst(t, Client(0), srv.URL, workers, rounds)
	// A request waiting on a dial takes a connection freed meanwhile, and the
	// dial's connection joins the pool: a few more than one per worker may
	// open. Without pooling nearly every request past the first round dials.
	if n := opened.Load(); n > 2*workers {
		t.Fatalf("%d requests opened %d connections; want at most two per concurrent worker (%d)", workers*rounds, n, 2*workers)
	}
}

// Every Client shares the one pool; each has the timeout it was given.
func TestClientsShareOnePool(t *testing.T) {
	t.Parallel()
	a, b := Client(1), Client(2)
	if a.Transport != b.Transport || a.Timeout != 1 || b.Timeout != 2 {
		t.Errorf("clients %+v and %+v: want one transport, each its own timeout", a, b)
	}
}

// burst runs workers goroutines that each GET url rounds times.
func burst(t *testing.T, c *http.Client, url string, workers, rounds int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				resp, err := c.Get(url)
				if err != nil {
					t.Error(err)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
			}
		})
	}
	waitfor.Group(t, &wg, "the burst of requests")
}
