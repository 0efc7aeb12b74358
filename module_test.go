package oauthflow_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// StartSignIn for a provider nobody registered is refused before anything
// is created: no run, no flow_failed event, ErrUnknownProvider.
func TestStartSignInRefusesAnUnknownProviderFirst(t *testing.T) {
	var events eventLog
	kv := oauthflow.NewMemoryKV()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, OnEvent: events.hook})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	run, doc, err := m.StartSignIn(context.Background(), "alice", "githubb")
	if !errors.Is(err, oauthflow.ErrUnknownProvider) {
		t.Fatalf("err = %v, want ErrUnknownProvider", err)
	}
	if run != nil || doc != nil {
		t.Errorf("a run (%v) or prompt (%v) came back with the error", run, doc)
	}
	if kinds := events.kinds(); len(kinds) != 0 {
		t.Errorf("events %v, want none: nothing was started", kinds)
	}
	if n := oauthflow.MemoryLen(kv); n != 0 {
		t.Errorf("the store holds %d keys after a refused sign-in, want 0", n)
	}
}

// A flow error's Error is the Go chain only: the sentence for the user's page
// (Message) stays out of it, so a log line or a wrapped error does not join
// prose to the cause, nor repeat it.
func TestFlowErrorKeepsItsPageSentenceOut(t *testing.T) {
	cause := &oauthflow.ProviderError{ProviderID: "github", Err: errors.New("dial tcp: lookup github.example: no such host")}
	e := &oauthflow.FlowError{Message: "The provider could not be reached. Please try again later.", Err: cause}
	if got := e.Error(); got != cause.Error() {
		t.Errorf("Error() = %q, want the cause's text %q alone", got, cause.Error())
	}
	if !errors.Is(e, cause) {
		t.Error("the cause is lost")
	}
	issuer := &oauthflow.FlowError{Message: "The sign-in response came from an unexpected issuer.", Err: oauthflow.ErrIssuerMismatch}
	if got := issuer.Error(); strings.Count(got, "unexpected issuer") != 1 {
		t.Errorf("Error() = %q: says it twice", got)
	}
	if got := (&oauthflow.FlowError{Message: "This provider is not available."}).Error(); got != "This provider is not available." {
		t.Errorf("without a cause, Error() = %q, want the message", got)
	}
}
