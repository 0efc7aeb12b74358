package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/outbound"
	"github.com/oauthflow/oauthflow/internal/seal"
	"github.com/oauthflow/oauthflow/internal/worker"
	"golang.org/x/oauth2"
)

// The OAuth workflow, its states, transitions and prompt document.
const (
	// OAuthWorkflowName is the OAuth workflow's name; its arguments are
	// [OAuthWorkflowArgs]. Its run ends completed with the result JSON
	// {"authenticated": true} once the user is connected, or failed with
	// {"authenticated": false}: the Result a parent's callback transition
	// reads in its [ChildResult], and [Run].Result.
	OAuthWorkflowName     = "oauth"
	StateAwaitingAuth     = "awaiting_auth"
	transitionInitiate    = "initiateOAuth"
	transitionExchange    = "exchangeToken"
	transitionReportError = "reportError"
	transitionExpire      = "expireSignIn"  // fired by the worker when the sign-in lapses unused
	transitionAbandon     = "abandonSignIn" // fired by the worker when a completion never ended
	transitionPollDevice  = "pollDevice"    // fired by the worker when a device sign-in's poll is due
	PromptDocumentName    = "oauthPrompt"
	promptWidget          = "oauth-prompt"
)

// OAuthPromptDocument statuses.
const (
	PromptPending = "pending"
	PromptSuccess = "success"
	PromptError   = "error"
)

// OAuthPromptDocument is the sign-in prompt shown in the frontend by the
// oauth-prompt widget.
type OAuthPromptDocument struct {
	Provider string `json:"provider"`
	AuthURL  string `json:"authUrl"`
	State    string `json:"state"`
	Status   string `json:"status"`
	Message  string `json:"message,omitempty"`
	// Binding is the sign-in's secret when Config.BindSignIns is set; the
	// widget opens the sign-in with it. Show the document to its user only.
	Binding string `json:"binding,omitempty"`
	// A device sign-in (OAuthWorkflowArgs.Grant "device") has no AuthURL or
	// State: the user opens VerificationURI on any device and types
	// UserCode there, or opens VerificationURIComplete, which carries the
	// code: empty when the server gives none, or one that is not on
	// VerificationURI's origin over https (http on a loopback host). Both are
	// shown as the server gave them. ExpiresAt is when the code expires, in
	// Unix milliseconds.
	UserCode                string `json:"userCode,omitempty"`
	VerificationURI         string `json:"verificationUri,omitempty"`
	VerificationURIComplete string `json:"verificationUriComplete,omitempty"`
	ExpiresAt               int64  `json:"expiresAt,omitempty"`
	// Account names the account connected, once Status is success and the
	// provider said (Connection.Account): "Connected as octocat".
	Account string `json:"account,omitempty"`
}

// OAuthWorkflowArgs are the OAuth workflow's arguments; Scopes default to the
// provider's DefaultScopes. Grant "" signs in through the browser with the
// authorization code grant; GrantDevice ("device") with the device
// authorization grant, for a user whose agent has no browser.
type OAuthWorkflowArgs struct {
	Provider string   `json:"provider"`
	Scopes   []string `json:"scopes,omitempty"`
	Grant    string   `json:"grant,omitempty"`
	// ReturnTo is where a full-page sign-in sends the browser back once it
	// ends, with oauth=success or oauth=error and provider=<ID> added to its
	// query (a popup's page still tells its opener and closes). It must be
	// an absolute URL on the API's own origin (its callback's) or one of
	// Config.FrontendOrigins; any other fails the sign-in.
	ReturnTo string `json:"returnTo,omitempty"`
	// AuthorizationDetails are the authorization details the sign-in asks
	// for (RFC 9396), as [BuildOAuthURLArgs] takes them; the authorization
	// request carries them as authorization_details. Details that are not
	// well formed fail the run with ErrInvalidArgument before anything is
	// sent, and so do any with GrantDevice, whose request does not carry
	// them. [Module.StartSignIn] asks for none: launch the workflow with
	// [Engine.Launch] to ask for some, and read its prompt with
	// [Module.SignInStatus].
	AuthorizationDetails json.RawMessage `json:"authorizationDetails,omitempty"`
}

// oauthWorkflowResult is what the OAuth workflow returns (the result JSON
// documented on OAuthWorkflowName).
type oauthWorkflowResult struct {
	Authenticated bool `json:"authenticated"`
}

// exchangeInput is the input of the exchangeToken transition.
type exchangeInput struct {
	Code  string `json:"code"`
	State string `json:"state"`
	Iss   string `json:"iss,omitempty"`
	// Fields are the callback's other parameters (callbackParams.Fields).
	Fields map[string]string `json:"fields,omitempty"`
}

// providerErrorInput is the input of the reportError transition: the provider's
// error redirect (RFC 6749 §4.1.2.1).
type providerErrorInput struct {
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description,omitempty"`
	ErrorURI         string `json:"error_uri,omitempty"`
}

