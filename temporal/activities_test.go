package oauthtemporal

import (
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"go.temporal.io/sdk/testsuite"
)

// testWorkflowID is the workflow an activity runs for in the SDK's test
// environment.
const testWorkflowID = "default-test-workflow-id"

// TestExchangeRetryFindsTheAnswerGone: the exchange activity run twice on
// one handle (a retry after the worker died) exchanges once; the second run
// finds the answer gone and says "expired or already used".
func TestExchangeRetryFindsTheAnswerGone(t *testing.T) {
	t.Parallel()
	a := newApp(t, appOptions{})
	var env testsuite.WorkflowTestSuite
	act := env.NewTestActivityEnvironment()
	act.RegisterActivity(a.integ.exchangeSignIn)
	handle, err := a.integ.stash(a.worker, time.Minute).put(t.Context(), stashedAnswer{
		Session: &oauthflow.Session{WorkflowID: testWorkflowID, UserID: "alice", Provider: provider},
		Answer:  oauthflow.CallbackAnswer{Code: "a-code-the-server-never-issued", State: "s"}})
	if err != nil {
		t.Fatal(err)
	}
	var outs [2]exchangeOutcome
	for i := range outs {
		v, err := act.ExecuteActivity(a.integ.exchangeSignIn, handle)
		if err != nil {
			t.Fatal(err)
		}
		if err := v.Get(&outs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if outs[0].Gone || outs[0].Connected || outs[0].Message == "" {
		t.Fatalf("the first run: %+v, want the exchange tried and refused", outs[0])
	}
	if !outs[1].Gone || outs[1].Message != msgGone {
		t.Fatalf("the second run: %+v, want the answer gone", outs[1])
	}
}

// TestDevicePollRefusesAnotherWorkflowsCode: a poll given the handle of
// another workflow's device code does not send it to the server.
func TestDevicePollRefusesAnotherWorkflowsCode(t *testing.T) {
	t.Parallel()
	a, as, _ := deviceApp(t, time.Second)
	var env testsuite.WorkflowTestSuite
	act := env.NewTestActivityEnvironment()
	act.RegisterActivity(a.integ.pollDevice)
	handle, err := a.integ.stash(a.worker, time.Minute).put(t.Context(), stashedDevice{
		WorkflowID: "another-workflow", UserID: "alice", Provider: "headless", DeviceCode: "another-workflows-code"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := act.ExecuteActivity(a.integ.pollDevice, handle)
	if err != nil {
		t.Fatal(err)
	}
	var p devicePoll
	if err := v.Get(&p); err != nil || p.Status != pollEnded || p.Message != msgGone {
		t.Fatalf("the poll: %+v, %v; want it refused", p, err)
	}
	if n := as.Stats().DevicePolls; n != 0 {
		t.Fatalf("the server was polled %d times", n)
	}
}
