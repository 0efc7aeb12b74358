package oauthflow

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
	"unicode"

	"github.com/oauthflow/oauthflow/internal/errs"
	"golang.org/x/oauth2"
)

// The device authorization grant (RFC 8628): a sign-in for an agent where no
// browser is. The agent shows a short user code and a verification URI; the
// user approves on any device; the token endpoint is polled with the device
// code until the user acts or the code expires.

// DeviceAuthorizer is a Provider that offers the device authorization grant.
type DeviceAuthorizer interface {
	// SupportsDeviceAuth reports whether the provider has a device
	// authorization endpoint.
	SupportsDeviceAuth() bool
	// DeviceAuth asks the device authorization endpoint for a device code
	// for scopes (RFC 8628 §3.1, §3.2).
	DeviceAuth(ctx context.Context, scopes []string) (*DeviceAuthorization, error)
	// DeviceToken asks the token endpoint once for the tokens of deviceCode
	// (RFC 8628 §3.4). While the user has not acted it fails with a
	// *ProviderError whose Code is "authorization_pending" or "slow_down";
	// "access_denied" and "expired_token" end the sign-in (§3.5).
	DeviceToken(ctx context.Context, deviceCode string) (*TokenSet, error)
}

// DeviceAuthorization is a device authorization endpoint's answer (RFC 8628
// §3.2). ExpiresIn and Interval are in seconds; an Interval of 0 means the
// server named none (poll every 5 seconds).
type DeviceAuthorization struct {
	DeviceCode              string `json:"deviceCode"`
	UserCode                string `json:"userCode"`
	VerificationURI         string `json:"verificationUri"`
	VerificationURIComplete string `json:"verificationUriComplete,omitempty"`
	ExpiresIn               int64  `json:"expiresIn"`
	Interval                int64  `json:"interval,omitempty"`
}

// GrantDevice is the OAuthWorkflowArgs.Grant that runs the device
// authorization grant; "" runs the authorization-code sign-in.
const GrantDevice = "device"

// ErrDeviceAuthUnsupported is StartDeviceSignIn's error for a provider that
// offers no device authorization grant (not a DeviceAuthorizer, or one
// whose SupportsDeviceAuth is false).
var ErrDeviceAuthUnsupported = fmt.Errorf("oauthflow: the provider offers no device authorization grant: %w", errors.ErrUnsupported)

// Device sign-in timings.
const (
	jobDevice             = "device"        // the worker's job that polls a device sign-in's token endpoint
	defaultDeviceInterval = 5 * time.Second // RFC 8628 §3.2: the interval when the server names none
	slowDownStep          = 5 * time.Second // RFC 8628 §3.5: what each slow_down adds to the interval
	maxDeviceInterval     = 5 * time.Minute // the most a server's interval is honoured to
	maxDeviceLifetime     = time.Hour       // the longest a device code is polled, whatever the server says
	maxUserCodeLen        = 64              // a user code longer than this is not one a person types
	maxVerificationURILen = 2048            // nor a URI longer than this one to show
	maxDeviceCodeLen      = 4096            // bounds what the run keeps of the server's device code
)

// deviceBackoff spaces the polls of a device sign-in whose token endpoint
// failed transiently (network, 5xx, 429): never sooner than the interval.
var deviceBackoff = Backoff{First: 5 * time.Second, Max: time.Minute, Jitter: 0.2}

// deviceRun is a device sign-in's poll state, kept in its run's data (so
// every instance reads it, and each poll's outcome is saved with the run
// under the run's lock). The device code and the DPoP key are secrets: they
// are sealed, bound to the run, when encryption is on.
type deviceRun struct {
	Code       string `json:"code"`
	Key        string `json:"key,omitempty"` // the key the grant will be bound to (DPoPProvider)
	Interval   int64  `json:"interval"`      // seconds between polls, raised by slow_down
	ExpiresAt  int64  `json:"expiresAt"`     // Unix ms: the code is dead then
	NextPollAt int64  `json:"nextPollAt"`    // Unix ms: no poll before it
	Failures   int    `json:"failures,omitempty"`
}

