package oauthtemporal

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// This file runs the device authorization grant (RFC 8628) as a workflow:
// the sign-in of a user whose agent has no browser, who types a code on
// another device. The device code is the grant's secret until it is
// redeemed, so it is stashed as a callback's answer is, and the poll
// activity is given its handle.

// DeviceSignInWorkflowName is the name [Integration.Register] gives
// [DeviceSignIn]; it is in every running device sign-in's history.
const DeviceSignInWorkflowName = "oauthflow.DeviceSignIn"

const (
	startDeviceActivityName = "oauthflow.StartDeviceSignIn"
	pollDeviceActivityName  = "oauthflow.PollDeviceSignIn"
)

// Device sign-in timings (RFC 8628 §3.2, §3.5).
const (
	defaultDeviceInterval = 5 * time.Second  // when the server names none
	slowDownStep          = 5 * time.Second  // what each slow_down adds to the interval, for good
	maxDeviceInterval     = 5 * time.Minute  // the most a server's interval is honoured to
	defaultDeviceLifetime = 15 * time.Minute // when the server names none
	maxDeviceLifetime     = time.Hour        // the longest a device code is polled, whatever the server says
)

// deviceGrant is a provider that offers the device grant: the methods the
// module's own device sign-in finds on a provider by type assertion
// ([oauthflow.Provider]'s optional DeviceAuth and DeviceToken).
type deviceGrant interface {
	DeviceAuth(ctx context.Context, scopes []string) (*oauthflow.DeviceAuthorization, error)
	DeviceToken(ctx context.Context, deviceCode string) (*oauthflow.TokenSet, error)
}

// startedDevice is the start activity's result: what the prompt shows, the
// handle of the stashed device code, and the poll's timings.
type startedDevice struct {
	Handle                  string        `json:"handle"`
	UserCode                string        `json:"userCode"`
	VerificationURI         string        `json:"verificationUri"`
	VerificationURIComplete string        `json:"verificationUriComplete,omitempty"`
	Interval                time.Duration `json:"interval"`
	Lifetime                time.Duration `json:"lifetime"`
}

// stashedDevice is what the start activity stashes for the polls.
type stashedDevice struct {
	WorkflowID string   `json:"workflowId"`
	UserID     string   `json:"userId"`
	Provider   string   `json:"provider"`
	Scopes     []string `json:"scopes,omitempty"`
	DeviceCode string   `json:"deviceCode"`
}

// How a poll went, as the poll activity reports it.
const (
	pollPending   = "pending"   // authorization_pending: ask again after the interval
	pollSlowDown  = "slow_down" // ask again after a longer interval, for good
	pollConnected = "connected" // the tokens are stored
	pollEnded     = "ended"     // refused, expired or failed: Message says which
)

type devicePoll struct {
	Status  string `json:"status"`
	Message string `json:"message,omitempty"`
	Account string `json:"account,omitempty"`
}

// Messages a device sign-in ends with.
const (
	msgDeviceExpired = "The code expired before it was used. Start the sign-in again."
	msgDeviceDenied  = "The sign-in was refused."
)

// DeviceSignIn is the device sign-in workflow, registered as
// [DeviceSignInWorkflowName]: it asks the provider for a device code, shows
// the user code and the verification URI on the prompt ([PromptQuery]), and
// polls the token endpoint on durable timers, at the interval the server
// names, lengthened by 5 seconds for good at each slow_down, until the user
// allows or denies or the code expires. The tokens are stored for the user
// as a redirect sign-in's are. A worker that stops between two polls costs
// nothing: the next worker polls on.
func DeviceSignIn(ctx workflow.Context, in SignInInput) (SignInResult, error) {
	prompt := oauthflow.OAuthPromptDocument{Provider: in.Provider, Status: oauthflow.PromptPending}
	if err := workflow.SetQueryHandler(ctx, PromptQuery, func() (oauthflow.OAuthPromptDocument, error) {
		return prompt, nil
	}); err != nil {
		return SignInResult{}, err
	}
	var d startedDevice
	if err := workflow.ExecuteActivity(buildOptions(ctx), startDeviceActivityName, in).Get(ctx, &d); err != nil {
		return SignInResult{}, err
	}
	deadline := workflow.Now(ctx).Add(d.Lifetime)
	prompt.UserCode, prompt.VerificationURI, prompt.VerificationURIComplete = d.UserCode, d.VerificationURI, d.VerificationURIComplete
	prompt.ExpiresAt = deadline.UnixMilli()
	res, account, err := pollUntilAnswered(ctx, d, deadline)
	if err != nil {
		return SignInResult{}, err
	}
	prompt.Status, prompt.Account = oauthflow.PromptSuccess, account
	if !res.Authenticated {
		prompt.Status, prompt.Message = oauthflow.PromptError, res.Message
	}
	return res, nil
}