type oauthRunData struct {
	Provider      string     `json:"provider"`
	ExpectedState string     `json:"expectedState"`
	Scopes        []string   `json:"scopes,omitempty"` // a device sign-in's, recorded with its tokens when the answer names none
	Device        *deviceRun `json:"device,omitempty"` // a device sign-in's poll state
}

type sessionCtxKey struct{}

// runOwner is the module's engine as a sign-in's owner: the answer fires the
// exchange on the sign-in's run, as its user.
type runOwner struct{ o *oauthWorkflow }

func (r runOwner) CompleteSignIn(ctx context.Context, s *Session, a CallbackAnswer) error {
	_, err := r.o.engine.Fire(withSession(ctx, s), s.WorkflowID, transitionExchange,
		exchangeInput{Code: a.Code, State: a.State, Iss: a.Iss, Fields: a.Fields}, s.UserID)
	return err
}

// SignInRefused records the refusal on the sign-in's prompt, where the
// user may try the same link again.
func (r runOwner) SignInRefused(ctx context.Context, s *Session, refusal *ProviderError) {
	in := providerErrorInput{Error: refusal.Code, ErrorDescription: refusal.Description, ErrorURI: refusal.URI}
	if _, err := r.o.engine.Fire(ctx, s.WorkflowID, transitionReportError, in, s.UserID); err != nil {
		r.o.log.WarnContext(ctx, "oauthflow: recording a provider error redirect failed",
			"run", s.WorkflowID, "error", logSafeError(err))
	}
}

// directOwner finishes a sign-in built by calling build_oauth_url outside a
// workflow: the answer is exchanged at once.
type directOwner struct{ o *oauthWorkflow }

func (d directOwner) CompleteSignIn(ctx context.Context, s *Session, a CallbackAnswer) error {
	return d.o.exchangeSignIn(ctx, s, a)
}

// exchangeSignIn exchanges a's code for the consumed sign-in s and stores the
// tokens for its user, then tells the event hook how it went.
func (o *oauthWorkflow) exchangeSignIn(ctx context.Context, s *Session, a CallbackAnswer) error {
	ctx = withCallbackFields(ctx, a.Fields)
	_, err := o.exchangeCode(ctx, ToolContext{UserID: s.UserID, Session: s},
		exchangeOAuthTokenArgs{Provider: s.Provider, Code: a.Code, State: a.State, ExpectedState: a.State, Iss: a.Iss})
	kind := EventConnected
	if err != nil {
		kind = EventFlowFailed
	}
	o.events.emit(ctx, Event{Kind: kind, UserID: s.UserID, ProviderID: s.Provider, Err: err})
	return err
}

// SignInRefused does nothing: a sign-in outside a workflow has no prompt to
// record a refusal on, and the page tells its user.
func (directOwner) SignInRefused(context.Context, *Session, *ProviderError) {}

// withSession hands a consumed sign-in to the exchangeToken transition.
func withSession(ctx context.Context, s *Session) context.Context {
	return context.WithValue(ctx, sessionCtxKey{}, s)
}

func sessionFrom(ctx context.Context) *Session {
	s, _ := ctx.Value(sessionCtxKey{}).(*Session)
	return s
}

// oauthWorkflow runs the "oauth" workflow: a sign-in of either grant as a
// run with a prompt document, which its completion, a lapse, an abandoned
// completion or the answer to a device code ends. Its transitions take the
// steps of the signIns it embeds; New builds it, registers its workflow
// and hands the worker its due work.
type oauthWorkflow struct {
	*signIns
	engine       *Engine
	work         *worker.Worker // lapses, abandoned completions, device polls
	events       notifier
	ring         *seal.Ring // seals a device sign-in's secrets; nil: plain
	now          func() time.Time
	signInTTL    time.Duration
	runLockLease time.Duration
}

// workflow is the "oauth" workflow, its transitions o's.
func (o *oauthWorkflow) workflow() *Workflow {
	return &Workflow{
		Name:   OAuthWorkflowName,
		States: []string{StateStart, StateAwaitingAuth, StateEnd},
		// A redirect sign-in lapses after SignInTTL, a device one when its
		// code dies (an hour at most), and a completion ends within minutes.
		maxWait: max(o.signInTTL, maxDeviceLifetime) + defaultCompletionTimeout,
		Transitions: []Transition{
			{Name: transitionInitiate, From: StateStart, To: StateAwaitingAuth, Do: o.initiateOAuth},
			{Name: transitionExchange, From: StateAwaitingAuth, To: StateEnd, Wait: true, Do: o.exchangeTransition},
			{Name: transitionReportError, From: StateAwaitingAuth, To: StateAwaitingAuth, Wait: true, Do: o.reportErrorTransition},
			{Name: transitionExpire, From: StateAwaitingAuth, To: StateEnd, Wait: true, Do: o.expireTransition},
			{Name: transitionAbandon, From: StateAwaitingAuth, To: StateEnd, Wait: true, Do: o.abandonTransition},
			{Name: transitionPollDevice, From: StateAwaitingAuth, To: StateAwaitingAuth, Wait: true, Do: o.pollDeviceTransition},
		},
	}
}

