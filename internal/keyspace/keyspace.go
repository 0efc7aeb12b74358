// Package keyspace names every record the library keeps in its store, and
// checks the IDs that go into those names.
//
// Every record lives under "oauth:", and the segment after it
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
// ReservedSegment) or it starts with "~", it is written as "~" +
// base64url(user ID). Provider IDs, run IDs and document names never contain
// ":", so a key splits one way only, and no user ID, whatever its bytes,
// reaches another user's key or another kind's.
// New record kinds must take a reserved word (or live under "oauth:sys:").
package keyspace

import (
	"encoding/base64"
	"strings"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// escapeMark starts an escaped user segment; plain user IDs never start with it.
const escapeMark = "~"

// ReservedSegment reports whether s names a record kind, now or later.
func ReservedSegment(s string) bool {
	switch s {
	case "session", "run", "doc", "lock", "sys", "due", "idx", "mcp", "conn", "meta":
		return true
	}
	return false
}

// PlainUserID reports whether userID goes into keys as it is.
func PlainUserID(userID string) bool {
	first, _, _ := strings.Cut(userID, ":")
	return !ReservedSegment(first) && !strings.HasPrefix(userID, escapeMark)
}

// MaxUserIDLen bounds a user ID, in bytes.
const MaxUserIDLen = 512

// CheckIDs refuses a user ID or a provider ID that cannot name a record.
func CheckIDs(userID, providerID string) error {
	if userID == "" || len(userID) > MaxUserIDLen {
		return errs.Invalid("user ID must be 1 to %d bytes", MaxUserIDLen)
	}
	if !ValidProviderID(providerID) {
		return errs.Invalid("provider ID %q is not valid", providerID)
	}
	return nil
}

// AppendUserSegment appends userID as it appears in a key.
func AppendUserSegment(dst []byte, userID string) []byte {
	if PlainUserID(userID) {
		return append(dst, userID...)
	}
	dst = append(dst, escapeMark...)
	return base64.RawURLEncoding.AppendEncode(dst, []byte(userID))
}

// AppendToken appends the token record's key to dst. The hot read builds
// the key in a buffer of its own with it, so that looking it up allocates nothing.
func AppendToken(dst []byte, userID, providerID string) []byte {
	return AppendUserKey(dst, "oauth:", userID, providerID)
}

// AppendUserKey appends kind (with its trailing ":"), the user's segment and the provider ID.
func AppendUserKey(dst []byte, kind, userID, providerID string) []byte {
	dst = append(dst, kind...)
	dst = AppendUserSegment(dst, userID)
	dst = append(dst, ':')
	return append(dst, providerID...)
}

// Token names the token record of userID at providerID.
func Token(userID, providerID string) string {
	var buf [128]byte
	return string(AppendUserKey(buf[:0], "oauth:", userID, providerID))
}

// Lock names the refresh lock of that record.
func Lock(userID, providerID string) string {
	var buf [128]byte
	return string(AppendUserKey(buf[:0], "oauth:lock:", userID, providerID))
}

// ConnIndex names userID's connection index.
func ConnIndex(userID string) string {
	var buf [128]byte
	return string(AppendUserSegment(append(buf[:0], "oauth:conn:"...), userID))
}

// Session names a pending sign-in, Run a workflow run, RunLock its lock and
// Doc one of its documents.
func Session(state string) string { return "oauth:session:" + state }
func Run(id string) string        { return "oauth:run:" + id }
func RunLock(id string) string    { return "oauth:lock:run:" + id }
func Doc(id, name string) string  { return "oauth:doc:" + id + ":" + name }

// MaxStateLen bounds the state tokens accepted from a request; ours are StateLen bytes.
const MaxStateLen = 512

// StateLen is the length of the states build_oauth_url issues: 32 random bytes, base64url.
const StateLen = 43

// IssuedState reports whether s has the form of a state this library issues.
// The public endpoints refuse any other before they touch the store.
func IssuedState(s string) bool {
	if len(s) != StateLen {
		return false
	}
	for i := range len(s) { // bytes, not runes: any byte of a multi-byte rune is refused anyway
		if c := s[i]; !(IsAlnum(c) || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

// RunIDLen is the length of the run IDs the engine issues: 16 random bytes, hex.
const RunIDLen = 32

// IssuedRunID reports whether id has the form of a run ID the engine issues.
func IssuedRunID(id string) bool {
	return len(id) == RunIDLen && strings.IndexFunc(id, notLowerHex) < 0
}

func notLowerHex(r rune) bool { return !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') }

// ValidProviderID reports whether id can name a provider: 1 to 64 of
// letters, digits, ".", "_" and "-", starting with a letter or a digit.
func ValidProviderID(id string) bool {
	if id == "" || len(id) > 64 || !IsAlnum(id[0]) {
		return false
	}
	for i := 1; i < len(id); i++ {
		if c := id[i]; !IsAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// IsAlnum reports whether c is an ASCII letter or digit.
func IsAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
