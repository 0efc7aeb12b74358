package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/redis/go-redis/v9"
	"golang.org/x/oauth2"
)

// The callback area's providers: a Bearer one, and one whose grants are
// bound to a key (DPoP) on the token endpoint's /dpop/token.
const (
	benchProvider     = "bench"
	benchDPoPProvider = "bench-dpop"
)

// rig is the callback area's servers: the token endpoint, the two hand-written
// handlers and the library's Module on a client whose commands are counted.
type rig struct {
	e                   *env
	token, lim, pl, lib *httptest.Server
	mod                 *oauthflow.Module
	modRDB              *redis.Client
	// def is a second Module as an app that sets nothing else would have
	// it: Config{} defaults (the default logger, worker and refresh ahead)
	// besides its store and providers.
	def    *oauthflow.Module
	defLib *httptest.Server
	defRDB *redis.Client
	hook   *countHook
	dir    string
	users  atomic.Int64
}

func newRig(e *env) (*rig, error) {
	r := &rig{e: e, hook: &countHook{}}
	dir, err := os.MkdirTemp("", "oauthflow-bench-")
	if err != nil {
		return nil, err
	}
	r.dir = dir
	r.token = httptest.NewServer(tokenEndpoint())
	r.lim = httptest.NewServer(newCeiling(e.rdb, e.prefix, r.token.URL))
	r.pl = httptest.NewServer(&plain{rdb: e.rdb, prefix: e.prefix, cfg: &oauth2.Config{ClientID: benchProvider,
		Endpoint: oauth2.Endpoint{TokenURL: r.token.URL, AuthStyle: oauth2.AuthStyleInParams}}})
	return r, r.startModule()
}

// startModule wires the library as a host app would, on its own counted
// client, and a second Module with Config{} defaults beside it.
func (r *rig) startModule() error {
	var err error
	r.modRDB = newClient(r.e.rdb.Options().Addr)
	r.modRDB.AddHook(r.hook)
	r.mod, r.lib, err = r.serveModule(r.modRDB, func(cfg *oauthflow.Config) {
		cfg.Logger, cfg.WorkerInterval = r.e.log, time.Hour // the worker's polls would blur the round-trip count
	})
	if err != nil {
		return err
	}
	r.defRDB = newClient(r.e.rdb.Options().Addr)
	r.def, r.defLib, err = r.serveModule(r.defRDB, func(*oauthflow.Config) {}) // only its store, key prefix and providers
	return err
}

// serveModule starts a Module on rdb, under the run's key prefix, with the
// area's providers and what set adds to its Config, mounted on a server of its own.
func (r *rig) serveModule(rdb *redis.Client, set func(*oauthflow.Config)) (*oauthflow.Module, *httptest.Server, error) {
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	reg, err := benchRegistry(r.token.URL, srv.URL+oauthflow.CallbackPath)
	if err != nil {
		return nil, srv, err
	}
	cfg := oauthflow.Config{KV: oauthflow.NewRedisKV(rdb), KeyPrefix: r.e.prefix, Registry: reg}
	set(&cfg)
	m, err := oauthflow.New(context.Background(), cfg)
	if err != nil {
		return nil, srv, err
	}
	m.Mount(mux)
	return m, srv, nil
}

// benchRegistry holds the area's two providers, public clients of the token
// endpoint at tokenURL.
func benchRegistry(tokenURL, redirectURL string) (*oauthflow.Registry, error) {
	reg := oauthflow.NewRegistry()
	for _, cfg := range []providers.Config{
		{ID: benchProvider, AuthURL: tokenURL + "/authorize", TokenURL: tokenURL + "/token"},
		{ID: benchDPoPProvider, AuthURL: tokenURL + "/authorize", TokenURL: tokenURL + "/dpop/token", DPoP: true},
	} {
		p, err := providers.NewOAuth2(cfg, providers.Credentials{ClientID: benchProvider, RedirectURL: redirectURL})
		if err == nil {
			err = reg.Register(p)
		}
		if err != nil {
			return nil, err
		}
	}
	return reg, nil
}

func (r *rig) close() {
	for _, s := range []*httptest.Server{r.lim, r.pl, r.lib, r.defLib, r.token} {
		if s != nil {
			s.Close()
		}
	}
	for _, m := range []*oauthflow.Module{r.mod, r.def} {
		if m != nil {
			_ = m.Close()
		}
	}
	for _, c := range []*redis.Client{r.modRDB, r.defRDB} {
		if c != nil {
			_ = c.Close()
		}
	}
	_ = os.RemoveAll(r.dir)
}

func (r *rig) user() string { return fmt.Sprintf("bench-u%d", r.users.Add(1)) }

// handSignIns registers n sessions of the library's shape the way the
// hand-written handlers expect them, under oauth:session:{state}.
func (r *rig) handSignIns(ctx context.Context, srv *httptest.Server, n int) ([]string, error) {
	pipe := r.e.rdb.Pipeline()
	urls := make([]string, n)
	for i := range urls {
		st := randomState()
		s := benchSession()
		s.UserID = r.user()
		b, _ := json.Marshal(s)
		pipe.Set(ctx, r.e.prefix+"oauth:session:"+st, b, 10*time.Minute)
		urls[i] = srv.URL + "/callback?code=c0de&state=" + st
	}
	_, err := pipe.Exec(ctx)
	return urls, err
}

// toolSignIns starts n sign-ins with build_oauth_url alone, at provider.
func (r *rig) toolSignIns(ctx context.Context, provider string, n int) ([]string, error) {
	return r.toolSignInsOf(ctx, r.mod, r.lib, provider, n)
}

// defaultSignIns starts n build_oauth_url sign-ins on the Module with Config{} defaults.
func (r *rig) defaultSignIns(ctx context.Context, n int) ([]string, error) {
	return r.toolSignInsOf(ctx, r.def, r.defLib, benchProvider, n)
}

func (r *rig) toolSignInsOf(ctx context.Context, mod *oauthflow.Module, lib *httptest.Server, provider string, n int) ([]string, error) {
	args := json.RawMessage(`{"provider":"` + provider + `","scopes":["repo"]}`)
	urls := make([]string, n)
	for i := range urls {
		raw, err := mod.BuildOAuthURL.Call(ctx, oauthflow.ToolContext{UserID: r.user()}, args)
		var res oauthflow.BuildOAuthURLResult
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err != nil {
			return nil, err
		}
		urls[i] = lib.URL + oauthflow.CallbackPath + "?code=c0de&state=" + res.State
	}
	return urls, nil
}

// workflowSignIns starts n sign-ins through the "oauth" workflow.
func (r *rig) workflowSignIns(ctx context.Context, n int) ([]string, error) {
	urls := make([]string, n)
	for i := range urls {
		_, doc, err := r.mod.StartSignIn(ctx, r.user(), benchProvider, "repo")
		if err != nil {
			return nil, err
		}
		urls[i] = r.callbackURL(doc.State)
	}
	return urls, nil
}

func (r *rig) callbackURL(state string) string {
	return r.lib.URL + oauthflow.CallbackPath + "?code=c0de&state=" + state
}

// load fires urls from the second process; counted tells the Module's Redis
// commands sent meanwhile.
func (r *rig) load(urls []string) (result, int64, error) {
	before := r.hook.n.Load()
	res, err := fire(job{URLs: urls, Concurrency: r.e.opts.loadConc, Bound: 2 * time.Minute}, r.dir)
	if err == nil && res.Errors > 0 {
		err = fmt.Errorf("%d of %d callbacks failed", res.Errors, res.N)
	}
	return res, r.hook.n.Load() - before, err
}