// pollUntilAnswered polls d's token endpoint, an interval after each poll,
// until it answers or deadline passes.
func pollUntilAnswered(ctx workflow.Context, d startedDevice, deadline time.Time) (SignInResult, string, error) {
	interval := d.Interval
	for workflow.Now(ctx).Add(interval).Before(deadline) {
		if err := workflow.Sleep(ctx, interval); err != nil {
			return SignInResult{}, "", err
		}
		var p devicePoll
		if err := workflow.ExecuteActivity(pollOptions(ctx, interval), pollDeviceActivityName, d.Handle).Get(ctx, &p); err != nil {
			return SignInResult{Message: msgNotComplete}, "", nil
		}
		switch p.Status {
		case pollPending:
		case pollSlowDown:
			interval = min(interval+slowDownStep, maxDeviceInterval)
		case pollConnected:
			return SignInResult{Authenticated: true}, p.Account, nil
		default:
			return SignInResult{Message: p.Message}, "", nil
		}
	}
	return SignInResult{Message: msgDeviceExpired}, "", nil
}

// pollOptions: a poll that failed (the provider unreachable) is tried again
// no sooner than the interval, which a retry must honour too.
func pollOptions(ctx workflow.Context, interval time.Duration) workflow.Context {
	return workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: interval, BackoffCoefficient: 1, MaximumAttempts: 3},
	})
}

// startDevice is the start activity: it asks in.Provider for a device code,
// stashes the code for the polls, and returns what the prompt shows.
func (i *Integration) startDevice(ctx context.Context, in SignInInput) (startedDevice, error) {
	mod, err := i.module()
	if err != nil {
		return startedDevice{}, err
	}
	p, dg, err := deviceProvider(mod, in.Provider)
	if err != nil {
		return startedDevice{}, temporal.NewNonRetryableApplicationError(err.Error(), "SignInNotBuilt", nil)
	}
	scopes := in.Scopes
	if len(scopes) == 0 {
		scopes = p.DefaultScopes()
	}
	a, err := dg.DeviceAuth(ctx, scopes)
	if err == nil && (a == nil || a.DeviceCode == "" || a.UserCode == "" || a.VerificationURI == "") {
		err = &oauthflow.ProviderError{ProviderID: in.Provider, Err: errors.New("the device authorization answer lacks a code or its URI")}
	}
	if err != nil {
		return startedDevice{}, buildError(err)
	}
	life := seconds(a.ExpiresIn, defaultDeviceLifetime, maxDeviceLifetime)
	handle, err := i.stash(mod, life).put(ctx, stashedDevice{WorkflowID: activity.GetInfo(ctx).WorkflowExecution.ID,
		UserID: in.UserID, Provider: p.ProviderID(), Scopes: scopes, DeviceCode: a.DeviceCode})
	if err != nil {
		return startedDevice{}, err
	}
	return startedDevice{Handle: handle, UserCode: a.UserCode, VerificationURI: a.VerificationURI,
		VerificationURIComplete: a.VerificationURIComplete,
		Interval:                seconds(a.Interval, defaultDeviceInterval, maxDeviceInterval), Lifetime: life}, nil
}

