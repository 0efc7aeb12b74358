package oauthflow

import "context"

// WorkOnce runs one pass of m's background worker now and reports how many
// pieces of due work it did: tests drive due work without waiting for a tick.
func WorkOnce(ctx context.Context, m *Module) int { return m.work.pass(ctx) }

// WithSessionEncryption lets the external tests seal a SessionService of
// their own; apps set Config.Encryption.
var WithSessionEncryption = withSessionEncryption

// DefaultRefreshBackoff is the backoff a zero Config.RefreshBackoff means.
var DefaultRefreshBackoff = defaultRefreshBackoff
