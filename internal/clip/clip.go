// Package clip bounds text that another party chose, before the library
// keeps, logs or shows it.
package clip

import "unicode/utf8"

// Bounds of the error text an authorization server chooses (RFC 6749 §5.2
// error, error_description and error_uri): real codes are a word, real
// descriptions a sentence.
const (
	ErrorCode        = 64
	ErrorDescription = 1024
	ErrorURI         = 2048
)

// To is s, at most n bytes of it, cut at a rune boundary.
func To(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