// deviceSecretName binds a device sign-in's sealed secrets to its run.
func deviceSecretName(runID string) string { return runKey(runID) + ":device" }

// StartDeviceSignIn launches the "oauth" workflow with the device
// authorization grant (RFC 8628) for userID and provider and returns the run
// with its prompt document: what an agent without a browser shows, the
// document's UserCode and VerificationURI (and VerificationURIComplete, when
// the server gives one). The Module's worker polls the provider's token
// endpoint at the interval the server asks for; when the user approves, the
// tokens are stored as a redirect sign-in's are, the run ends
// {authenticated: true} and the prompt turns "success"; a denial or an
// expiry ends it {authenticated: false} with a message that says which.
//
// A provider the registry does not know is refused with ErrUnknownProvider,
// one without the grant with ErrDeviceAuthUnsupported, before anything is
// created.
func (m *Module) StartDeviceSignIn(ctx context.Context, userID, provider string, scopes ...string) (*Run, *OAuthPromptDocument, error) {
	p, err := m.Registry.Get(provider)
	if err != nil {
		return nil, nil, err
	}
	if deviceAuthorizer(p) == nil {
		return nil, nil, fmt.Errorf("%w: %s", ErrDeviceAuthUnsupported, provider)
	}
	return m.launchSignIn(ctx, userID, OAuthWorkflowArgs{Provider: provider, Scopes: scopes, Grant: GrantDevice})
}

// deviceAuthorizer is p as a DeviceAuthorizer whose grant is on, else nil.
func deviceAuthorizer(p Provider) DeviceAuthorizer {
	if d, ok := p.(DeviceAuthorizer); ok && d.SupportsDeviceAuth() {
		return d
	}
	return nil
}

// initiateDevice asks the provider for a device code, keeps the poll state
// in the run, schedules the first poll and the code's expiry, and saves the
// prompt with the code to show.
func (m *Module) initiateDevice(ctx context.Context, tc *TransitionContext, args OAuthWorkflowArgs, p Provider) error {
	d := deviceAuthorizer(p)
	if d == nil {
		return m.failFlow(ctx, tc, args.Provider, &FlowError{Message: "This provider does not offer sign-in with a code.", Err: ErrDeviceAuthUnsupported})
	}
	scopes := args.Scopes
	if len(scopes) == 0 {
		scopes = p.DefaultScopes()
	}
	auth, err := callDeviceAuth(context.WithValue(ctx, oauth2.HTTPClient, m.httpClient), d, scopes)
	if err == nil {
		err = checkDeviceAuth(args.Provider, auth)
	}
	if err != nil {
		return m.failFlow(ctx, tc, args.Provider, err)
	}
	run, err := m.newDeviceRun(tc.Run.ID, p, auth)
	if err != nil {
		return err
	}
	if err := tc.SetData(oauthRunData{Provider: args.Provider, Scopes: scopes, Device: run}); err != nil {
		return err
	}
	if err := m.work.Schedule(ctx, jobDevice, tc.Run.ID, time.UnixMilli(run.NextPollAt)); err != nil {
		return err
	}
	// The lapse ends the run at the code's expiry even when no poll gets
	// through to hear expired_token.
	if err := m.work.Schedule(ctx, jobLapse, tc.Run.ID, time.UnixMilli(run.ExpiresAt)); err != nil {
		return err
	}
	return tc.SaveDocument(ctx, PromptDocumentName, promptWidget, OAuthPromptDocument{
		Provider: args.Provider, Status: PromptPending, UserCode: auth.UserCode, VerificationURI: auth.VerificationURI,
		VerificationURIComplete: linkedCompleteURI(auth.VerificationURI, auth.VerificationURIComplete), ExpiresAt: run.ExpiresAt})
}

func callDeviceAuth(ctx context.Context, d DeviceAuthorizer, scopes []string) (a *DeviceAuthorization, err error) {
	defer errs.Recover(&err, "provider DeviceAuth")
	return d.DeviceAuth(ctx, scopes)
}

