package oauthflow_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/require"
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

// A server, a CLI or a test asks how a sign-in went, or waits for it with a
// context: pending until the callback, then its outcome.
func TestWaitSignIn(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	run, doc := env.startSignIn(0, "alice")
	st, err := m.SignInStatus(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, oauthflow.PromptPending, st.Status)

	waited := make(chan *oauthflow.OAuthPromptDocument, 1)
	waitErr := make(chan error, 1)
	go func() {
		d, err := m.WaitSignIn(ctx, run.ID)
		waited <- d
		waitErr <- err
	}()
	status, _, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusOK, status)
	d := waitfor.Recv(t, waited, "WaitSignIn's answer")
	require.NoError(t, waitfor.Recv(t, waitErr, "WaitSignIn's error"))
	require.Equal(t, oauthflow.PromptSuccess, d.Status, "%+v", d)

	st, err = m.SignInStatus(ctx, run.ID)
	require.NoError(t, err)
	require.Equal(t, oauthflow.PromptSuccess, st.Status)

	// A wait ends with its context; a run that is no sign-in is not found.
	run2, _ := env.startSignIn(0, "bob")
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = m.WaitSignIn(short, run2.ID)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	_, err = m.SignInStatus(ctx, "0123456789abcdef0123456789abcdef")
	require.ErrorIs(t, err, oauthflow.ErrRunNotFound)
	_, err = m.WaitSignIn(ctx, "not-a-run")
	require.ErrorIs(t, err, oauthflow.ErrRunNotFound)
	require.NoError(t, m.Engine.Register(&oauthflow.Workflow{Name: "idle", States: []string{oauthflow.StateStart, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{{Name: "finish", From: oauthflow.StateStart, To: oauthflow.StateEnd,
			Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }}}}))
	other, err := m.Engine.Launch(ctx, "alice", "idle", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	_, err = m.SignInStatus(ctx, other.ID)
	require.ErrorIs(t, err, oauthflow.ErrRunNotFound, "a run of another workflow is no sign-in")
}
