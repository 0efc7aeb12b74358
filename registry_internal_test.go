package oauthflow

import (
	"regexp"
	"strings"
	"testing"
)

// idPattern is what validProviderID checks by hand.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

func FuzzValidProviderID(f *testing.F) {
	for _, s := range []string{"", "a", "github", "A.b_c-d", ".a", "-a", "_a", "a:b", "a b", "é", "a\x00",
		strings.Repeat("a", 64), strings.Repeat("a", 65), "0", "a/b", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if got, want := validProviderID(id), idPattern.MatchString(id); got != want {
			t.Fatalf("validProviderID(%q) = %v, the pattern says %v", id, got, want)
		}
	})
}