// checkDeviceAuth refuses an answer the user could not act on, or whose
// links are not web pages: the prompt shows them as they are.
func checkDeviceAuth(provider string, a *DeviceAuthorization) error {
	bad := func(what string) error {
		return &ProviderError{ProviderID: provider, Err: fmt.Errorf("the device authorization answer's %s is not valid", what)}
	}
	switch {
	case a == nil || a.DeviceCode == "" || len(a.DeviceCode) > maxDeviceCodeLen:
		return bad("device code")
	case a.UserCode == "" || len(a.UserCode) > maxUserCodeLen || strings.ContainsFunc(a.UserCode, unshowable):
		return bad("user code")
	case !webURL(a.VerificationURI):
		return bad("verification URI")
	case a.VerificationURIComplete != "" && !webURL(a.VerificationURIComplete):
		return bad("complete verification URI")
	}
	return nil
}

// webURL reports whether s is an absolute http(s) URL short enough to show,
// and shown as it reads.
func webURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && len(s) <= maxVerificationURILen && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" &&
		!strings.ContainsFunc(s, unshowable)
}

// unshowable reports whether r would not be shown as itself in a terminal
// or a page: a control character (C0 or C1, which a terminal may act on) or
// a format character (a bidi override that reorders what follows, a
// zero-width one), which could make a link read as another site's.
func unshowable(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }

