package oauthflow

import "context"

// WorkOnce runs one pass of m's background worker now and reports how many
// pieces of due work it did: tests drive due work without waiting for a tick.
func WorkOnce(ctx context.Context, m *Module) int { return m.work.pass(ctx) }
