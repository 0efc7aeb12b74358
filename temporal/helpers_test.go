package oauthtemporal

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"go.temporal.io/server/temporaltest"
)

// One Temporal server for the whole test binary: each test has task queues
// and workflow IDs of its own. Starting and stopping a server per test costs
// seconds and leaves goroutines behind.
var temporalClient client.Client

func TestMain(m *testing.M) {
	// A fixed identity keeps this machine's host name and process ID out of
	// the recorded histories (testdata).
	ts := temporaltest.NewServer(temporaltest.WithBaseClientOptions(client.Options{Logger: quietLogger(), Identity: "oauthtemporal-test"}))
	temporalClient = ts.GetDefaultClient()
	code := m.Run()
	ts.Stop()
	os.Exit(code)
}

func quietLogger() sdklog.Logger { return sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler)) }

// provider is the ID the test server's provider is registered under.
const provider = "local"

var testSeq atomic.Int64

// uniqueID is a workflow ID or task queue name no other test uses.
func uniqueID(t *testing.T, what string) string {
	return fmt.Sprintf("%s-%s-%d", strings.ReplaceAll(t.Name(), "/", "-"), what, testSeq.Add(1))
}

// app is two instances of an app on one store, as a fleet runs them: the
// worker's, whose integration runs the activities, and the web's, whose
// callback endpoint the browser reaches. Both seal records with one key ring.
type app struct {
	idp       *oauthflowtest.Server
	worker    *oauthflow.Module // the worker's instance
	web       *oauthflow.Module // the instance that serves the callback
	integ     *Integration      // the worker's
	webInteg  *Integration
	url       string // the web instance's origin
	kv        oauthflow.KV
	taskQueue string
	seen      *answers
}

// appOptions vary an app: the integration's options on the worker side, the
// store (nil: a new memory store) and its key prefix, the test server's.
type appOptions struct {
	integ     Options
	kv        oauthflow.KV
	keyPrefix string
	idp       oauthflowtest.Options
}

const testKeys = "k1:AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8"

func newApp(t *testing.T, o appOptions) *app {
	t.Helper()
	a := &app{idp: oauthflowtest.NewServer(o.idp), kv: o.kv, taskQueue: uniqueID(t, "tq"), seen: &answers{}}
	t.Cleanup(a.idp.Close)
	if a.kv == nil {
		a.kv = oauthflow.NewMemoryKV()
	}
	ring, err := oauthflow.ParseKeyRing(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	web := httptest.NewServer(a.seen.watch(mux))
	t.Cleanup(web.Close)
	a.url = web.URL
	cfg := func() oauthflow.Config {
		return oauthflow.Config{KV: a.kv, KeyPrefix: o.keyPrefix, Encryption: ring,
			Logger: slog.New(slog.DiscardHandler), Registry: oauthflow.NewRegistry()}
	}
	a.worker, a.integ = a.setup(t, cfg(), o.integ)
	a.web, a.webInteg = a.setup(t, cfg(), Options{})
	a.web.Mount(mux)
	return a
}

// setup builds one instance; the web's integration is wrapped so that the
// test sees the secrets the callback hands it.
func (a *app) setup(t *testing.T, cfg oauthflow.Config, opts Options) (*oauthflow.Module, *Integration) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	integ := New(temporalClient, opts)
	cfg.SignInOwners = map[string]oauthflow.SignInOwner{OwnerName: &recordingOwner{integ, a.seen}}
	mod, err := oauthflow.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mod.Close() })
	integ.Bind(mod)
	if err := mod.Registry.Register(a.idp.Provider(provider, a.url+oauthflow.CallbackPath)); err != nil {
		t.Fatal(err)
	}
	return mod, integ
}

// startWorker runs a worker of the app's task queue with the integration and
// the agent's workflow and tool; stop it, or the test's end does.
func (a *app) startWorker(t *testing.T, integ *Integration) worker.Worker {
	t.Helper()
	w := worker.New(temporalClient, a.taskQueue, worker.Options{})
	integ.Register(w)
	registerAgent(w, &tools{integ: integ, api: a.idp.APIURL()})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	return w
}

