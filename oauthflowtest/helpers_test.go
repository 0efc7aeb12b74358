package oauthflowtest_test

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// newServer starts a server for one test and closes it when the test ends.
func newServer(t *testing.T, opts oauthflowtest.Options) *oauthflowtest.Server {
	t.Helper()
	idp := oauthflowtest.NewServer(opts)
	t.Cleanup(idp.Close)
	return idp
}

// app is a Module on memory served on loopback, with idp's provider
// registered as "local".
type app struct {
	mod *oauthflow.Module
	url string
}

func newApp(t *testing.T, idp *oauthflowtest.Server, cfg oauthflow.Config) app {
	t.Helper()
	cfg.KV = oauthflow.NewMemoryKV()
	cfg.Logger = slog.New(slog.DiscardHandler)
	mod, err := oauthflow.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mod.Close() })
	mux := http.NewServeMux()
	mod.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if err := mod.Registry.Register(idp.Provider("local", srv.URL+oauthflow.CallbackPath)); err != nil {
		t.Fatal(err)
	}
	return app{mod: mod, url: srv.URL}
}

// getJSON calls url with the user's token for provider "local", requires
// 200 and decodes the answer into v.
func (a app) getJSON(t *testing.T, user, url string, v any) {
	t.Helper()
	resp, err := a.mod.Tokens.Client(t.Context(), user, "local").Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", url, err, body)
	}
}

// userinfo is the user-info endpoint's answer.
type userinfo struct {
	Sub               string `json:"sub"`
	PreferredUsername string `json:"preferred_username"`
}

// failures is a testing.TB that records Fatalf instead of failing the test
// it wraps, so that a test can check how a helper fails.
type failures struct {
	testing.TB
	mu     sync.Mutex
	fatals []string
}

func (f *failures) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatals = append(f.fatals, fmt.Sprintf(format, args...))
	f.mu.Unlock()
	runtime.Goexit()
}

// run calls fn with f on a goroutine of its own, as the testing package runs a
// test, and returns the messages of the Fatalf calls that ended it.
func (f *failures) run(t *testing.T, fn func(testing.TB)) []string {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	waitfor.Recv(t, done, "the helper's return")
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fatals
}
