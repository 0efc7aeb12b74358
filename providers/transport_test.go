package providers

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

// A burst of concurrent code exchanges through a provider built without
// WithHTTPClient reuses pooled connections: far fewer new connections reach the
// token endpoint than exchanges are made. Over http.DefaultTransport (2 idle
// connections per host) most of the burst would dial anew on every round.
func TestDefaultTransportPoolsConnections(t *testing.T) {
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
	p, err := NewOAuth2(Config{ID: "p", AuthURL: srv.URL + "/a", TokenURL: srv.URL + "/t", AuthStyle: AuthStyleParams},
		Credentials{ClientID: "id", ClientSecret: "s", RedirectURL: "https://app.example/cb"})
	if err != nil {
		t.Fatal(err)
	}
	burst(t, p, workers, rounds)
	// A request waiting on a dial takes a connection freed meanwhile, and the
	// dial's connection joins the pool: a few more than one per worker may
	// open. Without pooling nearly every exchange past the first round dials.
	if n := opened.Load(); n > 2*workers {
		t.Fatalf("%d exchanges opened %d connections; want at most two per concurrent worker (%d)", workers*rounds, n, 2*workers)
	}
}

// burst runs workers goroutines that each exchange a code rounds times.
func burst(t *testing.T, p *OAuth2, workers, rounds int) {
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range rounds {
				if _, err := p.ExchangeCode(context.Background(), "code"); err != nil {
					t.Error(err)
				}
			}
		})
	}
	waitfor.Group(t, &wg, "the burst of exchanges")
}
