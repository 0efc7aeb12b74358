package oauthflow

import (
	"context"
	"time"
)

// WorkOnce runs one pass of m's background worker now and reports how many
// pieces of due work it did: tests drive due work without waiting for a tick.
func WorkOnce(ctx context.Context, m *Module) int { return m.work.Pass(ctx) }

// NewSealedSessionService lets the external tests seal a SessionService of
// their own; apps set Config.Encryption.
func NewSealedSessionService(kv KV, ring *KeyRing) *SessionService {
	return newSessionService(kv, withSessionEncryption(ring))
}

// PeekSession reads the sign-in registered under state without consuming it.
func PeekSession(s *SessionService, ctx context.Context, state string) (*Session, error) {
	return s.peek(ctx, state)
}

// DefaultRefreshBackoff is the backoff a zero Config.RefreshBackoff means.
var DefaultRefreshBackoff = defaultRefreshBackoff

// StopWork cancels m's background worker's context, as Close does first,
// without waiting for the work in flight: a test holds a piece of work at
// the moment Close has stopped the worker, then lets it go and calls Close.
func StopWork(m *Module) { m.work.Stop() }

// SetRefreshTimeout bounds m's refreshes (and so the retries of a rotated
// token's write) at d, as WithRefreshTimeout does for a TokenStore: set it
// before any refresh runs.
func SetRefreshTimeout(m *Module, d time.Duration) { m.Tokens.refresher.refreshTimeout = d }

// MemoryLen reports how many key/value entries m holds, expired or not yet
// swept: a test checks that a refused call left nothing behind.
func MemoryLen(m *MemoryKV) int { return m.m.Len() }

// Tuning the tests set on a TokenStore of their own; a Module keeps the
// defaults (Config.RefreshBackoff aside).
var (
	WithRefreshTimeout = withRefreshTimeout
	WithLockLease      = withLockLease
	WithRefreshBackoff = withRefreshBackoff
)

// The optional methods of a Provider, as the interfaces the module's type
// assertions name: the external tests check that a provider has them.
type (
	PKCESupporter     = pkceSupporter
	IssuerReporter    = issuerReporter
	DisplayNamer      = displayNamer
	DeadGrantCoder    = deadGrantCoder
	VerifierExchanger = verifierExchanger
	CallbackFielder   = callbackFielder
	AccountReader     = accountReader
	DPoPProvider      = dpopProvider
	DeviceAuthorizer  = deviceAuthorizer
	RefreshLimiter    = refreshLimitReporter
)

// RefreshAheadLimit is the limit m's refreshes ahead of providerID's tokens
// keep to: how many at once on one instance, how many a second in all.
func RefreshAheadLimit(m *Module, providerID string) (inFlight, perSecond int) {
	lim := m.Tokens.ahead.limiter.limit(m.Registry, providerID)
	return lim.Concurrency, lim.PerSecond
}

// The shapes of exchange_oauth_token's arguments and results, which a model
// sends and reads as JSON.
type (
	ExchangeOAuthTokenArgs    = exchangeOAuthTokenArgs
	ExchangeOAuthTokenResult  = exchangeOAuthTokenResult
	ExchangeOAuthTokenReceipt = exchangeOAuthTokenReceipt
)

// Errors only the module's pages and events report; the tests check which
// one a failure wraps.
var (
	ErrStateMismatch   = errStateMismatch
	ErrIssuerMismatch  = errIssuerMismatch
	ErrSignInRefused   = errSignInRefused
	ErrUnknownWorkflow = errUnknownWorkflow
	ErrCorruptRecord   = errCorruptRecord
)

// NewMemoryKVOn is NewMemoryKV on the clock now: a test moves a fake clock
// past a memory store's TTLs.
var NewMemoryKVOn = newMemoryKV

// WithEventHook is the TokenStore option a Module sets from Config.OnEvent:
// the tests set it on a TokenStore of their own.
var WithEventHook = withEventHook

// CurrentKeyID is the ID of the key that seals r's new records.
func CurrentKeyID(r *KeyRing) string { return r.ring.CurrentKeyID() }

// RefreshFailingError is the error of a read whose refresh was not tried:
// the tests check what it says.
type RefreshFailingError = refreshFailingError
