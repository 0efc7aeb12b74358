package clip

import (
	"testing"
	"unicode/utf8"
)

func TestTo(t *testing.T) {
	for _, c := range []struct {
		s    string
		n    int
		want string
	}{
		{"invalid_grant", 64, "invalid_grant"},
		{"abcdef", 3, "abc"},
		{"aé", 2, "a"}, // é is two bytes: not split
		{"ééé", 5, "éé"},
		{"x", 0, ""},
	} {
		got := To(c.s, c.n)
		if got != c.want || !utf8.ValidString(got) {
			t.Errorf("To(%q, %d) = %q, want %q", c.s, c.n, got, c.want)
		}
	}
}