// launch launches a run of the "oauth" workflow with args and reads its prompt.
func (o *oauthWorkflow) launch(ctx context.Context, userID string, args OAuthWorkflowArgs) (*Run, *OAuthPromptDocument, error) {
	r, err := o.engine.Launch(ctx, userID, OAuthWorkflowName, args, RunOptions{})
	if err != nil {
		return r, nil, err
	}
	var doc OAuthPromptDocument
	if err := o.engine.Document(ctx, r.ID, PromptDocumentName, &doc); err != nil {
		return r, nil, err
	}
	return r, &doc, nil
}

// initiateOAuth builds the URL (registering the sign-in under its state), keeps
// the expected state, and saves the prompt as pending.
func (o *oauthWorkflow) initiateOAuth(ctx context.Context, tc *TransitionContext) error {
	var args OAuthWorkflowArgs
	if err := tc.DecodeArgs(&args); err != nil {
		return o.failFlow(ctx, tc, "", &FlowError{Message: "The sign-in request is not valid.", Err: err})
	}
	p, err := o.registry.Get(args.Provider) // Get, not Has: a resolver may build it (AddResolver)
	if err != nil {
		return o.failFlow(ctx, tc, args.Provider, &FlowError{Message: "This provider is not available.", Err: err})
	}
	switch args.Grant {
	case GrantDevice:
		return o.initiateDevice(ctx, tc, args, p)
	case "":
	default:
		return o.failFlow(ctx, tc, args.Provider, &FlowError{Message: "The sign-in request is not valid.",
			Err: errs.Invalid("grant %q is not one of \"\" and %q", args.Grant, GrantDevice)})
	}
	res, err := o.buildAuthURL(ctx, ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID},
		BuildOAuthURLArgs{Provider: args.Provider, Scopes: args.Scopes, AuthorizationDetails: args.AuthorizationDetails}, args.ReturnTo)
	if err != nil {
		return o.failFlow(ctx, tc, args.Provider, err)
	}
	if err := tc.SetData(oauthRunData{Provider: args.Provider, ExpectedState: res.State}); err != nil {
		return err
	}
	if err := o.work.Schedule(ctx, jobLapse, tc.Run.ID, o.now().Add(o.signInTTL)); err != nil {
		return err
	}
	return o.engine.saveDocumentWithRun(ctx, tc.Run, PromptDocumentName, promptWidget, OAuthPromptDocument{
		Provider: args.Provider, AuthURL: res.AuthURL, State: res.State, Status: PromptPending, Binding: res.Binding})
}

// jobLapse is the worker's job that ends a sign-in nobody finished in time.
const jobLapse = "lapse"

// tidyDueWork removes run id's due work under job, with the release of the
// run's lock when the call holds it.
func (o *oauthWorkflow) tidyDueWork(ctx context.Context, id, job string) {
	if err := o.engine.tidyAtRelease(ctx, id, job+":"+id); err != nil {
		o.log.WarnContext(ctx, "oauthflow: a finished sign-in's due work could not be removed", "run", id, "work", job, "error", err.Error())
	}
}

// lapse fires expireSignIn on an oauth run whose sign-in lapsed; a run that has
// moved on (signed in, failed) or is gone needs nothing.
func (o *oauthWorkflow) lapse(ctx context.Context, runID string) (rescheduled bool, err error) {
	_, err = o.fireIfWaiting(ctx, runID, transitionExpire)
	return false, err
}

// expireTransition ends a sign-in that lapsed unused: the run returns
// {authenticated:false}, the prompt says the link expired, and the parent
// hears status "failed".
func (o *oauthWorkflow) expireTransition(ctx context.Context, tc *TransitionContext) error {
	var data oauthRunData
	if err := tc.DecodeData(&data); err != nil {
		return err
	}
	if data.Device != nil {
		return o.failFlow(ctx, tc, data.Provider, errDeviceExpired)
	}
	return o.failFlow(ctx, tc, data.Provider, &FlowError{
		Message: "This sign-in link expired. Start the sign-in again.", Err: ErrSessionNotFound})
}

