package oauthflow

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// Encryption at rest. With a KeyRing, every record that holds a token, a code
// or a verifier (token records and pending sign-ins) is stored sealed with
// AES-256-GCM:
//
//	enc1:{keyID}:{base64url(nonce ‖ ciphertext ‖ tag)}
//
// The record's key name (without the app's key prefix) is the additional
// data, so a sealed record copied under another user's key does not open.
// The first key of the ring seals; every key opens. A record sealed under a key
// the ring lacks is ErrUnknownKey, which no read deletes or overwrites, and a
// plain JSON record (written before encryption was turned on) is still read.
// Lock values are never sealed: their compare-and-delete compares them.

// envEncryptionKeys names the variable New reads its key ring from when
// Config.Encryption is nil: "kid:base64key,kid:base64key,...", the first key
// encrypting and all of them decrypting. Unset or empty: records are stored plain.
const envEncryptionKeys = "OAUTHFLOW_ENCRYPTION_KEYS"

// ErrUnknownKey is the error for a record sealed under a key ID the key ring
// does not hold; the error names the key ID. The record is kept as it is: add
// the key to the ring (after the current one) and it reads again.
var ErrUnknownKey = errors.New("oauthflow: record is encrypted under a key that is not in the key ring")

// sealedMark starts every sealed record; a plain record starts with "{".
const sealedMark = "enc1:"

const maxKeyIDLen = 32

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
	current ringKey
	keys    []ringKey
}

type ringKey struct {
	id   string
	aead cipher.AEAD
}

