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

// A flow error reads as one sentence: its message, then the cause.
func TestFlowErrorReadsAsOneSentence(t *testing.T) {
	e := &oauthflow.FlowError{Message: "This provider is not available.", Err: oauthflow.ErrUnknownProvider}
	if got := e.Error(); strings.Contains(got, ".:") {
		t.Errorf("Error() = %q: a full stop before the cause", got)
	}
	if !errors.Is(e, oauthflow.ErrUnknownProvider) {
		t.Error("the cause is lost")
	}
}
