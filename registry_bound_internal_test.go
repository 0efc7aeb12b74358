package oauthflow

import (
	"fmt"
	"sync/atomic"
	"testing"
)

// The providers a resolver builds (one per MCP server URL met) are kept up
// to maxResolved: the least recently used is let go, and built again when
// asked for; one used all along stays.
func TestRegistryKeepsResolvedProvidersBounded(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	var built atomic.Int64
	reg.AddResolver("mcp-", func(id string) (Provider, error) {
		built.Add(1)
		return idOnly(id), nil
	})
	get := func(id string) {
		t.Helper()
		if p, err := reg.Get(id); err != nil || p.ProviderID() != id {
			t.Fatalf("Get(%s): %v, %v", id, p, err)
		}
	}
	for i := range maxResolved + 300 {
		get(fmt.Sprintf("mcp-server-%d", i))
		get("mcp-busy")
	}
	if n := len(reg.IDs()); n > maxResolved {
		t.Fatalf("the registry keeps %d resolved providers, want at most %d", n, maxResolved)
	}
	if n := built.Load(); n != maxResolved+301 {
		t.Fatalf("the resolver built %d providers, want %d: the busy one once", n, maxResolved+301)
	}
	get("mcp-server-0") // let go: built again
	if n := built.Load(); n != maxResolved+302 {
		t.Fatalf("the resolver built %d providers, want %d", n, maxResolved+302)
	}
}
