package oauthflow

import (
	"context"
	"errors"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// A completion the instance running it dies in (or hangs in past its own
// deadline) is failed honestly by another instance. When a callback consumes a
// state, the sign-in's run is put in the due-work index for the moment by which
// the completion must have ended: its own deadline, plus the run lock's lease
// (by then a dead or hung instance's lock on the run has lapsed). A completion
// that ends removes it. If it comes due, the worker fires abandonSignIn on a
// run still waiting: the run ends {authenticated: false} and the parent hears
// "failed". The code is never exchanged again: the state that carried it is
// spent, and the worker never exchanges.

// jobAbandon is the worker's job that fails a completion nobody finished.
const jobAbandon = "abandon"

// watchCompletion records that s's completion must end by its deadline. The
// watch goes with the take of the run's lock (withTake), in one round trip,
// and must land before the run's transition runs; the prompt the transition
// updates is read with it too.
func (m *Module) watchCompletion(ctx context.Context, s *Session) context.Context {
	if s.WorkflowID == "" {
		return ctx // a sign-in outside a workflow has no run to end
	}
	due := m.now().Add(m.completionTimeout + m.runLockLease)
	watch := &kv.Op{Kind: kv.OpSchedule, Key: dueIndex, Member: jobAbandon + ":" + s.WorkflowID, Due: due}
	prompt := &kv.Op{Kind: kv.OpGet, Key: docKey(s.WorkflowID, PromptDocumentName)}
	return m.Engine.withTake(ctx, s.WorkflowID, watch, prompt)
}

// completionDone removes s's watch; a watch left behind finds the run ended
// and does nothing.
func (m *Module) completionDone(ctx context.Context, s *Session) {
	if s.WorkflowID == "" {
		return
	}
	if err := m.work.Cancel(ctx, jobAbandon, s.WorkflowID); err != nil {
		m.log.WarnContext(ctx, "oauthflow: a finished completion's watch could not be removed",
			"run", s.WorkflowID, "error", err.Error())
	}
}

// abandon fires abandonSignIn on a run whose completion never ended.
func (m *Module) abandon(ctx context.Context, runID string) (rescheduled bool, err error) {
	_, err = m.fireIfWaiting(ctx, runID, transitionAbandon)
	return false, err
}

// fireIfWaiting fires transition on run runID as its user and returns the
// run as the transition left it; a run that has moved on (or is gone) needs
// nothing, and a transition that ends the run as failed on purpose is done:
// both return a nil run and no error.
func (m *Module) fireIfWaiting(ctx context.Context, runID, transition string) (*Run, error) {
	r, err := m.Engine.Get(ctx, runID)
	if errors.Is(err, ErrRunNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err = m.Engine.Fire(ctx, runID, transition, nil, r.UserID)
	var fe *FlowError
	if errors.Is(err, ErrTransitionNotAllowed) || errors.As(err, &fe) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}

// abandonTransition ends a sign-in whose completion never ended.
func (m *Module) abandonTransition(ctx context.Context, tc *TransitionContext) error {
	var data oauthRunData
	if err := tc.DecodeData(&data); err != nil {
		return err
	}
	return m.failFlow(ctx, tc, data.Provider, &FlowError{
		Message: "The sign-in could not be completed. Start it again.", Err: errCompletionAbandoned})
}

var errCompletionAbandoned = errors.New("oauthflow: the completion did not end in time")

// storeSignIn writes the tokens a provider answered a sign-in with (a code
// exchange, a device approval) for userID. The provider has spent the code
// (RFC 6749 §4.1.2, RFC 8628 §3.5): these tokens are the only ones the
// sign-in will get. So a store failure is tried again, with a growing
// backoff, as a refresh retries the write of a rotated token, for half the
// time the completion has left (half of CompletionTimeout at most): the
// other half ends the run and its prompt honestly if the store stays down.
// Anything else (a token set refused) fails at once.
func (m *Module) storeSignIn(ctx context.Context, userID, provider string, ts *TokenSet, key string) error {
	left := m.completionTimeout
	if d, ok := ctx.Deadline(); ok {
		left = min(left, time.Until(d))
	}
	ctx, cancel := context.WithTimeout(ctx, left/2)
	defer cancel()
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err := m.Tokens.storeTokenSet(ctx, userID, provider, ts, key)
		if err == nil || !errors.Is(err, ErrStoreUnavailable) {
			return err
		}
		m.log.WarnContext(ctx, "oauthflow: a sign-in's tokens could not be written; the write is tried again",
			"provider", provider, "error", logSafeError(err))
		if xcontext.Sleep(ctx, backoff) != nil {
			return err
		}
	}
}

// runLockLeaseDefault is how long a run's lock outlives an instance that stopped renewing it.
const runLockLeaseDefault = 30 * time.Second
