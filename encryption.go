package oauthflow

import (
	"fmt"
	"os"
	"strings"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/seal"
)

// Encryption at rest. With a KeyRing, every record that holds a token, a code
// or a verifier (token records and pending sign-ins) is stored sealed with
// AES-256-GCM and bound to its key name (internal/seal), so a sealed record
// copied under another user's key does not open. The first key of the ring
// seals; every key opens. A record sealed under a key the ring lacks is
// ErrUnknownKey, which no read deletes or overwrites, and a plain JSON record
// (written before encryption was turned on) is still read. Lock values are
// never sealed: their compare-and-delete compares them.

// envEncryptionKeys names the variable New reads its key ring from when
// Config.Encryption is nil: "kid:base64key,kid:base64key,...", the first key
// encrypting and all of them decrypting. Unset or empty: records are stored plain.
const envEncryptionKeys = "OAUTHFLOW_ENCRYPTION_KEYS"

// ErrUnknownKey is the error for a record sealed under a key ID the key ring
// does not hold; the error names the key ID. The record is kept as it is: add
// the key to the ring (after the current one) and it reads again.
var ErrUnknownKey = seal.ErrUnknownKey

// EncryptionKey is one key of a KeyRing: 32 bytes for AES-256, and the ID that
// records sealed under it carry.
type EncryptionKey struct {
	ID  string // 1 to 32 of A-Z, a-z, 0-9, "-", "_" and "."
	Key []byte // 32 bytes
}

// KeyRing holds the keys that seal records at rest. The first one seals new
// writes; all of them open what was sealed before. Rotate by putting a new key
// first and keeping the old ones until Module.Reencrypt has rewritten every
// record. A KeyRing is safe for concurrent use.
type KeyRing struct {
	ring seal.Ring
}

// NewKeyRing returns a ring of keys, the first one sealing. It refuses an empty
// ring, a key that is not 32 bytes, a malformed ID and an ID given twice.
func NewKeyRing(keys ...EncryptionKey) (*KeyRing, error) {
	if len(keys) == 0 {
		return nil, errs.Invalid("a key ring needs at least one key")
	}
	r := &KeyRing{}
	for _, k := range keys {
		if err := r.ring.Add(k.ID, k.Key); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// ParseKeyRing reads a ring written as OAUTHFLOW_ENCRYPTION_KEYS is:
// "kid:base64key,..." with standard or URL-safe base64, padded or not. Its
// errors name the key ID at fault, never a key.
func ParseKeyRing(s string) (*KeyRing, error) {
	var keys []EncryptionKey
	for i, item := range strings.Split(s, ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, errs.Invalid("encryption key %d: want kid:base64key", i+1)
		}
		key, err := seal.DecodeKey(b64)
		if err != nil {
			return nil, errs.Invalid("encryption key %q: not base64", id)
		}
		keys = append(keys, EncryptionKey{ID: id, Key: key})
	}
	return NewKeyRing(keys...)
}

// KeyRingFromEnv reads OAUTHFLOW_ENCRYPTION_KEYS: nil and no error when it is
// unset or empty.
func KeyRingFromEnv() (*KeyRing, error) {
	return keyRingFromLookup(os.LookupEnv)
}

func keyRingFromLookup(lookup func(string) (string, bool)) (*KeyRing, error) {
	s, _ := lookup(envEncryptionKeys)
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	r, err := ParseKeyRing(s)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", envEncryptionKeys, err)
	}
	return r, nil
}

// usable reports whether r can seal: a ring made by NewKeyRing or
// ParseKeyRing, not a zero KeyRing.
func (r *KeyRing) usable() bool { return r.ring.Usable() }

// checkRing panics on a zero KeyRing: a setup error, caught before any record
// is written plain or a seal is attempted without a key.
func checkRing(r *KeyRing) *KeyRing {
	if r != nil && !r.usable() {
		panic("oauthflow: a KeyRing must be made with NewKeyRing or ParseKeyRing")
	}
	return r
}

// CurrentKeyID is the ID of the key that seals new records.
func (r *KeyRing) CurrentKeyID() string { return r.ring.CurrentKeyID() }

// sealer is the ring that seals with r's keys; nil (records stored plain)
// for a nil r.
func (r *KeyRing) sealer() *seal.Ring {
	if r == nil {
		return nil
	}
	return &r.ring
}

// The module's ring, for the subpackages that store secrets beside its
// records (seal.OfModule).
func init() {
	seal.OfModule = func(module any) *seal.Ring {
		if m, ok := module.(*Module); ok && m != nil {
			return m.ring
		}
		return nil
	}
}