// startSignIn starts a SignIn workflow of its own for alice.
func (a *app) startSignIn(t *testing.T) client.WorkflowRun {
	t.Helper()
	run, err := temporalClient.ExecuteWorkflow(t.Context(),
		client.StartWorkflowOptions{ID: uniqueID(t, "sign-in"), TaskQueue: a.taskQueue},
		SignInWorkflowName, SignInInput{UserID: "alice", Provider: provider})
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// prompt waits until workflow id (a sign-in, or a workflow waiting on one)
// shows a link, and returns its prompt.
func (a *app) prompt(t *testing.T, id string) *oauthflow.OAuthPromptDocument {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for {
		doc, err := a.webInteg.Prompt(ctx, id)
		if err == nil && doc.AuthURL != "" {
			return doc
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no prompt for %s: %v", id, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// waitPrompt waits until the prompt of id has status.
func (a *app) waitPrompt(t *testing.T, id, status string) *oauthflow.OAuthPromptDocument {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		doc, err := a.webInteg.Prompt(t.Context(), id)
		if err == nil && doc.Status == status {
			return doc
		}
		if time.Now().After(deadline) {
			t.Fatalf("prompt of %s: %+v, %v; want status %s", id, doc, err, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// signIn follows link in a new browser, to the web instance's callback page.
func (a *app) signIn(t *testing.T, link string) *oauthflowtest.Page {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	page, err := oauthflowtest.NewBrowser().SignIn(ctx, link)
	if err != nil {
		t.Fatal(err)
	}
	return page
}

// get fetches target as a browser would, and returns the page.
func get(t *testing.T, target string) *oauthflowtest.Page {
	t.Helper()
	p, err := oauthflowtest.NewBrowser().SignIn(t.Context(), target)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// answers is what the test saw of the secrets: the callback URLs the web
// instance served and what its owner was handed.
type answers struct {
	mu        sync.Mutex
	callbacks []string // full callback URLs, with code and state
	codes     []string
	verifiers []string
	dpopKeys  []string
}

func (s *answers) watch(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == oauthflow.CallbackPath {
			s.mu.Lock()
			s.callbacks = append(s.callbacks, "http://"+r.Host+r.URL.RequestURI())
			s.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

func (s *answers) lastCallback(t *testing.T) string {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.callbacks) == 0 {
		t.Fatal("no callback was served")
	}
	return s.callbacks[len(s.callbacks)-1]
}

// secrets are the values no history may hold.
func (s *answers) secrets() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(append(append([]string(nil), s.codes...), s.verifiers...), s.dpopKeys...)
}

// recordingOwner is the integration as the module calls it, telling the test
// the secrets it was handed.
type recordingOwner struct {
	*Integration
	seen *answers
}

func (o *recordingOwner) CompleteSignIn(ctx context.Context, s *oauthflow.Session, a oauthflow.CallbackAnswer) error {
	o.seen.mu.Lock()
	o.seen.codes = append(o.seen.codes, a.Code)
	if s.CodeVerifier != "" {
		o.seen.verifiers = append(o.seen.verifiers, s.CodeVerifier)
	}
	if s.DPoPKey != "" {
		o.seen.dpopKeys = append(o.seen.dpopKeys, s.DPoPKey)
	}
	o.seen.mu.Unlock()
	return o.Integration.CompleteSignIn(ctx, s, a)
}

// The agent of the tests: a workflow that calls the provider's API through a
// tool activity, signing the user in when the tool says so.

const listReposActivity = "test.ListRepos"

func registerAgent(w worker.Registry, tl *tools) {
	w.RegisterWorkflowWithOptions(agentWorkflow, workflow.RegisterOptions{Name: "test.Agent"})
	w.RegisterActivityWithOptions(tl.listRepos, activity.RegisterOptions{Name: listReposActivity})
}

// agentWorkflow lists userID's repositories at the provider.
func agentWorkflow(ctx workflow.Context, userID string) (apiAnswer, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var out apiAnswer
	err := CallWithSignIn(ctx, userID, func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(ctx, listReposActivity, userID).Get(ctx, &out)
	})
	return out, err
}

// apiAnswer is what the tool returns of the API's answer: never a token.
type apiAnswer struct {
	User  string `json:"user"`
	Repos int    `json:"repos"`
}

type tools struct {
	integ *Integration
	api   string
	calls atomic.Int64
}

func (tl *tools) listRepos(ctx context.Context, userID string) (apiAnswer, error) {
	tl.calls.Add(1)
	c, err := tl.integ.Client(ctx, userID, provider)
	if err != nil {
		return apiAnswer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, tl.api, nil)
	if err != nil {
		return apiAnswer{}, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return apiAnswer{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return apiAnswer{}, fmt.Errorf("API answered %s", resp.Status)
	}
	var body struct {
		User  string            `json:"user"`
		Repos []json.RawMessage `json:"repos"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return apiAnswer{}, err
	}
	return apiAnswer{User: body.User, Repos: len(body.Repos)}, nil
}
