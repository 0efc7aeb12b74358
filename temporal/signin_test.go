package oauthtemporal

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/redis/go-redis/v9"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

const (
	pageConnected = "account connected"
	pageExpired   = "expired or was already used"
)

// TestSignInSurvivesAWorkerRestart: the worker stops while the sign-in
// waits; the callback then waits for a worker, and a new one finishes it.
func TestSignInSurvivesAWorkerRestart(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{})
	w := a.startWorker(t, a.integ)
	run := a.startSignIn(t)
	prompt := a.prompt(t, run.GetID())
	w.Stop()
	pages := make(chan *oauthflowtest.Page, 1)
	go func() {
		page, err := oauthflowtest.NewBrowser().SignIn(t.Context(), prompt.AuthURL)
		if err != nil {
			t.Error(err)
		}
		pages <- page
	}()
	select {
	case p := <-pages:
		t.Fatalf("the callback answered with no worker running: %+v", p)
	case <-time.After(time.Second):
	}
	a.startWorker(t, a.integ)
	if page := waitfor.Recv(t, pages, "the callback's page"); page == nil || !strings.Contains(page.Body, pageConnected) {
		t.Fatalf("the callback's page: %+v", page)
	}
	var res SignInResult
	if err := run.Get(t.Context(), &res); err != nil || !res.Authenticated {
		t.Fatalf("the sign-in ended %+v, %v", res, err)
	}
}

// TestSignInLapses: nobody signs in; the durable timer ends the sign-in, and
// a callback that comes later finds it gone: the page says so and nothing is
// exchanged.
func TestSignInLapses(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{integ: Options{SignInTTL: time.Second}})
	a.startWorker(t, a.integ)
	run := a.startSignIn(t)
	prompt := a.prompt(t, run.GetID())
	var res SignInResult
	if err := run.Get(t.Context(), &res); err != nil || res.Authenticated || res.Message != msgLapsed {
		t.Fatalf("the sign-in ended %+v, %v", res, err)
	}
	if doc := a.waitPrompt(t, run.GetID(), oauthflow.PromptError); doc.Message != msgLapsed {
		t.Fatalf("the prompt: %+v", doc)
	}
	if page := a.signIn(t, prompt.AuthURL); !strings.Contains(page.Body, pageExpired) {
		t.Fatalf("a late callback's page: %d %s", page.StatusCode, page.Body)
	}
	assertNothingExchanged(t, a)
}

// TestReplayedCallbackIsRefused: the provider's answer, sent again, finds
// the sign-in used; the code was exchanged once.
func TestReplayedCallbackIsRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{})
	a.startWorker(t, a.integ)
	run := a.startSignIn(t)
	if page := a.signIn(t, a.prompt(t, run.GetID()).AuthURL); !strings.Contains(page.Body, pageConnected) {
		t.Fatalf("the callback's page: %s", page.Body)
	}
	if page := get(t, a.seen.lastCallback(t)); !strings.Contains(page.Body, pageExpired) {
		t.Fatalf("the replayed callback's page: %d %s", page.StatusCode, page.Body)
	}
	if st := a.idp.Stats(); st.CodesExchanged != 1 {
		t.Fatalf("%d codes exchanged, want 1", st.CodesExchanged)
	}
}

// TestUnissuedStateIsRefused: a callback with a state nobody issued, or one
// not even of the form, reaches no workflow.
func TestUnissuedStateIsRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{})
	a.startWorker(t, a.integ)
	for state, want := range map[string]string{
		strings.Repeat("A", 43): pageExpired,
		"forged":                "not one this service issued",
	} {
		page := get(t, a.url+oauthflow.CallbackPath+"?code=c&state="+url.QueryEscape(state))
		if !strings.Contains(page.Body, want) {
			t.Errorf("state %q: page %d %s; want %q", state, page.StatusCode, page.Body, want)
		}
	}
	if len(a.seen.codes) != 0 {
		t.Fatalf("the owner was handed %d answers", len(a.seen.codes))
	}
	assertNothingExchanged(t, a)
}

