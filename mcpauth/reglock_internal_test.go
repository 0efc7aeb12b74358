package mcpauth

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

// lockWatchKV reports each registration lock it refuses on refused.
type lockWatchKV struct {
	oauthflow.KV
	refused chan struct{}
}

func (k *lockWatchKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.SetNX(ctx, key, v, ttl)
	if err == nil && !ok && strings.HasPrefix(key, "oauth:mcp:reglock:") {
		select {
		case k.refused <- struct{}{}:
		default:
		}
	}
	return ok, err
}

// gatedRegistrations is a registration endpoint whose first two calls
// each wait for their gate: the first then fails (HTTP 500), the second
// succeeds; later calls succeed at once. arrived hears each call.
type gatedRegistrations struct {
	srv     *httptest.Server
	calls   atomic.Int64
	arrived chan int64
	gates   [2]chan struct{}
}

func newGatedRegistrations(t *testing.T) *gatedRegistrations {
	g := &gatedRegistrations{arrived: make(chan int64, 8), gates: [2]chan struct{}{make(chan struct{}), make(chan struct{})}}
	g.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<16))
		n := g.calls.Add(1)
		g.arrived <- n
		if n <= 2 {
			select {
			case <-g.gates[n-1]:
			case <-time.After(time.Minute):
			}
		}
		if n == 1 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"client_id":"client-`+string(rune('0'+n))+`","token_endpoint_auth_method":"none"}`)
	}))
	t.Cleanup(g.srv.Close)
	t.Cleanup(func() {
		for _, gate := range g.gates {
			select {
			case <-gate:
			default:
				close(gate)
			}
		}
	})
	return g
}

// An instance whose registration outlived its lock (the lock expired, and
// another instance took it) must not free the other instance's lock when
// it ends: else a third instance registers beside the second, and two
// registrations are made where one should be.
func TestRegistrationLockIsFreedOnlyByItsOwner(t *testing.T) {
	t.Parallel()
	g := newGatedRegistrations(t)
	kv := &lockWatchKV{KV: oauthflow.NewMemoryKV(), refused: make(chan struct{}, 1)}
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	c, err := New(Config{Module: m, RedirectURL: "http://127.0.0.1:1/cb", HTTPClient: g.srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	issuer := "https://as.example"
	d := &Discovered{Resource: "https://mcp.example/mcp", AS: ServerMetadata{Issuer: issuer,
		AuthorizationEndpoint: issuer + "/authorize", TokenEndpoint: issuer + "/token",
		RegistrationEndpoint: g.srv.URL + "/register", CodeChallengeMethodsSupported: []string{"S256"}}}
	ctx := context.Background()
	results := make(chan error, 3)
	run := func() {
		go func() {
			_, err := c.client(ctx, d)
			results <- err
		}()
	}

	run() // A takes the lock; its registration waits
	waitfor.Recv(t, g.arrived, "A's registration")
	if err := kv.Del(ctx, registrationLock(d)); err != nil { // A's lock expires
		t.Fatal(err)
	}
	run() // B takes the lock; its registration waits
	waitfor.Recv(t, g.arrived, "B's registration")
	close(g.gates[0]) // A's registration fails; A frees its lock
	if err := waitfor.Recv(t, results, "A's end"); err == nil {
		t.Fatal("A's registration answered 500 and succeeded")
	}
	run() // C finds B's lock held, or (with a plain Del) registers itself
	select {
	case <-kv.refused:
	case <-g.arrived:
	case <-time.After(20 * time.Second):
		t.Fatal("C neither waited for the lock nor registered")
	}
	close(g.gates[1])
	for range 2 {
		if err := waitfor.Recv(t, results, "B's and C's ends"); err != nil {
			t.Fatal(err)
		}
	}
	if n := g.calls.Load(); n != 2 {
		t.Fatalf("%d registrations, want 2: A's failed one and B's, which C waits for", n)
	}
}
