package oauthflow

import (
	"encoding/base64"
	"strings"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// The keyspace. Every record lives under "oauth:", and the segment after it
// names the record's kind, or is the user of a token record:
//
//	oauth:{user}:{providerId}          tokens
//	oauth:lock:{user}:{providerId}     refresh lock of those tokens
//	oauth:session:{state}              pending sign-in
//	oauth:run:{runId}                  workflow run
//	oauth:lock:run:{runId}             run lock
//	oauth:doc:{runId}:{name}           run document
//	oauth:conn:{user}                  the user's connection index (a sorted set), with seen:{providerId}, its last read
//	oauth:meta:{user}:{providerId}     the connection's health (connMeta)
//
// {user} is the user ID itself (the key names of earlier versions, so
// existing data stays readable) unless the ID could be mistaken for another
// kind: when its first ":"-separated segment is a reserved word (see
// reservedSegment) or it starts with "~", it is written as "~" +
// base64url(user ID). Provider IDs, run IDs and document names never contain
// ":", so a key splits one way only, and no user ID, whatever its bytes,
// reaches another user's key or another kind's.
// New record kinds must take a reserved word (or live under "oauth:sys:").

// escapeMark starts an escaped user segment; plain user IDs never start with it.
const escapeMark = "~"

// reservedSegment reports whether s names a record kind, now or later.
func reservedSegment(s string) bool {
	switch s {
	case "session", "run", "doc", "lock", "sys", "due", "idx", "mcp", "conn", "meta":
		return true
	}
	return false
}

// plainUserID reports whether userID goes into keys as it is.
func plainUserID(userID string) bool {
	first, _, _ := strings.Cut(userID, ":")
	return !reservedSegment(first) && !strings.HasPrefix(userID, escapeMark)
}

// maxUserIDLen bounds a user ID, in bytes.
const maxUserIDLen = 512

// checkIDs refuses a user ID or a provider ID that cannot name a record.
func checkIDs(userID, providerID string) error {
	if userID == "" || len(userID) > maxUserIDLen {
		return errs.Invalid("user ID must be 1 to %d bytes", maxUserIDLen)
	}
	if !validProviderID(providerID) {
		return errs.Invalid("provider ID %q is not valid", providerID)
	}
	return nil
}

// appendUserSegment appends userID as it appears in a key.
func appendUserSegment(dst []byte, userID string) []byte {
	if plainUserID(userID) {
		return append(dst, userID...)
	}
	dst = append(dst, escapeMark...)
	return base64.RawURLEncoding.AppendEncode(dst, []byte(userID))
}

// appendTokenKey appends the token record's key to dst. The hot read builds
// the key in a buffer of its own with it, so that looking it up allocates nothing.
func appendTokenKey(dst []byte, userID, providerID string) []byte {
	return appendUserKey(dst, "oauth:", userID, providerID)
}

// appendUserKey appends kind (with its trailing ":"), the user's segment and the provider ID.
func appendUserKey(dst []byte, kind, userID, providerID string) []byte {
	dst = append(dst, kind...)
	dst = appendUserSegment(dst, userID)
	dst = append(dst, ':')
	return append(dst, providerID...)
}

func tokenKey(userID, providerID string) string {
	var buf [128]byte
	return string(appendUserKey(buf[:0], "oauth:", userID, providerID))
}

func lockKey(userID, providerID string) string {
	var buf [128]byte
	return string(appendUserKey(buf[:0], "oauth:lock:", userID, providerID))
}

// connIndexKey names userID's connection index.
func connIndexKey(userID string) string {
	var buf [128]byte
	return string(appendUserSegment(append(buf[:0], "oauth:conn:"...), userID))
}

func sessionKey(state string) string { return "oauth:session:" + state }
func runKey(id string) string        { return "oauth:run:" + id }
func runLockKey(id string) string    { return "oauth:lock:run:" + id }
func docKey(id, name string) string  { return "oauth:doc:" + id + ":" + name }

// stateLen is the length of the states build_oauth_url issues: 32 random bytes, base64url.
const stateLen = 43

// issuedState reports whether s has the form of a state this library issues.
// The public endpoints refuse any other before they touch the store.
func issuedState(s string) bool {
	if len(s) != stateLen {
		return false
	}
	for i := range len(s) { // bytes, not runes: any byte of a multi-byte rune is refused anyway
		if c := s[i]; !(isAlnum(c) || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// runIDLen is the length of the run IDs the engine issues: 16 random bytes, hex.
const runIDLen = 32

// issuedRunID reports whether id has the form of a run ID the engine issues.
func issuedRunID(id string) bool {
	return len(id) == runIDLen && strings.IndexFunc(id, notLowerHex) < 0
}

func notLowerHex(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') }
