package dpop

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
)

const (
	errUseNonce = "use_dpop_nonce"
	// maxNonce bounds a DPoP-Nonce this package takes: RFC 9449 sets no
	// length, and a server's nonce is input.
	maxNonce = 4096
	// maxErrorBody bounds how much of a 400's body Challenge reads.
	maxErrorBody = 16 << 10
)

// Challenge reads resp for DPoP's nonce signals. nonce is resp's DPoP-Nonce
// when it carries exactly one well-formed one (RFC 9449 §8), whatever the
// status: the client uses it in its next proof to that origin. retry reports
// a challenge to send the request again with that nonce: an authorization
// server's 400 with the JSON error use_dpop_nonce (§8), or a resource
// server's 401 whose DPoP challenge says error="use_dpop_nonce" (§9). A 400's
// body is read to learn its error and left for the caller to read again.
func Challenge(resp *http.Response) (nonce string, retry bool) {
	nonce = responseNonce(resp)
	if nonce == "" {
		return "", false
	}
	switch resp.StatusCode {
	case http.StatusBadRequest:
		return nonce, tokenError(resp) == errUseNonce
	case http.StatusUnauthorized:
		return nonce, dpopChallengeError(resp.Header.Values("WWW-Authenticate")) == errUseNonce
	}
	return nonce, false
}

// responseNonce is resp's one DPoP-Nonce, or "" when there is none, more
// than one, or one that is not 1*NQCHAR (RFC 9449 §8.1).
func responseNonce(resp *http.Response) string {
	if resp == nil {
		return ""
	}
	values := resp.Header.Values("DPoP-Nonce")
	if len(values) != 1 || len(values[0]) > maxNonce {
		return ""
	}
	for _, c := range []byte(values[0]) {
		if c < 0x21 || c > 0x7e || c == '"' || c == '\\' {
			return ""
		}
	}
	return values[0]
}

// tokenError is the error code of a token endpoint's JSON error body (RFC
// 6749 §5.2), or "". The body read is put back in front of the rest.
func tokenError(resp *http.Response) string {
	if resp.Body == nil {
		return ""
	}
	head, err := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
	var body struct {
		Error string `json:"error"`
	}
	if err != nil || json.Unmarshal(head, &body) != nil {
		return ""
	}
	return body.Error
}

// dpopChallengeError is the error parameter of the DPoP challenge among
// WWW-Authenticate values, or "". A header may hold a Bearer and a DPoP
// challenge at once (RFC 9449 §7.2): only the DPoP one's parameters count.
func dpopChallengeError(values []string) string {
	for _, v := range values {
		for _, c := range parseChallenges(v) {
			if strings.EqualFold(c.scheme, "DPoP") {
				return c.params["error"]
			}
		}
	}
	return ""
}

// challenge is one challenge of a WWW-Authenticate header: its scheme and
// its auth-params, names in lower case.
type challenge struct {
	scheme string
	params map[string]string
}

// parseChallenges reads a WWW-Authenticate value (RFC 9110 §11.6.1):
// challenges and their auth-params are both comma separated, so a token
// after a comma starts a challenge unless "=" follows it; a token68 (a
// token followed by "=" padding only) is skipped.
func parseChallenges(v string) []challenge {
	var out []challenge
	lx := lexer{s: v}
	afterComma := true // the start counts as after a comma
	for {
		afterComma = lx.skip(" \t,") || afterComma
		if lx.done() {
			return out
		}
		name := lx.token()
		if name == "" {
			lx.pos++ // not a challenge or a parameter: a token68's character
			afterComma = false
			continue
		}
		lx.skip(" \t")
		switch {
		case lx.peek() == '=':
			lx.pos++
			lx.skip(" \t")
			value, ok := lx.value()
			if ok && len(out) > 0 {
				out[len(out)-1].params[strings.ToLower(name)] = value
			}
		case afterComma:
			out = append(out, challenge{scheme: name, params: map[string]string{}})
		}
		afterComma = false
	}
}

type lexer struct {
	s   string
	pos int
}

func (lx *lexer) done() bool { return lx.pos >= len(lx.s) }

func (lx *lexer) peek() byte {
	if lx.done() {
		return 0
	}
	return lx.s[lx.pos]
}

// skip moves past any of chars and reports whether it passed a comma.
func (lx *lexer) skip(chars string) (comma bool) {
	for !lx.done() && strings.IndexByte(chars, lx.s[lx.pos]) >= 0 {
		comma = comma || lx.s[lx.pos] == ','
		lx.pos++
	}
	return comma
}

// token reads a token (RFC 9110 §5.6.2), or "" when none starts here.
func (lx *lexer) token() string {
	start := lx.pos
	for !lx.done() && isTokenChar(lx.s[lx.pos]) {
		lx.pos++
	}
	return lx.s[start:lx.pos]
}

// value reads an auth-param's value: a token or a quoted-string. ok is
// false when neither starts here.
func (lx *lexer) value() (v string, ok bool) {
	if lx.peek() != '"' {
		v = lx.token()
		return v, v != ""
	}
	var b strings.Builder
	for lx.pos++; !lx.done() && lx.s[lx.pos] != '"'; lx.pos++ {
		if lx.s[lx.pos] == '\\' && lx.pos+1 < len(lx.s) {
			lx.pos++
		}
		b.WriteByte(lx.s[lx.pos])
	}
	lx.pos++ // the closing quote
	return b.String(), true
}

func isTokenChar(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}