// TestCallbackForAWorkflowThatIsGone: a sign-in owned by a workflow that does
// not exist is answered "expired", exchanges nothing, and leaves no stashed
// answer in the store (a real Redis, whose keys the test lists).
func TestCallbackForAWorkflowThatIsGone(t *testing.T) {
	t.Parallel()
	rc := testRedis(t)
	prefix := "oauthtemporal-test-" + rand.Text() + ":"
	t.Cleanup(func() { deleteKeys(rc, prefix+"*") })
	a := newApp(t, appOptions{kv: oauthflow.NewRedisKV(rc), keyPrefix: prefix})
	raw, err := a.web.BuildOAuthURL.Call(t.Context(),
		oauthflow.ToolContext{UserID: "alice", RunID: uniqueID(t, "never-started"), Owner: OwnerName},
		json.RawMessage(`{"provider":"`+provider+`","scopes":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	var built oauthflow.BuildOAuthURLResult
	if err := json.Unmarshal(raw, &built); err != nil {
		t.Fatal(err)
	}
	if page := a.signIn(t, built.AuthURL); !strings.Contains(page.Body, pageExpired) {
		t.Fatalf("the callback's page: %d %s", page.StatusCode, page.Body)
	}
	if len(a.seen.codes) != 1 {
		t.Fatalf("the owner was handed %d answers, want 1", len(a.seen.codes))
	}
	assertNothingExchanged(t, a)
	keys, err := rc.Keys(t.Context(), prefix+stashKey("*")).Result()
	if err != nil || len(keys) != 0 {
		t.Fatalf("stashed answers left: %v, %v", keys, err)
	}
}

// TestAnswerForAnotherWorkflowIsRefused: a handle whose answer is for another
// workflow's sign-in is redeemed (so it cannot be tried elsewhere) and
// refused; nothing is exchanged and the sign-in keeps waiting.
func TestAnswerForAnotherWorkflowIsRefused(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{})
	a.startWorker(t, a.integ)
	run := a.startSignIn(t)
	a.prompt(t, run.GetID())
	st := a.webInteg.stash(a.web, time.Minute)
	handle, err := st.put(t.Context(), stashedAnswer{
		Session: &oauthflow.Session{WorkflowID: "another-workflow", UserID: "alice", Provider: provider},
		Answer:  oauthflow.CallbackAnswer{Code: "a-code-for-another-sign-in", State: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	var out exchangeOutcome
	if err := sendComplete(t, run.GetID(), handle, &out); err != nil || !out.Gone || out.Connected {
		t.Fatalf("the update's outcome: %+v, %v", out, err)
	}
	if err := st.take(t.Context(), handle, &stashedAnswer{}); !errors.Is(err, errStashGone) {
		t.Fatalf("the handle after the refusal: %v, want it redeemed", err)
	}
	if doc := a.waitPrompt(t, run.GetID(), oauthflow.PromptPending); doc.Message != "" {
		t.Fatalf("the prompt: %+v", doc)
	}
	assertNothingExchanged(t, a)
}

// TestSignInRefusesUpdatesItCannotTake: the complete update's validator
// refuses a malformed handle (nothing enters the history), and an answer
// while another is being exchanged, which CompleteSignIn reports as
// "expired or already used".
func TestSignInRefusesUpdatesItCannotTake(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{})
	a.startWorker(t, a.integ)
	run := a.startSignIn(t)
	prompt := a.prompt(t, run.GetID())

	var app *temporal.ApplicationError
	if err := sendComplete(t, run.GetID(), "not-a-handle", nil); !errors.As(err, &app) || app.Type() != "MalformedHandle" {
		t.Fatalf("a malformed handle: %v, want it refused", err)
	}
	for _, ev := range history(t, run.GetID()).Events {
		if ev.GetEventType() == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED {
			t.Fatal("the refused update is in the history")
		}
	}

	a.idp.FailNext(oauthflowtest.Failure{Grant: oauthflowtest.GrantAuthorizationCode, Delay: 2 * time.Second})
	pages := make(chan *oauthflowtest.Page, 1)
	go func() {
		page, _ := oauthflowtest.NewBrowser().SignIn(t.Context(), prompt.AuthURL)
		pages <- page
	}()
	waitEvents(t, run.GetID(), enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, 2) // the exchange is under way
	other := &oauthflow.Session{WorkflowID: run.GetID(), UserID: "alice", Provider: provider}
	err := a.webInteg.CompleteSignIn(t.Context(), other, oauthflow.CallbackAnswer{Code: "second", State: "s"})
	if !errors.Is(err, oauthflow.ErrSessionNotFound) {
		t.Fatalf("an answer during the exchange: %v, want ErrSessionNotFound", err)
	}
	if page := waitfor.Recv(t, pages, "the first answer's page"); page == nil || !strings.Contains(page.Body, pageConnected) {
		t.Fatalf("the first answer's page: %+v", page)
	}
	if st := a.idp.Stats(); st.CodesExchanged != 1 {
		t.Fatalf("%d codes exchanged, want 1", st.CodesExchanged)
	}
}

// sendComplete sends the complete update with handle, as CompleteSignIn does.
func sendComplete(t *testing.T, id, handle string, out *exchangeOutcome) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	h, err := temporalClient.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{WorkflowID: id, UpdateName: completeUpdate,
		Args: []any{completeRequest{Handle: handle}}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err != nil {
		return err
	}
	return h.Get(ctx, out)
}

// waitEvents waits until workflow id's history has n events of type typ.
func waitEvents(t *testing.T, id string, typ enumspb.EventType, n int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		seen := 0
		for _, ev := range history(t, id).Events {
			if ev.GetEventType() == typ {
				seen++
			}
		}
		if seen >= n {
			return
		}
	}
	t.Fatalf("workflow %s never had %d %s events", id, n, typ)
}

func assertNothingExchanged(t *testing.T, a *app) {
	t.Helper()
	if st := a.idp.Stats(); st.CodesExchanged != 0 {
		t.Fatalf("%d codes exchanged, want none", st.CodesExchanged)
	}
	if _, err := a.web.Tokens.GetTokens(t.Context(), "alice", provider); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("tokens stored: %v", err)
	}
}

// testRedis is a client of the Redis at KVSTORE_HOST:KVSTORE_PORT
// (127.0.0.1:6379). The test is skipped without one, unless CI is set.
func testRedis(t *testing.T) *redis.Client {
	t.Helper()
	host, port := os.Getenv("KVSTORE_HOST"), os.Getenv("KVSTORE_PORT")
	if host == "" {
		host = "127.0.0.1"
	}
	if port == "" {
		port = "6379"
	}
	rc := redis.NewClient(&redis.Options{Addr: net.JoinHostPort(host, port)})
	t.Cleanup(func() { _ = rc.Close() })
	if err := rc.Ping(t.Context()).Err(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("Redis: %v", err)
		}
		t.Skipf("no Redis: %v", err)
	}
	return rc
}

func deleteKeys(rc *redis.Client, pattern string) {
	ctx := context.Background()
	keys, _ := rc.Keys(ctx, pattern).Result()
	if len(keys) > 0 {
		rc.Del(ctx, keys...)
	}
}