// exchangeTransition re-checks the state, exchanges the code and stores the
// tokens; the prompt becomes success, or error with a human message.
func (o *oauthWorkflow) exchangeTransition(ctx context.Context, tc *TransitionContext) error {
	var data oauthRunData
	if err := tc.DecodeData(&data); err != nil {
		return err
	}
	var in exchangeInput
	if err := tc.DecodeInput(&in); err != nil {
		return o.failFlow(ctx, tc, data.Provider, &FlowError{Message: "The sign-in response is not valid.", Err: err})
	}
	var kept signInKept
	xctx := withTokensAtRelease(withSignInKept(withCallbackFields(ctx, in.Fields), &kept), tc.Run.ID)
	_, err := o.exchangeCode(xctx, ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID, Session: sessionFrom(ctx)},
		exchangeOAuthTokenArgs{Provider: data.Provider, Code: in.Code, State: in.State, ExpectedState: data.ExpectedState, Iss: in.Iss})
	if err != nil {
		return o.failFlow(ctx, tc, data.Provider, err)
	}
	if err := tc.SetResult(oauthWorkflowResult{Authenticated: true}); err != nil {
		return err
	}
	endData(tc)
	if err := o.settlePrompt(ctx, tc, PromptSuccess, "", kept.account); err != nil {
		return err
	}
	// Tidy only, sent with the run's last save: a lapse of an ended run, or a
	// watch on its ended completion, does nothing.
	o.tidyDueWork(ctx, tc.Run.ID, jobLapse)
	if s := sessionFrom(ctx); s != nil && s.WorkflowID == tc.Run.ID {
		o.tidyDueWork(ctx, tc.Run.ID, jobAbandon)
	}
	o.connectedAtRelease(ctx, tc, data.Provider)
	return nil
}

// connectedAtRelease tells the event hook, once the release of the run's
// lock has sent the sign-in's tokens with the run's end, that the user is
// connected; or that the flow failed, when the tokens could not be written.
func (o *oauthWorkflow) connectedAtRelease(ctx context.Context, tc *TransitionContext, provider string) {
	e := Event{Kind: EventConnected, UserID: tc.Run.UserID, ProviderID: provider, RunID: tc.Run.ID}
	o.engine.afterRelease(ctx, tc.Run.ID, func(ctx context.Context, failed error) {
		if failed != nil {
			e.Kind, e.Err = EventFlowFailed, failed
		}
		o.events.emit(ctx, e)
	})
}

// reportErrorTransition records a provider's error redirect (access_denied...):
// the prompt shows it, but the run keeps waiting and the sign-in stays usable
// until it expires, so the user may try the same link again.
func (o *oauthWorkflow) reportErrorTransition(ctx context.Context, tc *TransitionContext) error {
	var data oauthRunData
	if err := tc.DecodeData(&data); err != nil {
		return err
	}
	var in providerErrorInput
	if err := tc.DecodeInput(&in); err != nil || in.Error == "" {
		return errs.Invalid("reportError needs an error code")
	}
	perr := redirectError(data.Provider, in.Error, in.ErrorDescription, in.ErrorURI)
	o.events.emit(ctx, Event{Kind: EventFlowFailed, UserID: tc.Run.UserID, ProviderID: data.Provider, RunID: tc.Run.ID, Err: perr})
	return o.updatePrompt(ctx, tc, PromptError, signInErrorMessage(in.Error, in.ErrorDescription))
}

// failFlow ends the flow honestly: the prompt (when there is one) shows the
// error, the run returns {authenticated:false}, and the error ends the run as
// failed so the parent hears status "failed".
func (o *oauthWorkflow) failFlow(ctx context.Context, tc *TransitionContext, provider string, err error) error {
	msg := flowFailureMessage(err)
	if serr := tc.SetResult(oauthWorkflowResult{Authenticated: false}); serr != nil {
		return errors.Join(err, serr)
	}
	endData(tc)
	if _, ok := tc.Run.Documents[PromptDocumentName]; ok {
		if perr := o.updatePrompt(ctx, tc, PromptError, msg); perr != nil {
			return errors.Join(err, perr)
		}
	}
	o.events.emit(ctx, Event{Kind: EventFlowFailed, UserID: tc.Run.UserID, ProviderID: provider, RunID: tc.Run.ID,
		Err: err})
	var fe *FlowError
	if errors.As(err, &fe) {
		return err
	}
	return &FlowError{Message: msg, Err: err}
}

// endData drops an ending sign-in's own state (the expected state, a
// device code): nothing reads it once the run has ended, and the run is
// kept for a day for its parent and its page.
func endData(tc *TransitionContext) { tc.Run.Data = nil }

func (o *oauthWorkflow) updatePrompt(ctx context.Context, tc *TransitionContext, status, message string) error {
	return o.settlePrompt(ctx, tc, status, message, "")
}

