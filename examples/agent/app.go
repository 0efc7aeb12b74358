package main

import (
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

//go:embed static
var static embed.FS

// frontendCallbackPath is the frontend callback page FrontendHandler serves:
// the demo's redirect target in terminal mode.
const frontendCallbackPath = "/oauth/callback"

type appConfig struct {
	Base     string // scheme://host:port the browser reaches the app at
	Provider string // whose repositories to list: "demo" (default) or "github"
	Logger   *slog.Logger
	UseEnvKV bool // Redis from KVSTORE_* (with the memory fallback) instead of memory
	// Terminal makes the demo provider redirect to the frontend page
	// /oauth/callback, which completes through POST /api/v1/oauth/complete
	// (its script) or the API callback (its form, without script), instead of
	// to the API callback.
	Terminal bool
	// AutoConsent skips the demo provider's consent page.
	AutoConsent bool
	// NoDeviceGrant makes the demo provider one without the device grant: the
	// terminal mode then prints a sign-in link instead of a code.
	NoDeviceGrant bool
}

// app is the host application: the oauthflow module with the consumer workflow
// registered, the demo provider mounted beside it, and a page that runs the
// workflow and shows its sign-in prompt inline.
type app struct {
	http.Handler
	mod          *oauthflow.Module
	demo         *oauthflowtest.Server
	log          *slog.Logger
	provider     string
	providerName string
	device       bool // the provider offers the device grant: the terminal mode signs in with a code
}

func newApp(ctx context.Context, cfg appConfig) (*app, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Provider == "" {
		cfg.Provider = demoID
	}
	mc := oauthflow.Config{Logger: cfg.Logger}
	if !cfg.UseEnvKV {
		mc.KV = oauthflow.NewMemoryKV()
	}
	mod, err := oauthflow.New(ctx, mc)
	if err != nil {
		return nil, err
	}
	a := &app{mod: mod, log: cfg.Logger, provider: cfg.Provider}
	mux := http.NewServeMux()
	if err := a.registerProviders(mux, cfg); err != nil {
		_ = mod.Close()
		return nil, err
	}
	mod.Mount(mux)
	mux.Handle("GET /oauth/", mod.FrontendHandler(""))
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.HandleFunc("GET /{$}", servePage(static, "static/index.html"))
	mux.HandleFunc("POST /app/runs", withUser("agent_user", a.startRun))
	mux.HandleFunc("GET /app/runs/{id}", withUser("agent_user", a.showRun))
	a.Handler = mux
	return a, nil
}

// registerProviders mounts the demo provider, registers it and any catalog
// provider configured in the environment, and registers the consumer workflow
// with a repository API for each provider it knows.
func (a *app) registerProviders(mux *http.ServeMux, cfg appConfig) error {
	as, p, err := mountDemo(mux, cfg)
	if err != nil {
		return err
	}
	if err := a.mod.Registry.Register(p); err != nil {
		return err
	}
	a.demo = as
	registerFromEnv(a.mod.Registry, cfg.Logger)
	apis := map[string]repoAPI{demoID: demoRepoAPI(as.APIURL())}
	if a.mod.Registry.Has("github") {
		apis["github"] = githubRepoAPI()
	}
	if _, ok := apis[cfg.Provider]; !ok {
		return fmt.Errorf("provider %q is not available: use demo, or github with GITHUB_CLIENT_ID, "+
			"GITHUB_CLIENT_SECRET and GITHUB_OAUTH_REDIRECT_URI set", cfg.Provider)
	}
	a.providerName = displayName(a.mod.Registry, cfg.Provider)
	a.device = offersDevice(a.mod.Registry, cfg.Provider)
	return a.mod.Engine.Register(reposWorkflow(a.mod, listReposTool(a.mod, apis)))
}

func displayName(reg *oauthflow.Registry, id string) string {
	if p, err := reg.Get(id); err == nil {
		if d, ok := p.(interface{ DisplayName() string }); ok { // an optional method of a Provider
			return d.DisplayName()
		}
	}
	return id
}

// offersDevice reports whether the registry's provider id offers the device
// authorization grant (RFC 8628).
func offersDevice(reg *oauthflow.Registry, id string) bool {
	p, err := reg.Get(id)
	if err != nil {
		return false
	}
	d, ok := p.(interface{ SupportsDeviceAuth() bool }) // an optional method of a Provider
	return ok && d.SupportsDeviceAuth()
}

func (a *app) Close() error { return a.mod.Close() }

// launch starts a run of the consumer workflow for user, whose sign-in, if it
// needs one, uses grant.
func (a *app) launch(ctx context.Context, user, grant string) (*oauthflow.Run, error) {
	return a.mod.Engine.Launch(ctx, user, reposWorkflowName, runArgs{Provider: a.provider, Grant: grant}, oauthflow.RunOptions{})
}

// startRun answers POST /app/runs (body {}): it launches the consumer workflow
// and answers the run view.
func (a *app) startRun(w http.ResponseWriter, r *http.Request, user string) {
	dec := json.NewDecoder(io.LimitReader(r.Body, 1024))
	dec.DisallowUnknownFields()
	var body struct{}
	if err := dec.Decode(&body); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "send {}"})
		return
	}
	run, err := a.launch(r.Context(), user, "")
	if err != nil && run == nil {
		a.fail(w, err)
		return
	}
	a.writeView(w, r.Context(), http.StatusCreated, run)
}

// showRun answers GET /app/runs/{id}: the run view the page polls.
func (a *app) showRun(w http.ResponseWriter, r *http.Request, user string) {
	run, err := a.mod.Engine.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, oauthflow.ErrRunNotFound) || (err == nil && (run.UserID != user || run.Workflow != reposWorkflowName)) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such run"})
		return
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	a.writeView(w, r.Context(), http.StatusOK, run)
}

func (a *app) writeView(w http.ResponseWriter, ctx context.Context, status int, run *oauthflow.Run) {
	v, err := a.view(ctx, run)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, status, v)
}

// fail answers an error without internal detail.
func (a *app) fail(w http.ResponseWriter, err error) {
	a.log.Error("agent request failed", "error", err.Error())
	writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "try again later"})
}
