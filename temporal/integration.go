package oauthtemporal

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// OwnerName is the integration's name among [oauthflow.Config].SignInOwners:
// the sign-ins [SignIn] builds name it as their owner.
const OwnerName = "temporal"

// The names the integration registers on a worker. They are part of every
// running workflow's history: never change them.
const (
	SignInWorkflowName   = "oauthflow.SignIn"         // the [SignIn] workflow
	buildActivityName    = "oauthflow.BuildSignIn"    // build_oauth_url for the workflow
	exchangeActivityName = "oauthflow.ExchangeSignIn" // redeems a stashed answer, exchanges its code
)

// Defaults of [Options].
const (
	defaultSignInTTL         = 10 * time.Minute // the root's default sign-in TTL (Config.SignInTTL)
	defaultCompletionTimeout = time.Minute      // the root's default CompletionTimeout
)

// Options configure an [Integration]. The zero value of every field means its
// default.
type Options struct {
	// SignInTTL is how long a [SignIn] waits for its callback, on a durable
	// timer: give it the module's Config.SignInTTL, after which the sign-in's
	// state has expired anyway ([Setup] does). 0: 10 minutes, the module's
	// default.
	SignInTTL time.Duration
	// CompletionTimeout bounds how long a callback's answer waits, sealed in
	// the store, for the workflow to redeem it. 0: one minute, the module's
	// default Config.CompletionTimeout, which bounds the callback's wait.
	CompletionTimeout time.Duration
	// Logger hears what the integration cannot tell a caller (a refusal it
	// could not record). nil: slog.Default().
	Logger *slog.Logger
}

// Integration runs oauthflow sign-ins as Temporal workflows. It is the
// [oauthflow.SignInOwner] named [OwnerName], the activities of [SignIn], and
// the token reads of a tool activity. Make one with [New], put it in
// Config.SignInOwners, and [Integration.Bind] the module once it is built.
// Every instance of the app that serves the callback endpoints has one, with
// a client of the same Temporal namespace.
type Integration struct {
	client client.Client
	opts   Options
	log    *slog.Logger
	mod    atomic.Pointer[oauthflow.Module]
}

var _ oauthflow.SignInOwner = (*Integration)(nil)

// errUnbound is the error of an Integration used before Bind.
var errUnbound = errors.New("oauthtemporal: the integration has no module yet: call Bind after oauthflow.New")

// New returns an integration that talks to Temporal through c.
func New(c client.Client, opts Options) *Integration {
	if opts.SignInTTL <= 0 {
		opts.SignInTTL = defaultSignInTTL
	}
	if opts.CompletionTimeout <= 0 {
		opts.CompletionTimeout = defaultCompletionTimeout
	}
	i := &Integration{client: c, opts: opts, log: opts.Logger}
	if i.log == nil {
		i.log = slog.Default()
	}
	return i
}

// Bind gives the integration the module whose sign-ins it owns, whose store
// it stashes answers in, and whose tokens its activities read.
func (i *Integration) Bind(mod *oauthflow.Module) { i.mod.Store(mod) }

func (i *Integration) module() (*oauthflow.Module, error) {
	if m := i.mod.Load(); m != nil {
		return m, nil
	}
	return nil, errUnbound
}

// Register registers the [SignIn] and [DeviceSignIn] workflows (as
// [SignInWorkflowName] and [DeviceSignInWorkflowName]) and their activities
// on w, a worker of the task queue the sign-ins run on.
func (i *Integration) Register(w worker.Registry) {
	w.RegisterWorkflowWithOptions(SignIn, workflow.RegisterOptions{Name: SignInWorkflowName})
	w.RegisterActivityWithOptions(i.buildSignIn, activity.RegisterOptions{Name: buildActivityName})
	w.RegisterActivityWithOptions(i.exchangeSignIn, activity.RegisterOptions{Name: exchangeActivityName})
	w.RegisterWorkflowWithOptions(DeviceSignIn, workflow.RegisterOptions{Name: DeviceSignInWorkflowName})
	w.RegisterActivityWithOptions(i.startDevice, activity.RegisterOptions{Name: startDeviceActivityName})
	w.RegisterActivityWithOptions(i.pollDevice, activity.RegisterOptions{Name: pollDeviceActivityName})
}

// Setup builds a module from cfg with a new integration over c among its
// sign-in owners, and binds them: the one obvious wiring. opts.SignInTTL
// defaults to cfg.SignInTTL, and opts.CompletionTimeout to
// cfg.CompletionTimeout.
func Setup(ctx context.Context, cfg oauthflow.Config, c client.Client, opts Options) (*oauthflow.Module, *Integration, error) {
	if opts.SignInTTL == 0 {
		opts.SignInTTL = cfg.SignInTTL
	}
	if opts.CompletionTimeout == 0 {
		opts.CompletionTimeout = cfg.CompletionTimeout
	}
	integ := New(c, opts)
	owners := maps.Clone(cfg.SignInOwners)
	if owners == nil {
		owners = make(map[string]oauthflow.SignInOwner, 1)
	}
	owners[OwnerName] = integ
	cfg.SignInOwners = owners
	mod, err := oauthflow.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	integ.Bind(mod)
	return mod, integ, nil
}
