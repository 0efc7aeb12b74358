package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	oauthtemporal "github.com/oauthflow/oauthflow/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The demo provider is the test kit's authorization server, mounted beside
// the app, so that the example runs offline and with no credentials.
const (
	demoID   = "demo"
	demoPath = "/demo"
)

// taskQueue is the queue the agent and its sign-ins run on.
const taskQueue = "oauthflow-agent"

// app is the example's one process: the web endpoints (the demo provider
// and oauthflow's callback) and a Temporal worker for the agent.
type app struct {
	http.Handler
	mod    *oauthflow.Module
	integ  *oauthtemporal.Integration
	client client.Client
	worker worker.Worker
}

// newApp builds the app for the origin base (http://127.0.0.1:port), over
// the Temporal client c, and starts its worker.
func newApp(ctx context.Context, base string, c client.Client, log *slog.Logger) (*app, error) {
	mux := http.NewServeMux()
	demo := oauthflowtest.Mount(mux, base+demoPath, oauthflowtest.Options{ConsentPage: true})
	mod, integ, err := oauthtemporal.Setup(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: log}, c,
		oauthtemporal.Options{Logger: log})
	if err != nil {
		return nil, err
	}
	if err := mod.Registry.Register(demo.Provider(demoID, base+oauthflow.CallbackPath)); err != nil {
		_ = mod.Close()
		return nil, err
	}
	mod.Mount(mux)
	w := worker.New(c, taskQueue, worker.Options{})
	integ.Register(w)
	registerAgent(w, &tool{integ: integ, provider: demoID, api: demo.APIURL()})
	if err := w.Start(); err != nil {
		_ = mod.Close()
		return nil, err
	}
	return &app{Handler: mux, mod: mod, integ: integ, client: c, worker: w}, nil
}

// Close stops the worker and the module.
func (a *app) Close() error {
	a.worker.Stop()
	return a.mod.Close()
}

// ask runs the agent for userID under the workflow ID id: it tells prompt
// the sign-in's link when the agent waits on one, and returns the agent's
// answer.
func (a *app) ask(ctx context.Context, id, userID string, prompt func(link string)) (string, error) {
	run, err := a.client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: id, TaskQueue: taskQueue}, agentWorkflowName, userID)
	if err != nil {
		return "", err
	}
	done := make(chan struct{})
	defer close(done)
	go a.watchPrompt(ctx, id, prompt, done)
	var answer string
	if err := run.Get(ctx, &answer); err != nil {
		return "", fmt.Errorf("the agent: %w", err)
	}
	return answer, nil
}

// watchPrompt polls the agent's prompt until it shows a link to sign in,
// and tells prompt once; or until done.
func (a *app) watchPrompt(ctx context.Context, id string, prompt func(link string), done <-chan struct{}) {
	for {
		doc, err := a.integ.Prompt(ctx, id)
		if err == nil && doc.AuthURL != "" && doc.Status == oauthflow.PromptPending {
			prompt(doc.AuthURL)
			return
		}
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// errNoTemporal says how to start the server the example talks to.
var errNoTemporal = errors.New("no Temporal server: start one with `temporal server start-dev --headless`")