// newDeviceRun is the poll state of a new device code: its secrets sealed,
// its interval and lifetime bounded, its first poll one interval away.
func (m *Module) newDeviceRun(runID string, p Provider, a *DeviceAuthorization) (*deviceRun, error) {
	now := m.now()
	interval := defaultDeviceInterval
	if a.Interval > 0 {
		interval = time.Duration(min(a.Interval, int64(maxDeviceInterval/time.Second))) * time.Second
	}
	life := m.signInTTL // a server that names no lifetime: ours, never "expired at once"
	if a.ExpiresIn > 0 {
		life = time.Duration(min(a.ExpiresIn, int64(maxDeviceLifetime/time.Second))) * time.Second
	}
	name := deviceSecretName(runID)
	run := &deviceRun{Code: string(m.ring.Seal([]byte(a.DeviceCode), name)), Interval: int64(interval / time.Second),
		ExpiresAt: now.Add(life).UnixMilli(), NextPollAt: now.Add(interval).UnixMilli()}
	if usesDPoP(p) {
		_, enc, err := newGrantKey()
		if err != nil {
			return nil, err
		}
		run.Key = string(m.ring.Seal([]byte(enc), name))
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
func (m *Module) pollDevice(ctx context.Context, runID string) (rescheduled bool, err error) {
	ctx, cancel := m.serverOwned(ctx)
	defer cancel()
	r, err := m.fireIfWaiting(ctx, runID, transitionPollDevice)
	if err != nil || r == nil || r.Status != RunWaiting {
		return false, err
	}
	var data oauthRunData
	if err := decodeStrict(r.Data, &data, "data"); err != nil || data.Device == nil {
		return false, err
	}
	if err := m.work.Schedule(ctx, jobDevice, runID, time.UnixMilli(data.Device.NextPollAt)); err != nil {
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
func (m *Module) pollDeviceTransition(ctx context.Context, tc *TransitionContext) error {
	var data oauthRunData
	if err := tc.DecodeData(&data); err != nil {
		return err
	}
	d := data.Device
	if d == nil {
		return nil // a redirect sign-in: nothing to poll
	}
	now := m.now().UnixMilli()
	if now >= d.ExpiresAt {
		return m.failFlow(ctx, tc, data.Provider, errDeviceExpired)
	}
	if now < d.NextPollAt {
		return nil
	}
	ts, err := m.callDeviceToken(ctx, tc.Run.ID, data.Provider, d)
	if err == nil {
		return m.deviceApproved(ctx, tc, &data, ts)
	}
	interval := time.Duration(d.Interval) * time.Second
	switch code := providerCode(err); {
	case code == "authorization_pending":
		d.Failures = 0
	case code == "slow_down":
		d.Failures, d.Interval = 0, d.Interval+int64(slowDownStep/time.Second)
		interval += slowDownStep
	case code == "access_denied" || code == "authorization_declined": // Microsoft says the latter
		return m.failFlow(ctx, tc, data.Provider, &FlowError{Message: "The sign-in was denied.", Err: err})
	case code == "expired_token":
		return m.failFlow(ctx, tc, data.Provider, &FlowError{Message: errDeviceExpired.Message, Err: err})
	case IsTransient(err):
		d.Failures++
		interval = max(interval, deviceBackoff.after(d.Failures, tc.Run.ID))
		m.log.WarnContext(ctx, "oauthflow: a device sign-in's poll failed; it is tried again", "run", tc.Run.ID,
			"provider", data.Provider, "failures", d.Failures, "error", logSafeError(err))
	default:
		return m.failFlow(ctx, tc, data.Provider, err)
	}
	d.NextPollAt = m.now().Add(interval).UnixMilli()
	return tc.SetData(data)
}

// errDeviceExpired ends a device sign-in whose code expired.
var errDeviceExpired = &FlowError{Message: "The sign-in code expired. Start the sign-in again.", Err: ErrSessionNotFound}

// callDeviceToken opens the device code (and the grant's key, whose proofs
// the poll then carries) and polls once.
func (m *Module) callDeviceToken(ctx context.Context, runID, provider string, d *deviceRun) (ts *TokenSet, err error) {
	p, err := m.Registry.Get(provider)
	if err != nil {
		return nil, err
	}
	da := deviceAuthorizer(p)
	if da == nil {
		return nil, &FlowError{Message: "This provider no longer offers sign-in with a code.", Err: ErrDeviceAuthUnsupported}
	}
	code, err := m.openDeviceSecret(runID, d.Code)
	if err != nil {
		return nil, err
	}
	ctx = context.WithValue(ctx, oauth2.HTTPClient, m.httpClient)
	if d.Key != "" {
		enc, err := m.openDeviceSecret(runID, d.Key)
		if err != nil {
			return nil, err
		}
		key, err := m.Tokens.keys.get(enc) // parsed once: the first API call signs with it too
		if err != nil {
			return nil, err
		}
		ctx = withProofs(ctx, key, &m.Tokens.nonces)
	}
	defer errs.Recover(&err, "provider "+provider+" DeviceToken")
	ts, err = da.DeviceToken(ctx, code)
	if err == nil && (ts == nil || ts.AccessToken == "") {
		err = &ProviderError{ProviderID: provider, Err: errNoAccessToken}
	}
	return ts, err
}

// openDeviceSecret is the plain form of a device sign-in's sealed secret.
func (m *Module) openDeviceSecret(runID, sealed string) (string, error) {
	b, err := m.ring.Open([]byte(sealed), deviceSecretName(runID))
	return string(b), err
}

// deviceApproved stores the tokens for the run's user, as a redirect
// sign-in's are, and ends the run {authenticated: true}.
func (m *Module) deviceApproved(ctx context.Context, tc *TransitionContext, data *oauthRunData, ts *TokenSet) error {
	if ts.Scope == "" {
		ts.Scope = strings.Join(data.Scopes, " ")
	}
	key, err := m.openDeviceSecret(tc.Run.ID, data.Device.Key)
	if err == nil {
		if p, perr := m.Registry.Get(data.Provider); perr == nil {
			m.readAccount(ctx, p, ts, key)
		}
		err = m.storeSignIn(ctx, tc.Run.UserID, data.Provider, ts, key)
	}
	if err != nil {
		return m.failFlow(ctx, tc, data.Provider, err)
	}
	if err := tc.SetResult(OAuthWorkflowResult{Authenticated: true}); err != nil {
		return err
	}
	endData(tc)
	if err := m.settlePrompt(ctx, tc, PromptSuccess, "", showable(ts.Account, maxAccountLen)); err != nil {
		return err
	}
	tc.GoTo(StateEnd)
	m.tidyDueWork(ctx, tc.Run.ID, jobLapse)
	m.events.emit(ctx, Event{Kind: EventConnected, UserID: tc.Run.UserID, ProviderID: data.Provider, RunID: tc.Run.ID})
	return nil
}