// settlePrompt is updatePrompt naming the account connected.
func (o *oauthWorkflow) settlePrompt(ctx context.Context, tc *TransitionContext, status, message, account string) error {
	var doc OAuthPromptDocument
	if err := o.engine.Document(ctx, tc.Run.ID, PromptDocumentName, &doc); err != nil {
		return err
	}
	doc.Status, doc.Message, doc.Account = status, message, account
	if status == PromptSuccess {
		// The link and its binding are spent: a page that shows the
		// success needs neither, and the document is kept for a day.
		doc.AuthURL, doc.Binding = "", ""
	}
	return o.engine.saveDocumentWithRun(ctx, tc.Run, PromptDocumentName, promptWidget, doc)
}

// flowFailureMessage says what went wrong in words for the user, never with
// internal error text.
func flowFailureMessage(err error) string {
	var fe *FlowError
	switch {
	case errors.As(err, &fe) && fe.Message != "":
		return fe.Message
	case errors.Is(err, ErrSessionNotFound):
		return "This sign-in link has expired or was already used."
	case errors.Is(err, ErrStoreUnavailable):
		return "The service is temporarily unavailable. Please try again later."
	case IsTransient(err):
		return "The provider could not be reached. Please try again later."
	case shownCode(err) != "":
		return "The provider did not accept the sign-in (" + shownCode(err) + ")."
	}
	return "Sign-in could not be completed."
}

// shownCode is err's provider error code as a person may read it (serverText).
func shownCode(err error) string { return serverText(providerCode(err), maxErrorCodeLen) }

// maxMessageRunes bounds a provider's error description shown to the user.
const maxMessageRunes = 300

// signInErrorMessage says why a provider's redirect reported an error, in
// the server's words filtered and bounded (serverText): the terminal agent
// prints it, and pages show it. Pages, the widget and the terminal put
// their own heading ("Sign-in not completed") before it, so it does not
// repeat one.
func signInErrorMessage(code, description string) string {
	code, description = serverText(code, maxErrorCodeLen), serverText(description, maxErrorDescriptionLen)
	if d := []rune(description); len(d) > maxMessageRunes {
		description = string(d[:maxMessageRunes]) + "…"
	}
	switch {
	case description != "":
		return description
	case code == "access_denied":
		return "Access was denied."
	case code == "":
		return "The provider reported an error."
	}
	return "The provider reported " + code + "."
}

// linkedCompleteURI is a device sign-in's complete verification URI as its
// prompt carries it: complete when it leads where uri, the address the user
// reads, does, "" otherwise. The complete URI carries the code and is
// opened without being read (a QR code, a terminal's link), so it must be
// on uri's origin, over https (or http on a loopback host, in development),
// with no user info to pose as another host.
func linkedCompleteURI(uri, complete string) string {
	u, err := url.Parse(uri)
	if err != nil {
		return ""
	}
	c, err := url.Parse(complete)
	if err != nil || c.User != nil || !outbound.SameOrigin(c, u) {
		return ""
	}
	if c.Scheme == "https" || c.Scheme == "http" && loopbackHost(c.Hostname()) {
		return complete
	}
	return ""
}

// loopbackHost reports whether host names this machine: localhost or a
// loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// maxToolSignIns bounds the sign-ins one ToolWorkflow run asks for: a tool
// still unauthorized after as many completed sign-ins will not be helped by
// another.
const maxToolSignIns = 2

// ToolWorkflow is the agent pattern as a ready workflow named name: it calls
// tool with the run's arguments; when the tool answers "unauthorized" it runs
// the "oauth" sign-in as a child (for provider, or the provider the answer
// names, asking for the scopes the answer asks for) and calls the tool again
// once the sign-in completes. The run's result is the tool's answer, or
// {"error":"sign-in failed"} when the user did not sign in, or
// {"error":"unauthorized",...} when the tool still refuses after two sign-ins.
// Register it on every instance's Engine and Launch it for a user.
func ToolWorkflow(name string, tool *Tool, provider string) *Workflow {
	return &Workflow{
		Name:   name,
		States: []string{StateStart, StateAwaitingAuth, StateEnd},
		Transitions: []Transition{
			{Name: "call", From: StateStart, To: StateEnd,
				Do: func(ctx context.Context, tc *TransitionContext) error {
					args := tc.Run.Args
					if len(args) == 0 || string(args) == "null" {
						args = json.RawMessage(`{}`)
					}
					res, err := tool.Call(ctx, ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID}, args)
					if err != nil {
						return err
					}
					u, unauthorized := UnauthorizedResult(res)
					if !unauthorized || len(tc.Run.Children) >= maxToolSignIns {
						return tc.SetResult(res)
					}
					p := provider
					if u.Provider != "" {
						p = u.Provider
					}
					tc.GoTo(StateAwaitingAuth)
					_, err = tc.Launch(ctx, OAuthWorkflowName, OAuthWorkflowArgs{Provider: p, Scopes: u.Scopes},
						RunOptions{Callback: &Callback{Transition: "signedIn"}})
					return err
				}},
			{Name: "signedIn", From: StateAwaitingAuth, To: StateStart, Wait: true,
				Do: func(_ context.Context, tc *TransitionContext) error {
					var child ChildResult
					if err := tc.DecodeInput(&child); err != nil {
						return err
					}
					if child.Status != RunCompleted {
						tc.GoTo(StateEnd)
						return tc.SetResult(map[string]string{"error": "sign-in failed"})
					}
					return nil
				}},
		},
	}
}

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

