package suggest

import (
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	known := []string{"github", "gitlab", "google", "slack", "box", "x"}
	for _, tt := range []struct{ name, want string }{
		{"githb", "github"},   // a letter left out
		{"githubb", "github"}, // one too many
		{"gihtub", "github"},  // two neighbours swapped
		{"GitHub", "github"},  // case only
		{"gitlba", "gitlab"},  // a swap at the end
		{"googel", "google"},  // a swap
		{"bix", "box"},        // short: one edit
		{"bzz", ""},           // short: two edits is too far
		{"github", ""},        // known as it is
		{"salesforce", ""},    // nothing close
		{"", ""},              // nothing to guess from
		{strings.Repeat("g", 65), ""},
	} {
		if got := Nearest(tt.name, known); got != tt.want {
			t.Errorf("Nearest(%q) = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestHint(t *testing.T) {
	if got := Hint("githb", []string{"github"}); got != ` (did you mean "github"? IDs are case-sensitive)` {
		t.Errorf("Hint = %q", got)
	}
	if got := Hint("zzz", []string{"github"}); got != "" {
		t.Errorf("Hint with nothing close = %q, want empty", got)
	}
}

func TestDistance(t *testing.T) {
	for _, tt := range []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"kitten", "sitting", 3}, {"ab", "ba", 1}, {"github", "github", 0},
	} {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
