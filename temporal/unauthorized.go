package oauthtemporal

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/oauthflow/oauthflow"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Types of the application errors the integration's helpers return, for a
// workflow that matches them on [temporal.ApplicationError.Type].
const (
	UnauthorizedType = "oauthflow.Unauthorized" // the user must sign in: [Unauthorized]
	NotSignedInType  = "oauthflow.NotSignedIn"  // the user did not sign in: [CallWithSignIn]
)

// PendingSignInQuery is the query a workflow answers while [CallWithSignIn]
// waits on a sign-in: the [PendingSignIn], or its zero value when none is
// pending. [Integration.Prompt] follows it.
const PendingSignInQuery = "oauthflow.pending-sign-in"

// SignInNeeded says which sign-in an [Unauthorized] error asks for.
type SignInNeeded struct {
	Provider string   `json:"provider"`
	Scopes   []string `json:"scopes,omitempty"`
}

// PendingSignIn names the [SignIn] a workflow waits on.
type PendingSignIn struct {
	WorkflowID string `json:"workflowId"`
	Provider   string `json:"provider"`
}

// Unauthorized is the error a tool activity returns when its user must sign
// in to provider (for scopes, none meaning the provider's defaults): a
// non-retryable [temporal.ApplicationError] of type [UnauthorizedType] whose
// details are a [SignInNeeded]. It is benign
// ([temporal.ApplicationErrorCategoryBenign]): the worker logs it as the
// expected answer it is, not as an activity's failure. [AsUnauthorized]
// reads it back, through the ActivityError a workflow receives.
func Unauthorized(provider string, scopes ...string) error {
	return temporal.NewApplicationErrorWithOptions("oauthtemporal: the user must sign in to "+provider, UnauthorizedType,
		temporal.ApplicationErrorOptions{NonRetryable: true, Details: []any{SignInNeeded{Provider: provider, Scopes: scopes}},
			Category: temporal.ApplicationErrorCategoryBenign})
}

// AsUnauthorized reports whether err is, or wraps, an [Unauthorized] error,
// and returns the sign-in it asks for.
func AsUnauthorized(err error) (SignInNeeded, bool) {
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != UnauthorizedType {
		return SignInNeeded{}, false
	}
	var need SignInNeeded
	if app.Details(&need) != nil || need.Provider == "" {
		return SignInNeeded{}, false
	}
	return need, true
}

// AccessToken returns, in a tool activity, an access token of userID's at
// provider valid now (refreshed when it has expired), with scopes when
// given; an [Unauthorized] error when the user must sign in first (no grant,
// a dead one, or one that lacks scopes, which the error then asks for along
// with those granted). Any other error is transient, and the activity may
// be retried.
func (i *Integration) AccessToken(ctx context.Context, userID, provider string, scopes ...string) (string, error) {
	mod, err := i.module()
	if err != nil {
		return "", err
	}
	tok, err := mod.Tokens.GetValidAccessToken(ctx, userID, provider, scopes...)
	var se *oauthflow.ScopeError
	switch {
	case errors.As(err, &se):
		return "", Unauthorized(provider, se.Scopes()...)
	case errors.Is(err, oauthflow.ErrNoToken):
		return "", Unauthorized(provider, scopes...)
	}
	return tok, err
}

// Client returns, in a tool activity, an HTTP client that sends userID's
// token at provider ([oauthflow.TokenStore.Client]: refreshed as needed,
// DPoP-bound when the grant is), once [Integration.AccessToken] found one
// valid; its error otherwise.
func (i *Integration) Client(ctx context.Context, userID, provider string, scopes ...string) (*http.Client, error) {
	if _, err := i.AccessToken(ctx, userID, provider, scopes...); err != nil {
		return nil, err
	}
	mod, _ := i.module()
	return mod.Tokens.Client(ctx, userID, provider), nil
}

// CallWithSignIn runs call (a tool activity, say) in a workflow. When call
// fails with an [Unauthorized] error, it runs [SignIn] for userID and the
// error's provider and scopes as a child workflow, answers
// [PendingSignInQuery] with it meanwhile, and runs call once more when the
// user signed in. When the user did not, it returns a non-retryable
// application error of type [NotSignedInType] whose message says why.
// Another error of call's is returned as it is.
//
// The child's workflow ID is the parent's followed by "/sign-in/" and the
// provider: one sign-in per provider at a time.
func CallWithSignIn(ctx workflow.Context, userID string, call func(ctx workflow.Context) error) error {
	err := call(ctx)
	need, ok := AsUnauthorized(err)
	if !ok {
		return err
	}
	res, err := signInChild(ctx, userID, need)
	if err != nil {
		return err
	}
	if !res.Authenticated {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("oauthtemporal: the user did not sign in to %s: %s", need.Provider, res.Message),
			NotSignedInType, nil, need)
	}
	return call(ctx)
}

// signInChild runs SignIn for userID and need as a child workflow.
func signInChild(ctx workflow.Context, userID string, need SignInNeeded) (SignInResult, error) {
	id := workflow.GetInfo(ctx).WorkflowExecution.ID + "/sign-in/" + need.Provider
	pending := PendingSignIn{WorkflowID: id, Provider: need.Provider}
	if err := workflow.SetQueryHandler(ctx, PendingSignInQuery, func() (PendingSignIn, error) {
		return pending, nil
	}); err != nil {
		return SignInResult{}, err
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{WorkflowID: id})
	var res SignInResult
	err := workflow.ExecuteChildWorkflow(cctx, SignInWorkflowName,
		SignInInput{UserID: userID, Provider: need.Provider, Scopes: need.Scopes}).Get(ctx, &res)
	pending = PendingSignIn{}
	return res, err
}

// Prompt returns the prompt of the sign-in workflow id ([PromptQuery]), or,
// when id is a workflow waiting on one through [CallWithSignIn], of that
// sign-in: the link to show the user.
func (i *Integration) Prompt(ctx context.Context, id string) (*oauthflow.OAuthPromptDocument, error) {
	var pending PendingSignIn
	if query(ctx, i.client, id, PendingSignInQuery, &pending) == nil && pending.WorkflowID != "" {
		id = pending.WorkflowID
	}
	var doc oauthflow.OAuthPromptDocument
	if err := query(ctx, i.client, id, PromptQuery, &doc); err != nil {
		return nil, err
	}
	return &doc, nil
}

func query(ctx context.Context, c client.Client, id, name string, out any) error {
	v, err := c.QueryWorkflow(ctx, id, "", name)
	if err != nil {
		return err
	}
	return v.Get(out)
}
