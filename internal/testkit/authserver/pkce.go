package authserver

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
)

// PKCE methods (RFC 7636 §4.2).
const (
	MethodS256  = "S256"
	MethodPlain = "plain"
)

// checkChallenge validates the PKCE parameters of an authorization request for client
// and returns the effective method ("" when no challenge was sent).
func checkChallenge(client *Client, challenge, method string) (string, *oauthError) {
	if challenge == "" {
		if method != "" {
			return "", errInvalidRequest("code_challenge_method without code_challenge")
		}
		if client.requiresPKCE() {
			return "", errInvalidRequest("code_challenge required")
		}
		return "", nil
	}
	if method == "" {
		method = MethodPlain
	}
	if method != MethodS256 && method != MethodPlain {
		return "", errInvalidRequest("unsupported code_challenge_method")
	}
	if !validPKCEValue(challenge) {
		return "", errInvalidRequest("malformed code_challenge")
	}
	return method, nil
}

// verifyPKCE reports whether verifier answers the challenge made with method.
func verifyPKCE(challenge, method, verifier string) bool {
	if !validPKCEValue(verifier) {
		return false
	}
	want := verifier
	if method == MethodS256 {
		sum := sha256.Sum256([]byte(verifier))
		want = base64.RawURLEncoding.EncodeToString(sum[:])
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(challenge)) == 1
}

// validPKCEValue reports whether v is 43 to 128 unreserved characters (RFC 7636 §4.1).
func validPKCEValue(v string) bool {
	if len(v) < 43 || len(v) > 128 {
		return false
	}
	for i := 0; i < len(v); i++ {
		if !isUnreserved(v[i]) {
			return false
		}
	}
	return true
}

func isUnreserved(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return c == '-' || c == '.' || c == '_' || c == '~'
}