// defaultCompletionTimeout bounds a completion the server runs after the
// client's request: the exchange, the token write, the run's end and the
// parent's resume.
const defaultCompletionTimeout = time.Minute

// serverOwned is ctx's values with no cancellation and a deadline of its own.
func (o *oauthWorkflow) serverOwned(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), o.completionTimeout)
}

// watchCompletion records that s's completion must end by its deadline. The
// watch goes with the take of the run's lock (withTake), in one round trip,
// and must land before the run's transition runs; the prompt the transition
// updates is read with it too.
func (o *oauthWorkflow) watchCompletion(ctx context.Context, s *Session) context.Context {
	if s.WorkflowID == "" {
		return ctx // a sign-in outside a workflow has no run to end
	}
	due := o.now().Add(o.completionTimeout + o.runLockLease)
	watch := &kv.Op{Kind: kv.OpScheduleSharded, Key: dueIndex, Member: jobAbandon + ":" + s.WorkflowID, Due: due}
	prompt := &kv.Op{Kind: kv.OpGet, Key: keyspace.Doc(s.WorkflowID, PromptDocumentName)}
	return o.engine.withTake(ctx, s.WorkflowID, watch, prompt)
}

// completionDone removes s's watch; a watch left behind finds the run ended
// and does nothing.
func (o *oauthWorkflow) completionDone(ctx context.Context, s *Session) {
	if s.WorkflowID == "" {
		return
	}
	if err := o.work.Cancel(ctx, jobAbandon, s.WorkflowID); err != nil {
		o.log.WarnContext(ctx, "oauthflow: a finished completion's watch could not be removed",
			"run", s.WorkflowID, "error", err.Error())
	}
}

// abandon fires abandonSignIn on a run whose completion never ended.
func (o *oauthWorkflow) abandon(ctx context.Context, runID string) (rescheduled bool, err error) {
	_, err = o.fireIfWaiting(ctx, runID, transitionAbandon)
	return false, err
}