// deviceProvider is the provider id with its device grant, or why not.
func deviceProvider(mod *oauthflow.Module, id string) (oauthflow.Provider, deviceGrant, error) {
	p, err := mod.Registry.Get(id)
	if err != nil {
		return nil, nil, err
	}
	dg, ok := p.(deviceGrant)
	if s, has := p.(interface{ SupportsDeviceAuth() bool }); !ok || has && !s.SupportsDeviceAuth() {
		return nil, nil, fmt.Errorf("%w: %s", oauthflow.ErrDeviceAuthUnsupported, id)
	}
	if d, has := p.(interface{ UsesDPoP() bool }); has && d.UsesDPoP() {
		return nil, nil, fmt.Errorf("oauthtemporal: provider %s binds its tokens with DPoP, which DeviceSignIn does not: %w", id, errors.ErrUnsupported)
	}
	return p, dg, nil
}

// seconds is n seconds, def when n is not positive, at most most.
func seconds(n int64, def, most time.Duration) time.Duration {
	if n <= 0 {
		return def
	}
	return min(time.Duration(min(n, int64(most/time.Second)))*time.Second, most)
}

// pollDevice is the poll activity: it reads the stashed device code (which
// stays until it is redeemed or expires), checks it is this workflow's, and
// asks the token endpoint once. On tokens it stores them and removes the
// code. A failure the provider may not repeat (unreachable) is the
// activity's error, retried no sooner than the interval.
func (i *Integration) pollDevice(ctx context.Context, handle string) (devicePoll, error) {
	mod, err := i.module()
	if err != nil {
		return devicePoll{}, err
	}
	st := i.stash(mod, 0)
	var d stashedDevice
	err = st.read(ctx, handle, &d)
	switch {
	case errors.Is(err, errStashGone):
		return devicePoll{Status: pollEnded, Message: msgDeviceExpired}, nil
	case err != nil:
		return devicePoll{}, err
	case d.WorkflowID != activity.GetInfo(ctx).WorkflowExecution.ID:
		return devicePoll{Status: pollEnded, Message: msgGone}, nil
	}
	_, dg, err := deviceProvider(mod, d.Provider)
	if err != nil {
		return devicePoll{Status: pollEnded, Message: msgNotComplete}, nil
	}
	ts, err := dg.DeviceToken(ctx, d.DeviceCode)
	if err != nil {
		return pollAnswer(err)
	}
	if ts.Scope == "" {
		ts.Scope = strings.Join(d.Scopes, " ")
	}
	if err := storeGrant(ctx, mod, d, ts); err != nil {
		return devicePoll{Status: pollEnded, Message: userMessage(err)}, nil
	}
	st.drop(ctx, handle)
	return devicePoll{Status: pollConnected, Account: ts.Account}, nil
}

// storeGrant stores the tokens a device code was redeemed for. The code is
// spent (RFC 8628 §3.5): these are the only tokens the sign-in will get, so
// a store that is down is tried again, with a growing backoff, for up to
// 10 seconds.
func storeGrant(ctx context.Context, mod *oauthflow.Module, d stashedDevice, ts *oauthflow.TokenSet) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for backoff := 50 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		err := mod.Tokens.StoreFromTokenSet(ctx, d.UserID, d.Provider, ts)
		if err == nil || !errors.Is(err, oauthflow.ErrStoreUnavailable) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(backoff):
		}
	}
}

// pollAnswer is what a poll's error says (RFC 8628 §3.5).
func pollAnswer(err error) (devicePoll, error) {
	var pe *oauthflow.ProviderError
	code := ""
	if errors.As(err, &pe) {
		code = pe.Code
	}
	switch {
	case code == "authorization_pending":
		return devicePoll{Status: pollPending}, nil
	case code == "slow_down":
		return devicePoll{Status: pollSlowDown}, nil
	case code == "access_denied":
		return devicePoll{Status: pollEnded, Message: msgDeviceDenied}, nil
	case code == "expired_token":
		return devicePoll{Status: pollEnded, Message: msgDeviceExpired}, nil
	case oauthflow.IsTransient(err) || errors.Is(err, oauthflow.ErrStoreUnavailable):
		return devicePoll{}, err
	}
	return devicePoll{Status: pollEnded, Message: userMessage(err)}, nil
}
