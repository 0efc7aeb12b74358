// Package suggest finds the known name a mistyped one was most likely meant
// to be, for errors that say "did you mean".
package suggest

import "strings"

// maxLen bounds the names compared: a longer one is no typo worth a guess,
// and the comparison costs the product of the lengths.
const maxLen = 64

// Nearest returns the name of known closest to name: one that differs only
// in case, or else one within an edit distance of 2 (1 for names of 4
// characters or fewer), the first such in known's order on a tie. It returns
// "" when none is that close, or when name is known as it is.
func Nearest(name string, known []string) string {
	if name == "" || len(name) > maxLen {
		return ""
	}
	best, bestDist := "", 0
	for _, k := range known {
		if k == name {
			return ""
		}
		if strings.EqualFold(k, name) {
			return k
		}
		if len(k) > maxLen {
			continue
		}
		limit := 2
		if len(name) <= 4 {
			limit = 1
		}
		if d := distance(name, k); d <= limit && (best == "" || d < bestDist) {
			best, bestDist = k, d
		}
	}
	return best
}

// Hint is Nearest as the end of an error message: ` (did you mean "github"?)`,
// or "" when there is nothing to suggest.
func Hint(name string, known []string) string {
	if n := Nearest(name, known); n != "" {
		return ` (did you mean "` + n + `"? IDs are case-sensitive)`
	}
	return ""
}

// distance is the edit distance between a and b (insertions, deletions,
// substitutions and swaps of two neighbours each cost 1), bytewise.
func distance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