// fireIfWaiting fires transition on run runID as its user and returns the
// run as the transition left it; a run that has moved on (or is gone) needs
// nothing, and a transition that ends the run as failed on purpose is done:
// both return a nil run and no error.
func (o *oauthWorkflow) fireIfWaiting(ctx context.Context, runID, transition string) (*Run, error) {
	r, err := o.engine.Get(ctx, runID)
	if errors.Is(err, ErrRunNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	r, err = o.engine.Fire(ctx, runID, transition, nil, r.UserID)
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
func (o *oauthWorkflow) abandonTransition(ctx context.Context, tc *TransitionContext) error {
	var data oauthRunData
	if err := tc.DecodeData(&data); err != nil {
		return err
	}
	return o.failFlow(ctx, tc, data.Provider, &FlowError{
		Message: "The sign-in could not be completed. Start it again.", Err: errCompletionAbandoned})
}

var errCompletionAbandoned = errors.New("oauthflow: the completion did not end in time")

// A device sign-in (GrantDevice, RFC 8628) is a run of the same workflow:
// its first transition asks the provider for a device code instead of
// building a URL, the worker polls the token endpoint while the run waits,
// and an approval stores the tokens and ends the run as a completion does.

// initiateDevice asks the provider for a device code, keeps the poll state
// in the run, schedules the first poll and the code's expiry, and saves the
// prompt with the code to show.
func (o *oauthWorkflow) initiateDevice(ctx context.Context, tc *TransitionContext, args OAuthWorkflowArgs, p Provider) error {
	d := deviceAuthorizerOf(p)
	if d == nil {
		return o.failFlow(ctx, tc, args.Provider, &FlowError{Message: "This provider does not offer sign-in with a code.", Err: ErrDeviceAuthUnsupported})
	}
	if err := noDetails(args.AuthorizationDetails); err != nil {
		return o.failFlow(ctx, tc, args.Provider, err)
	}
	scopes := args.Scopes
	if len(scopes) == 0 {
		scopes = p.DefaultScopes()
	}
	auth, err := callDeviceAuth(context.WithValue(ctx, oauth2.HTTPClient, o.httpClient), d, scopes)
	if err == nil {
		err = checkDeviceAuth(args.Provider, auth)
	}
	if err != nil {
		return o.failFlow(ctx, tc, args.Provider, err)
	}
	run, err := o.newDeviceRun(tc.Run.ID, p, auth)
	if err != nil {
		return err
	}
	if err := tc.SetData(oauthRunData{Provider: args.Provider, Scopes: scopes, Device: run}); err != nil {
		return err
	}
	if err := o.work.Schedule(ctx, jobDevice, tc.Run.ID, time.UnixMilli(run.NextPollAt)); err != nil {
		return err
	}
	// The lapse ends the run at the code's expiry even when no poll gets
	// through to hear expired_token.
	if err := o.work.Schedule(ctx, jobLapse, tc.Run.ID, time.UnixMilli(run.ExpiresAt)); err != nil {
		return err
	}
	return o.engine.saveDocumentWithRun(ctx, tc.Run, PromptDocumentName, promptWidget, OAuthPromptDocument{
		Provider: args.Provider, Status: PromptPending, UserCode: auth.UserCode, VerificationURI: auth.VerificationURI,
		VerificationURIComplete: linkedCompleteURI(auth.VerificationURI, auth.VerificationURIComplete), ExpiresAt: run.ExpiresAt})
}

// newDeviceRun is the poll state of a new device code: its secrets sealed
// (in the text form: they travel in the run's JSON), its interval and
// lifetime bounded, its first poll one interval away.
func (o *oauthWorkflow) newDeviceRun(runID string, p Provider, a *DeviceAuthorization) (*deviceRun, error) {
	now := o.now()
	interval := defaultDeviceInterval
	if a.Interval > 0 {
		interval = time.Duration(min(a.Interval, int64(maxDeviceInterval/time.Second))) * time.Second
	}
	life := o.signInTTL // a server that names no lifetime: ours, never "expired at once"
	if a.ExpiresIn > 0 {
		life = time.Duration(min(a.ExpiresIn, int64(maxDeviceLifetime/time.Second))) * time.Second
	}
	name := deviceSecretName(runID)
	run := &deviceRun{Code: string(o.ring.SealText([]byte(a.DeviceCode), name)), Interval: int64(interval / time.Second),
		ExpiresAt: now.Add(life).UnixMilli(), NextPollAt: now.Add(interval).UnixMilli()}
	if usesDPoP(p) {
		_, enc, err := newGrantKey()
		if err != nil {
			return nil, err
		}
		run.Key = string(o.ring.SealText([]byte(enc), name))
	}
	return run, nil
}

// pollDevice is the worker's job for a device sign-in: it fires the poll on
// the run, then places the next poll where the run's state says. A run that
// ended needs nothing more.
//
// A poll that is sent may redeem the device code (RFC 8628 §3.5): the
// provider's tokens are then the only ones the sign-in will ever get. So the
// poll, and the token write, the run's end and the parent's resume that
// follow it, are the server's, as a redirect completion is once its state
// is spent: they run under a context of their own (CompletionTimeout) that
// the worker's stop does not end, and Close waits for them.
func (o *oauthWorkflow) pollDevice(ctx context.Context, runID string) (rescheduled bool, err error) {
	ctx, cancel := o.serverOwned(ctx)
	defer cancel()
	r, err := o.fireIfWaiting(ctx, runID, transitionPollDevice)
	if err != nil || r == nil || r.Status != RunWaiting {
		return false, err
	}
	var data oauthRunData
	if err := decodeStrict(r.Data, &data, "data"); err != nil || data.Device == nil {
		return false, err
	}
	if err := o.work.Schedule(ctx, jobDevice, runID, time.UnixMilli(data.Device.NextPollAt)); err != nil {
		return false, err
	}
	return true, nil
}

// pollDeviceTransition asks the token endpoint once for the device code's
// tokens, unless the interval since the last poll has not passed (another
// instance polled), and acts on the answer: tokens end the sign-in,
// authorization_pending waits an interval, slow_down lengthens it for good,
// a transient failure backs off, and a denial, an expiry or any other
// refusal ends the run.
func (o *oauthWorkflow) pollDeviceTransition(ctx context.Context, tc *TransitionContext) error {
	var data oauthRunData
	if err := tc.DecodeData(&data); err != nil {
		return err
	}
	d := data.Device
	if d == nil {
		return nil // a redirect sign-in: nothing to poll
	}
	now := o.now().UnixMilli()
	if now >= d.ExpiresAt {
		return o.failFlow(ctx, tc, data.Provider, errDeviceExpired)
	}
	if now < d.NextPollAt {
		return nil
	}
	ts, err := o.callDeviceToken(ctx, tc.Run.ID, data.Provider, d)
	if err == nil {
		return o.deviceApproved(ctx, tc, &data, ts)
	}
	interval := time.Duration(d.Interval) * time.Second
	switch code := providerCode(err); {
	case code == "authorization_pending":
		d.Failures = 0
	case code == "slow_down":
		d.Failures, d.Interval = 0, d.Interval+int64(slowDownStep/time.Second)
		interval += slowDownStep
	case code == "access_denied" || code == "authorization_declined": // Microsoft says the latter
		return o.failFlow(ctx, tc, data.Provider, &FlowError{Message: "The sign-in was denied.", Err: err})
	case code == "expired_token":
		return o.failFlow(ctx, tc, data.Provider, &FlowError{Message: errDeviceExpired.Message, Err: err})
	case IsTransient(err):
		d.Failures++
		interval = max(interval, deviceBackoff.after(d.Failures, tc.Run.ID))
		o.log.WarnContext(ctx, "oauthflow: a device sign-in's poll failed; it is tried again", "run", tc.Run.ID,
			"provider", data.Provider, "failures", d.Failures, "error", logSafeError(err))
	default:
		return o.failFlow(ctx, tc, data.Provider, err)
	}
	d.NextPollAt = o.now().Add(interval).UnixMilli()
	return tc.SetData(data)
}

// callDeviceToken opens the device code (and the grant's key, whose proofs
// the poll then carries) and polls once.
func (o *oauthWorkflow) callDeviceToken(ctx context.Context, runID, provider string, d *deviceRun) (ts *TokenSet, err error) {
	p, err := o.registry.Get(provider)
	if err != nil {
		return nil, err
	}
	da := deviceAuthorizerOf(p)
	if da == nil {
		return nil, &FlowError{Message: "This provider no longer offers sign-in with a code.", Err: ErrDeviceAuthUnsupported}
	}
	code, err := o.openDeviceSecret(runID, d.Code)
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, o.httpClient)
	if d.Key != "" {
		enc, err := o.openDeviceSecret(runID, d.Key)
		if err != nil {
			return nil, err
		}
		key, err := o.tokens.keys.get(enc) // parsed once: the first API call signs with it too
		if err != nil {
			return nil, err
		}
		ctx = withProofs(ctx, key, &o.tokens.nonces)
	}
	defer errs.Recover(&err, "provider "+provider+" DeviceToken")
	ts, err = da.DeviceToken(ctx, code)
	if err == nil && (ts == nil || ts.AccessToken == "") {
		err = &ProviderError{ProviderID: provider, Err: errNoAccessToken}
	}
	return ts, err
}

// openDeviceSecret is the plain form of a device sign-in's sealed secret.
func (o *oauthWorkflow) openDeviceSecret(runID, sealed string) (string, error) {
	b, err := o.ring.Open([]byte(sealed), deviceSecretName(runID))
	return string(b), err
}

// deviceApproved stores the tokens for the run's user, as a redirect
// sign-in's are, and ends the run {authenticated: true}.
func (o *oauthWorkflow) deviceApproved(ctx context.Context, tc *TransitionContext, data *oauthRunData, ts *TokenSet) error {
	if ts.Scope == "" {
		ts.Scope = strings.Join(data.Scopes, " ")
	}
	key, err := o.openDeviceSecret(tc.Run.ID, data.Device.Key)
	if err == nil {
		if p, perr := o.registry.Get(data.Provider); perr == nil {
			o.readAccount(ctx, p, ts, key)
		}
		err = o.storeSignIn(withTokensAtRelease(ctx, tc.Run.ID), tc.Run.UserID, data.Provider, ts, key)
	}
	if err != nil {
		return o.failFlow(ctx, tc, data.Provider, err)
	}
	if err := tc.SetResult(oauthWorkflowResult{Authenticated: true}); err != nil {
		return err
	}
	endData(tc)
	if err := o.settlePrompt(ctx, tc, PromptSuccess, "", showable(ts.Account, maxAccountLen)); err != nil {
		return err
	}
	tc.GoTo(StateEnd)
	o.tidyDueWork(ctx, tc.Run.ID, jobLapse)
	o.connectedAtRelease(ctx, tc, data.Provider)
	return nil
}

// deviceBackoff spaces the polls of a device sign-in whose token endpoint
// failed transiently (network, 5xx, 429): never sooner than the interval.
var deviceBackoff = Backoff{First: 5 * time.Second, Max: time.Minute, Jitter: 0.2}

// deviceRun is a device sign-in's poll state, kept in its run's data (so
// every instance reads it, and each poll's outcome is saved with the run
// under the run's lock). The device code and the DPoP key are secrets: they
// are sealed, bound to the run, when encryption is on.
type deviceRun struct {
	Code       string `json:"code"`
	Key        string `json:"key,omitempty"` // the key the grant will be bound to (a Provider's UsesDPoP)
	Interval   int64  `json:"interval"`      // seconds between polls, raised by slow_down
	ExpiresAt  int64  `json:"expiresAt"`     // Unix ms: the code is dead then
	NextPollAt int64  `json:"nextPollAt"`    // Unix ms: no poll before it
	Failures   int    `json:"failures,omitempty"`
}

// deviceSecretName binds a device sign-in's sealed secrets to its run.
func deviceSecretName(runID string) string { return keyspace.Run(runID) + ":device" }