// NewKeyRing returns a ring of keys, the first one sealing. It refuses an empty
// ring, a key that is not 32 bytes, a malformed ID and an ID given twice.
func NewKeyRing(keys ...EncryptionKey) (*KeyRing, error) {
	if len(keys) == 0 {
		return nil, errs.Invalid("a key ring needs at least one key")
	}
	r := &KeyRing{}
	for _, k := range keys {
		if !validKeyID(k.ID) {
			return nil, errs.Invalid("encryption key ID %q: want 1 to %d of A-Z a-z 0-9 - _ .", k.ID, maxKeyIDLen)
		}
		if len(k.Key) != 32 {
			return nil, errs.Invalid("encryption key %q is %d bytes, want 32 (AES-256)", k.ID, len(k.Key))
		}
		if r.find(k.ID) != nil {
			return nil, errs.Invalid("encryption key ID %q is given twice", k.ID)
		}
		block, err := aes.NewCipher(k.Key)
		if err != nil {
			return nil, errs.Invalid("encryption key %q: %w", k.ID, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, errs.Invalid("encryption key %q: %w", k.ID, err)
		}
		r.keys = append(r.keys, ringKey{id: k.ID, aead: aead})
	}
	r.current = r.keys[0]
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
		key, err := decodeKey(b64)
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

func decodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

func validKeyID(id string) bool {
	if id == "" || len(id) > maxKeyIDLen {
		return false
	}
	for i := range len(id) {
		if c := id[i]; !(isAlnum(c) || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// usable reports whether r can seal: a ring made by NewKeyRing or
// ParseKeyRing, not a zero KeyRing.
func (r *KeyRing) usable() bool { return len(r.keys) > 0 }

// checkRing panics on a zero KeyRing: a setup error, caught before any record
// is written plain or a seal is attempted without a key.
func checkRing(r *KeyRing) *KeyRing {
	if r != nil && !r.usable() {
		panic("oauthflow: a KeyRing must be made with NewKeyRing or ParseKeyRing")
	}
	return r
}

// CurrentKeyID is the ID of the key that seals new records.
func (r *KeyRing) CurrentKeyID() string { return r.current.id }

func (r *KeyRing) find(id string) *ringKey {
	for i := range r.keys {
		if r.keys[i].id == id {
			return &r.keys[i]
		}
	}
	return nil
}

// seal returns plain sealed under the current key, bound to name (the
// record's key without the app's prefix).
func (r *KeyRing) seal(plain []byte, name string) []byte {
	k := r.current
	nonceLen, raw := k.aead.NonceSize(), make([]byte, 0, k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	raw = raw[:nonceLen]
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (Go 1.24)
	raw = k.aead.Seal(raw, raw, plain, boundTo(name))
	out := make([]byte, 0, len(sealedMark)+len(k.id)+1+base64.RawURLEncoding.EncodedLen(len(raw)))
	out = append(append(append(out, sealedMark...), k.id...), ':')
	return base64.RawURLEncoding.AppendEncode(out, raw)
}

// boundTo is the additional data that binds a sealed record to its name
// (GCM only reads it, so it can be the name's own memory).
func boundTo(name string) []byte { return readOnlyBytes(name) }

// sealedRecord reports whether b is a sealed record, as opposed to plain JSON.
func sealedRecord(b []byte) bool { return bytes.HasPrefix(b, []byte(sealedMark)) }

// sealedKeyID returns the key ID a sealed record names; ok is false for a
// plain record and for a sealed one without a valid key ID.
func sealedKeyID(b []byte) (string, bool) {
	if !sealedRecord(b) {
		return "", false
	}
	id, _, ok := bytes.Cut(b[len(sealedMark):], []byte(":"))
	if !ok || !validKeyID(string(id)) {
		return "", false
	}
	return string(id), true
}

// openRecord returns the plain form of a stored record: b itself when it is
// plain, else b opened with ring (which may be nil) and checked against name.
// A key ID the ring lacks is ErrUnknownKey; anything that does not open is
// ErrCorruptRecord.
func openRecord(ring *KeyRing, b []byte, name string) ([]byte, error) {
	if !sealedRecord(b) {
		return b, nil
	}
	id, ok := sealedKeyID(b)
	if !ok {
		return nil, fmt.Errorf("%w: sealed record without a valid key ID", ErrCorruptRecord)
	}
	var k *ringKey
	if ring != nil {
		k = ring.find(id)
	}
	if k == nil {
		return nil, fmt.Errorf("%w: key ID %q", ErrUnknownKey, id)
	}
	body := b[len(sealedMark)+len(id)+1:]
	raw := make([]byte, base64.RawURLEncoding.DecodedLen(len(body)))
	n, err := base64.RawURLEncoding.Decode(raw, body)
	if err != nil || n < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: sealed record under key %q is malformed", ErrCorruptRecord, id)
	}
	nonce, sealed := raw[:k.aead.NonceSize()], raw[k.aead.NonceSize():n]
	plain, err := k.aead.Open(sealed[:0], nonce, sealed, boundTo(name))
	if err != nil {
		return nil, fmt.Errorf("%w: sealed record under key %q does not open here (altered, or moved from another key)", ErrCorruptRecord, id)
	}
	return plain, nil
}

// sealRecord seals plain with ring bound to name; without a ring it is plain.
func sealRecord(ring *KeyRing, plain []byte, name string) []byte {
	if ring == nil {
		return plain
	}
	return ring.seal(plain, name)
}

// SealRecord returns plain sealed with the module's key ring (its current
// key), bound to name: the record's key without the app's key prefix, so
// that it opens only under that key. Without a ring it returns plain. For
// records a subpackage stores that hold a secret (an MCP server's dynamic
// client registration); Reencrypt walks only the kinds it knows.
func (m *Module) SealRecord(name string, plain []byte) []byte {
	return sealRecord(m.ring, plain, name)
}

// OpenRecord returns the plain form of a record SealRecord wrote under name
// (a plain record, written before encryption was on, as it is). A key ID
// the ring lacks is ErrUnknownKey; a record that does not open is
// ErrCorruptRecord.
func (m *Module) OpenRecord(name string, b []byte) ([]byte, error) {
	return openRecord(m.ring, b, name)
}
