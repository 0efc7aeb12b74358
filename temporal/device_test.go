package oauthtemporal

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
)

// deviceApp is an app whose provider "headless" is an authorization server
// with the device grant, which the test scripts (slow_down) and answers for
// the user.
func deviceApp(t *testing.T, interval time.Duration) (*app, *authserver.Server, *deviceCodes) {
	t.Helper()
	as := authserver.Start(authserver.Options{DeviceInterval: interval})
	t.Cleanup(as.Close)
	a := newApp(t, appOptions{})
	codes := &deviceCodes{}
	for _, mod := range []*oauthflow.Module{a.worker, a.web} {
		p, err := providers.NewOAuth2(providers.Config{ID: "headless", AuthURL: as.AuthURL(), TokenURL: as.TokenURL(),
			DeviceAuthURL: as.DeviceAuthorizationURL(), Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
			providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret"})
		if err != nil {
			t.Fatal(err)
		}
		if err := mod.Registry.Register(&recordingDevice{p, codes}); err != nil {
			t.Fatal(err)
		}
	}
	return a, as, codes
}

// deviceCodes are the device codes the server issued, as its provider saw them.
type deviceCodes struct {
	mu    sync.Mutex
	codes []string
}

func (c *deviceCodes) all() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.codes)
}

// recordingDevice is a provider that tells the test the device codes it got.
type recordingDevice struct {
	*providers.OAuth2
	seen *deviceCodes
}

func (p *recordingDevice) DeviceAuth(ctx context.Context, scopes []string) (*oauthflow.DeviceAuthorization, error) {
	a, err := p.OAuth2.DeviceAuth(ctx, scopes)
	if err == nil {
		p.seen.mu.Lock()
		p.seen.codes = append(p.seen.codes, a.DeviceCode)
		p.seen.mu.Unlock()
	}
	return a, err
}

// startDeviceSignIn starts a DeviceSignIn for alice at "headless" and waits
// for its user code.
func (a *app) startDeviceSignIn(t *testing.T) (client.WorkflowRun, *oauthflow.OAuthPromptDocument) {
	t.Helper()
	run, err := temporalClient.ExecuteWorkflow(t.Context(),
		client.StartWorkflowOptions{ID: uniqueID(t, "device"), TaskQueue: a.taskQueue},
		DeviceSignInWorkflowName, SignInInput{UserID: "alice", Provider: "headless"})
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		doc, err := a.webInteg.Prompt(t.Context(), run.GetID())
		if err == nil && doc.UserCode != "" {
			return run, doc
		}
	}
	t.Fatal("the device sign-in shows no user code")
	return nil, nil
}

// TestDeviceSignInSlowsDownAndSurvivesARestart: the device sign-in polls at
// the server's interval on durable timers, lengthens it for good at a
// slow_down, goes on polling on a new worker after the first one stopped,
// and stores the tokens once the user allows; the device code and the
// tokens stay out of its history.
func TestDeviceSignInSlowsDownAndSurvivesARestart(t *testing.T) {
	t.Parallel()
	a, as, codes := deviceApp(t, time.Second)
	w := a.startWorker(t, a.integ)
	run, prompt := a.startDeviceSignIn(t)
	if prompt.Status != oauthflow.PromptPending || prompt.VerificationURI == "" || prompt.ExpiresAt == 0 {
		t.Fatalf("the prompt: %+v", prompt)
	}
	as.SlowDownNext()
	waitStat(t, func() bool { return as.Stats().DeviceSlowDowns == 1 }, "a slow_down")
	w.Stop() // between two polls, on the longer interval
	time.Sleep(500 * time.Millisecond)
	a.startWorker(t, a.integ)
	if err := as.ApproveDevice(prompt.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	var res SignInResult
	if err := run.Get(t.Context(), &res); err != nil || !res.Authenticated {
		t.Fatalf("the device sign-in ended %+v, %v", res, err)
	}
	st := as.Stats()
	if st.DeviceSlowDowns != 1 || st.DeviceTokens != 1 {
		t.Fatalf("the server answered %d slow_downs and %d tokens, want 1 and 1 (never polled too soon after the slow_down)", st.DeviceSlowDowns, st.DeviceTokens)
	}
	tok, err := a.web.Tokens.GetTokens(t.Context(), "alice", "headless")
	if err != nil || tok.Scope != "read" {
		t.Fatalf("stored tokens: %+v, %v", tok, err)
	}
	if doc := a.waitPrompt(t, run.GetID(), oauthflow.PromptSuccess); doc.UserCode != prompt.UserCode {
		t.Fatalf("the prompt after it: %+v", doc)
	}

	h := history(t, run.GetID())
	var timers []time.Duration
	for _, ev := range h.Events {
		if at := ev.GetTimerStartedEventAttributes(); at != nil {
			timers = append(timers, at.GetStartToFireTimeout().AsDuration())
		}
	}
	if len(timers) < 2 || timers[0] != time.Second || timers[len(timers)-1] != time.Second+slowDownStep {
		t.Fatalf("the polls' timers: %v; want 1s, then 6s from the slow_down on", timers)
	}
	if len(codes.all()) != 1 {
		t.Fatalf("%d device codes issued, want 1", len(codes.all()))
	}
	assertNoSecret(t, h, append(codes.all(), tok.AccessToken, tok.RefreshToken))
	saveHistory(t, "device.json", h)
}

// TestDeviceSignInDenied: the user denies on the other device; the sign-in
// ends unauthenticated, with the prompt saying so, and nothing is stored.
func TestDeviceSignInDenied(t *testing.T) {
	t.Parallel()
	a, as, _ := deviceApp(t, time.Second)
	a.startWorker(t, a.integ)
	run, prompt := a.startDeviceSignIn(t)
	if err := as.DenyDevice(prompt.UserCode); err != nil {
		t.Fatal(err)
	}
	var res SignInResult
	if err := run.Get(t.Context(), &res); err != nil || res.Authenticated || res.Message != msgDeviceDenied {
		t.Fatalf("the device sign-in ended %+v, %v", res, err)
	}
	if doc := a.waitPrompt(t, run.GetID(), oauthflow.PromptError); !strings.Contains(doc.Message, "refused") {
		t.Fatalf("the prompt: %+v", doc)
	}
	if _, err := a.web.Tokens.GetTokens(t.Context(), "alice", "headless"); err == nil {
		t.Fatal("tokens stored after a denial")
	}
	for _, ev := range history(t, run.GetID()).Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_ACTIVITY_TASK_FAILED {
			t.Fatal("a poll failed: the denial is an answer, not an activity's failure")
		}
	}
}

// waitStat waits up to 30 seconds for cond.
func waitStat(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("never saw %s", what)
}
