package oauthflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// tripHook counts Redis round trips: a command is one, a pipeline is one.
type tripHook struct {
	n     atomic.Int64
	mu    sync.Mutex
	names []string
}

func (h *tripHook) count(name string) {
	h.n.Add(1)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.names = append(h.names, name)
}

func (h *tripHook) since(i int64) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.names[i:]...)
}

// A new connection's handshake (HELLO, then CLIENT SETINFO in a pipeline)
// belongs to the pool, not to the call that happened to dial: it is not counted.
func (h *tripHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h *tripHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if cmd.Name() != "hello" && cmd.Name() != "client" {
			h.count(cmd.Name())
		}
		return next(ctx, cmd)
	}
}
func (h *tripHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) == 0 || cmds[0].Name() != "client" {
			h.count("pipeline")
		}
		return next(ctx, cmds)
	}
}

// Upper bounds of the Redis round trips one callback completion costs; the
// test logs the measured counts so a change that lowers them shows it.
const (
	maxToolSignInTrips     = 3
	maxWorkflowSignInTrips = 3
)

func TestCallbackRoundTrips(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		max   int64
		start func(t *testing.T, m *oauthflow.Module) string
	}{
		{"build_oauth_url", maxToolSignInTrips, startWithTool},
		{"workflow", maxWorkflowSignInTrips, startWithWorkflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := redistest.Real(t)
			m, hook := countedModule(t, c, redistest.Prefix(t, c))
			trips, names := callbackTrips(t, m, hook, tc.start)
			t.Logf("%s sign-in: %d Redis round trips per callback completion: %v", tc.name, trips, names)
			require.LessOrEqual(t, trips, tc.max)
		})
	}
}

// On a Redis Cluster a batch goes one command at a time (its keys live in
// different slots), so a completion costs more round trips there.
const (
	maxClusterToolSignInTrips     = 3
	maxClusterWorkflowSignInTrips = 12
)

func TestCallbackRoundTripsOnACluster(t *testing.T) {
	t.Parallel()
	c := redistest.Cluster(t)
	for _, tc := range []struct {
		name  string
		max   int64
		start func(t *testing.T, m *oauthflow.Module) string
	}{
		{"build_oauth_url", maxClusterToolSignInTrips, startWithTool},
		{"workflow", maxClusterWorkflowSignInTrips, startWithWorkflow},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, hook := countedModule(t, c, "test:"+t.Name()+":")
			trips, names := callbackTrips(t, m, hook, tc.start)
			t.Logf("%s sign-in on a Cluster: %d round trips per callback completion: %v", tc.name, trips, names)
			require.LessOrEqual(t, trips, tc.max)
		})
	}
}

// callbackTrips starts a sign-in on m with start and completes it through
// the callback, and returns the round trips hook counted for the completion.
func callbackTrips(t *testing.T, m *oauthflow.Module, hook *tripHook, start func(*testing.T, *oauthflow.Module) string) (int64, []string) {
	t.Helper()
	state := start(t, m)
	before := hook.n.Load()
	rec := httptest.NewRecorder()
	m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+state, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	return hook.n.Load() - before, hook.since(before)
}

// countedModule is a Module on c, under prefix, whose worker stays idle for
// the test so only the callback's commands count.
func countedModule(t *testing.T, c redis.UniversalClient, prefix string) (*oauthflow.Module, *tripHook) {
	hook := &tripHook{}
	c.AddHook(hook)
	kv := oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), prefix)
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("acme")))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Registry: reg,
		Logger: slog.New(slog.DiscardHandler), WorkerInterval: time.Hour})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m, hook
}

func startWithTool(t *testing.T, m *oauthflow.Module) string {
	res, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"}, json.RawMessage(`{"provider":"acme","scopes":[]}`))
	require.NoError(t, err)
	var out oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &out))
	return out.State
}

// completeWithTool signs alice in to acme on m: build_oauth_url, then the
// callback with the provider's code.
func completeWithTool(t *testing.T, m *oauthflow.Module) {
	t.Helper()
	state := startWithTool(t, m)
	rec := httptest.NewRecorder()
	m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c&state="+state, nil))
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
}

func startWithWorkflow(t *testing.T, m *oauthflow.Module) string {
	_, doc, err := m.StartSignIn(context.Background(), "alice", "acme")
	require.NoError(t, err)
	return doc.State
}

// maxRefreshTrips bounds the Redis round trips of a read that refreshes: the
// read, the lock's take with the record and its health (one batch), the
// lease's renewal and the fenced write, the health record, the release and
// its announcement.
const maxRefreshTrips = 7

// A read that finds its token expired refreshes it in at most
// maxRefreshTrips round trips on one node.
func TestRefreshRoundTrips(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	m, hook := countedModule(t, c, redistest.Prefix(t, c))
	ctx := context.Background()
	require.NoError(t, m.Tokens.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "old", RefreshToken: "r",
		ExpiresAt: time.Now().Add(-time.Minute).UnixMilli()}))
	before := hook.n.Load()
	tok, err := m.Tokens.GetValidAccessToken(ctx, "u", "acme")
	require.NoError(t, err)
	require.NotEqual(t, "old", tok)
	trips, names := hook.n.Load()-before, hook.since(before)
	t.Logf("a read that refreshes: %d Redis round trips: %v", trips, names)
	require.LessOrEqual(t, trips, int64(maxRefreshTrips))
}
