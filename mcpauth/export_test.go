package mcpauth

import (
	"time"

	"github.com/oauthflow/oauthflow"
)

// KeepInterval and NameTTL: how often a provider keeps its server's records
// alive at most, and how long each keep has them live.
const (
	KeepInterval = keepInterval
	NameTTL      = nameTTL
)

// SetKeepClock has p, an MCP server's provider, keep its server's records
// by clock; it reports whether p is one.
func SetKeepClock(p oauthflow.Provider, clock func() time.Time) bool {
	sp, ok := p.(*serverProvider)
	if ok {
		sp.mu.Lock()
		defer sp.mu.Unlock()
		sp.clock = clock
	}
	return ok
}
