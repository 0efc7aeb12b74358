package oauthtemporal

import (
	"context"
	"errors"
	"fmt"

	"github.com/oauthflow/oauthflow"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
)

// CompleteSignIn finishes the sign-in s, which the module's callback
// endpoints consumed and checked, with the provider's answer a: it seals
// both in the module's store under a fresh handle, for CompletionTimeout,
// and sends the sign-in's workflow (s.WorkflowID) an update carrying the
// handle only, then waits for its outcome. nil: the user is connected. A
// sign-in whose workflow no longer exists or no longer waits is
// [oauthflow.ErrSessionNotFound] ("expired or already used"); a failed
// exchange is an [*oauthflow.FlowError] whose Message the page shows.
func (i *Integration) CompleteSignIn(ctx context.Context, s *oauthflow.Session, a oauthflow.CallbackAnswer) error {
	mod, err := i.module()
	if err != nil {
		return err
	}
	if s == nil || s.WorkflowID == "" {
		return fmt.Errorf("oauthtemporal: a sign-in without its workflow: %w", oauthflow.ErrSessionNotFound)
	}
	st := i.stash(mod, i.opts.CompletionTimeout)
	handle, err := st.put(ctx, stashedAnswer{Session: s, Answer: a})
	if err != nil {
		return err
	}
	var out exchangeOutcome
	err = i.update(ctx, s.WorkflowID, completeUpdate, completeRequest{Handle: handle}, &out)
	if err != nil {
		st.drop(ctx, handle) // refused before it was redeemed, or never delivered
		return err
	}
	switch {
	case out.Connected:
		return nil
	case out.Gone:
		return fmt.Errorf("oauthtemporal: the answer to sign-in %q was not redeemed: %w", s.WorkflowID, oauthflow.ErrSessionNotFound)
	}
	return &oauthflow.FlowError{Message: out.Message, Err: errors.New("oauthtemporal: the sign-in's exchange failed")}
}

// SignInRefused records the provider's refusal of the sign-in s on its
// workflow's prompt; the workflow keeps waiting until the sign-in lapses. A
// workflow that is gone or no longer waits has nothing to record.
func (i *Integration) SignInRefused(ctx context.Context, s *oauthflow.Session, refused *oauthflow.ProviderError) {
	if s == nil || s.WorkflowID == "" || refused == nil {
		return
	}
	err := i.update(ctx, s.WorkflowID, refusedUpdate, refusal{Code: refused.Code, Description: refused.Description}, nil)
	if err != nil && !errors.Is(err, oauthflow.ErrSessionNotFound) {
		i.log.WarnContext(ctx, "oauthtemporal: a sign-in's refusal could not be recorded", "error", err)
	}
}

// update sends the sign-in workflow id the update name with arg, waits for
// its result into out (nil: none), and maps a workflow that is gone or no
// longer waits to ErrSessionNotFound.
func (i *Integration) update(ctx context.Context, id, name string, arg, out any) error {
	h, err := i.client.UpdateWorkflow(ctx, client.UpdateWorkflowOptions{
		WorkflowID: id, UpdateName: name, Args: []any{arg}, WaitForStage: client.WorkflowUpdateStageCompleted})
	if err == nil {
		err = h.Get(ctx, out)
	}
	var notFound *serviceerror.NotFound
	var app *temporal.ApplicationError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &notFound), errors.As(err, &app) && app.Type() == notWaitingType:
		return fmt.Errorf("oauthtemporal: sign-in workflow %q no longer waits: %w", id, oauthflow.ErrSessionNotFound)
	}
	return fmt.Errorf("oauthtemporal: %s update of sign-in workflow %q: %w", name, id, err)
}
