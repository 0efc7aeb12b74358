package oauthflow

import (
	"fmt"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow/internal/keyspace"
)

// idPattern is what keyspace.ValidProviderID checks by hand.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func FuzzValidProviderID(f *testing.F) {
	for _, s := range []string{"", "a", "github", "A.b_c-d", ".a", "-a", "_a", "a:b", "a b", "é", "a\x00",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "0", "a/b", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := keyspace.ValidProviderID(id), idPattern.MatchString(id); got != want {
			t.Fatalf("keyspace.ValidProviderID(%q) = %v, the pattern says %v", id, got, want)
		}
	})
}

// plainASCII, eight bytes at a time, answers as the byte-by-byte rule does.
func FuzzPlainASCII(f *testing.F) {
	for _, seed := range []string{"", "gho_16C7e42F292c6912E7710c838347Ae178B4a", "abc\\def", "abcdefg\x1f", "\x7f\x20~!",
		"abcdefgh\x80", "é", "\\\\\\\\\\\\\\\\", "\x00\x00\x00\x00\x00\x00\x00\x00", "ZZZZZZZ\x1fZZZZZZZZ", "]]]]]]]]["} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, s []byte) {
		want := true
		for _, c := range s {
			if c < 0x20 || c >= 0x80 || c == '\\' {
				want = false
			}
		}
		if got := plainASCII(s); got != want {
			t.Fatalf("plainASCII(%q) = %v; want %v", s, got, want)
		}
	})
}

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
