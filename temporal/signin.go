package oauthtemporal

import (
	"time"

	"github.com/oauthflow/oauthflow"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// PromptQuery is the query a [SignIn] answers with its prompt, an
// [oauthflow.OAuthPromptDocument]: the link to show while Status is
// PromptPending, then PromptSuccess or PromptError with a Message for the
// user. [Integration.Prompt] asks it.
const PromptQuery = "prompt"

// The updates the integration sends a SignIn; their arguments are in its
// history, so they carry no secret.
const (
	completeUpdate = "complete" // a handle to the callback's stashed answer
	refusedUpdate  = "refused"  // the provider's error redirect: its code and description
)

// notWaitingType is the ApplicationError type of an update a SignIn refuses
// because it no longer waits for an answer.
const notWaitingType = "SignInNotWaiting"

// SignInInput is the input of the [SignIn] workflow: who signs in, to which
// provider, for which scopes (none: the provider's defaults).
type SignInInput struct {
	UserID   string   `json:"userId"`
	Provider string   `json:"provider"`
	Scopes   []string `json:"scopes,omitempty"`
}

// SignInResult is how a [SignIn] ended: Authenticated when the user is
// connected and the tokens are stored, else a Message for the user (the
// provider refused, the sign-in lapsed).
type SignInResult struct {
	Authenticated bool   `json:"authenticated"`
	Message       string `json:"message,omitempty"`
}

// builtSignIn is the build activity's result: the prompt's link and how long
// the sign-in waits. Nothing in it is a secret of the grant.
type builtSignIn struct {
	AuthURL string        `json:"authUrl"`
	State   string        `json:"state"`
	Binding string        `json:"binding,omitempty"` // Config.BindSignIns: the browser's secret, no use without the link's browser
	TTL     time.Duration `json:"ttl"`
}

// completeRequest is the complete update's argument: a handle, never the answer.
type completeRequest struct {
	Handle string `json:"handle"`
}

// exchangeOutcome is the exchange activity's result and the complete update's.
type exchangeOutcome struct {
	Connected bool   `json:"connected"`
	Gone      bool   `json:"gone,omitempty"`    // the handle named nothing here: nothing was exchanged
	Message   string `json:"message,omitempty"` // for the user, when not connected
	Account   string `json:"account,omitempty"`
}

// refusal is the refused update's argument: the provider's error code and
// description, as the browser brought them.
type refusal struct {
	Code        string `json:"code"`
	Description string `json:"description,omitempty"`
}

// Messages a SignIn ends with.
const (
	msgLapsed      = "The sign-in expired before it was completed. Start it again from the app."
	msgNotComplete = "Sign-in could not be completed."
)

// SignIn is the sign-in workflow, registered as [SignInWorkflowName]: it
// builds the sign-in (build_oauth_url, owned by [OwnerName], under the
// workflow's ID), answers [PromptQuery] with its prompt, and waits for the
// callback on a durable timer as long as the sign-in's TTL. The callback
// reaches it as an update carrying a handle to the stashed answer; the
// update's activity redeems it, exchanges the code and stores the tokens,
// and the outcome is the workflow's result. A provider's refusal is recorded
// on the prompt and the sign-in keeps waiting; the lapse ends it
// unauthenticated.
func SignIn(ctx workflow.Context, in SignInInput) (SignInResult, error) {
	st := &signInState{prompt: oauthflow.OAuthPromptDocument{Provider: in.Provider, Status: oauthflow.PromptPending}}
	if err := st.handle(ctx); err != nil {
		return SignInResult{}, err
	}
	var built builtSignIn
	if err := workflow.ExecuteActivity(buildOptions(ctx), buildActivityName, in).Get(ctx, &built); err != nil {
		return SignInResult{}, err
	}
	st.open(built)
	if _, err := workflow.AwaitWithTimeout(ctx, built.TTL, st.ended); err != nil {
		return SignInResult{}, err
	}
	st.closing = true // no answer is taken from here on; one being exchanged ends first
	if err := workflow.Await(ctx, func() bool { return !st.exchanging }); err != nil {
		return SignInResult{}, err
	}
	if !st.ended() {
		st.lapse()
	}
	if err := workflow.Await(ctx, func() bool { return workflow.AllHandlersFinished(ctx) }); err != nil {
		return SignInResult{}, err
	}
	return *st.result, nil
}

// signInState is a SignIn's state, which its handlers read and write.
type signInState struct {
	prompt     oauthflow.OAuthPromptDocument
	opened     bool   // the sign-in is built: answers are awaited
	closing    bool   // the wait is over: answers are refused
	exchanging bool   // an answer is being exchanged
	refused    string // the message of the provider's last refusal
	result     *SignInResult
}

func (st *signInState) ended() bool { return st.result != nil }

// waiting reports whether the sign-in takes an answer now.
func (st *signInState) waiting() bool {
	return st.opened && !st.closing && !st.exchanging && !st.ended()
}

func (st *signInState) open(b builtSignIn) {
	st.prompt.AuthURL, st.prompt.State, st.prompt.Binding = b.AuthURL, b.State, b.Binding
	st.opened = true
}

func (st *signInState) lapse() {
	msg := msgLapsed
	if st.refused != "" {
		msg = st.refused
	}
	st.end(SignInResult{Message: msg}, "")
}

func (st *signInState) end(r SignInResult, account string) {
	st.result = &r
	st.prompt.Status, st.prompt.Message, st.prompt.Account = oauthflow.PromptSuccess, "", account
	if !r.Authenticated {
		st.prompt.Status, st.prompt.Message = oauthflow.PromptError, r.Message
	}
}

// handle sets the query and the update handlers.
func (st *signInState) handle(ctx workflow.Context) error {
	if err := workflow.SetQueryHandler(ctx, PromptQuery, func() (oauthflow.OAuthPromptDocument, error) {
		return st.prompt, nil
	}); err != nil {
		return err
	}
	if err := workflow.SetUpdateHandlerWithOptions(ctx, completeUpdate, st.complete,
		workflow.UpdateHandlerOptions{Validator: st.validateComplete}); err != nil {
		return err
	}
	return workflow.SetUpdateHandlerWithOptions(ctx, refusedUpdate, st.refuse,
		workflow.UpdateHandlerOptions{Validator: st.validateRefusal})
}

func (st *signInState) validateComplete(ctx workflow.Context, req completeRequest) error {
	if !validHandle(req.Handle) {
		return temporal.NewApplicationError("oauthtemporal: malformed handle", "MalformedHandle")
	}
	return st.validateWaiting()
}

func (st *signInState) validateRefusal(ctx workflow.Context, r refusal) error {
	if r.Code == "" {
		return temporal.NewApplicationError("oauthtemporal: a refusal without its code", "MalformedRefusal")
	}
	return st.validateWaiting()
}

func (st *signInState) validateWaiting() error {
	if !st.waiting() {
		return temporal.NewApplicationError("oauthtemporal: the sign-in no longer waits for an answer", notWaitingType)
	}
	return nil
}

// complete redeems the answer req names and ends the sign-in with its
// outcome; a handle that names nothing here leaves it waiting.
func (st *signInState) complete(ctx workflow.Context, req completeRequest) (exchangeOutcome, error) {
	st.exchanging = true
	var out exchangeOutcome
	err := workflow.ExecuteActivity(exchangeOptions(ctx), exchangeActivityName, req.Handle).Get(ctx, &out)
	st.exchanging = false
	if err != nil {
		out = exchangeOutcome{Message: msgNotComplete}
	}
	if !out.Gone {
		st.end(SignInResult{Authenticated: out.Connected, Message: out.Message}, out.Account)
	}
	return out, nil
}

// refuse records the provider's refusal on the prompt; the sign-in waits on.
func (st *signInState) refuse(ctx workflow.Context, r refusal) error {
	st.refused = refusalMessage(r)
	st.prompt.Status, st.prompt.Message = oauthflow.PromptError, st.refused
	return nil
}

func buildOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 5},
	})
}

// exchangeOptions: a retry finds the answer redeemed and reports it gone,
// so the code is exchanged at most once.
func exchangeOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{MaximumAttempts: 3},
	})
}
