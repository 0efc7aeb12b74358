// Package seal seals stored records at rest with AES-256-GCM:
//
//	enc1:{keyID}:{base64url(nonce ‖ ciphertext ‖ tag)}
//
// The record's key name (without the app's key prefix) is the additional
// data, so a sealed record copied under another user's key does not open.
// The first key of a Ring seals; every key opens. A record sealed under a key
// the ring lacks is ErrUnknownKey, and a plain record (JSON, written before
// encryption was turned on) reads as it is.
package seal

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"unsafe"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// ErrUnknownKey is the error for a record sealed under a key ID the ring does
// not hold; the error names the key ID. The root package re-exports it.
var ErrUnknownKey = errors.New("oauthflow: record is encrypted under a key that is not in the key ring")

// Mark starts every sealed record; a plain record starts with "{".
const Mark = "enc1:"

// MaxKeyIDLen is the longest key ID a record may carry.
const MaxKeyIDLen = 32

// Ring holds the keys that seal records: the first one added seals, all of
// them open. A nil *Ring stands for no encryption: it seals nothing and
// opens plain records only. A Ring is safe for concurrent use once its keys
// are added.
type Ring struct {
	current ringKey
	keys    []ringKey
}

type ringKey struct {
	id   string
	aead cipher.AEAD
}

// Add puts the key id (32 bytes, AES-256) on r, after the ones it holds; the
// first key added seals. It refuses a malformed ID, a key that is not 32
// bytes and an ID r holds already, naming the ID, never the key.
func (r *Ring) Add(id string, key []byte) error {
	if !validKeyID(id) {
		return errs.Invalid("encryption key ID %q: want 1 to %d of A-Z a-z 0-9 - _ .", id, MaxKeyIDLen)
	}
	if len(key) != 32 {
		return errs.Invalid("encryption key %q is %d bytes, want 32 (AES-256)", id, len(key))
	}
	if r.find(id) != nil {
		return errs.Invalid("encryption key ID %q is given twice", id)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return errs.Invalid("encryption key %q: %w", id, err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return errs.Invalid("encryption key %q: %w", id, err)
	}
	r.keys = append(r.keys, ringKey{id: id, aead: aead})
	r.current = r.keys[0]
	return nil
}

// DecodeKey reads a key written in standard or URL-safe base64, padded or not.
func DecodeKey(s string) ([]byte, error) {
	s = strings.TrimRight(s, "=")
	if strings.ContainsAny(s, "-_") {
		return base64.RawURLEncoding.DecodeString(s)
	}
	return base64.RawStdEncoding.DecodeString(s)
}

func validKeyID(id string) bool {
	if id == "" || len(id) > MaxKeyIDLen {
		return false
	}
	for i := range len(id) {
		if c := id[i]; !(isAlnum(c) || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// Usable reports whether r can seal: it holds at least one key.
func (r *Ring) Usable() bool { return len(r.keys) > 0 }

// CurrentKeyID is the ID of the key that seals new records.
func (r *Ring) CurrentKeyID() string { return r.current.id }

func (r *Ring) find(id string) *ringKey {
	for i := range r.keys {
		if r.keys[i].id == id {
			return &r.keys[i]
		}
	}
	return nil
}

// Seal returns plain sealed under r's current key, bound to name (the
// record's key without the app's prefix); a nil r returns plain as it is.
func (r *Ring) Seal(plain []byte, name string) []byte {
	if r == nil {
		return plain
	}
	k := r.current
	nonceLen, raw := k.aead.NonceSize(), make([]byte, 0, k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	raw = raw[:nonceLen]
	_, _ = rand.Read(raw) // crypto/rand.Read never fails (Go 1.24)
	raw = k.aead.Seal(raw, raw, plain, boundTo(name))
	out := make([]byte, 0, len(Mark)+len(k.id)+1+base64.RawURLEncoding.EncodedLen(len(raw)))
	out = append(append(append(out, Mark...), k.id...), ':')
	return base64.RawURLEncoding.AppendEncode(out, raw)
}

// boundTo is the additional data that binds a sealed record to its name:
// the name's own memory, without a copy, since GCM only reads it.
func boundTo(name string) []byte { return unsafe.Slice(unsafe.StringData(name), len(name)) }

// Sealed reports whether b is a sealed record, as opposed to plain JSON.
func Sealed(b []byte) bool { return bytes.HasPrefix(b, []byte(Mark)) }

// KeyID returns the key ID a sealed record names; ok is false for a plain
// record and for a sealed one without a valid key ID.
func KeyID(b []byte) (id string, ok bool) {
	if !Sealed(b) {
		return "", false
	}
	raw, _, ok := bytes.Cut(b[len(Mark):], []byte(":"))
	if !ok || !validKeyID(string(raw)) {
		return "", false
	}
	return string(raw), true
}

// Open returns the plain form of a stored record: b itself when it is
// plain, else b opened with r (which may be nil) and checked against name.
// A key ID the ring lacks is ErrUnknownKey; anything that does not open is
// errs.CorruptRecord.
func (r *Ring) Open(b []byte, name string) ([]byte, error) {
	if !Sealed(b) {
		return b, nil
	}
	id, ok := KeyID(b)
	if !ok {
		return nil, fmt.Errorf("%w: sealed record without a valid key ID", errs.CorruptRecord)
	}
	var k *ringKey
	if r != nil {
		k = r.find(id)
	}
	if k == nil {
		return nil, fmt.Errorf("%w: key ID %q", ErrUnknownKey, id)
	}
	body := b[len(Mark)+len(id)+1:]
	raw := make([]byte, base64.RawURLEncoding.DecodedLen(len(body)))
	n, err := base64.RawURLEncoding.Decode(raw, body)
	if err != nil || n < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: sealed record under key %q is malformed", errs.CorruptRecord, id)
	}
	nonce, sealed := raw[:k.aead.NonceSize()], raw[k.aead.NonceSize():n]
	plain, err := k.aead.Open(sealed[:0], nonce, sealed, boundTo(name))
	if err != nil {
		return nil, fmt.Errorf("%w: sealed record under key %q does not open here (altered, or moved from another key)", errs.CorruptRecord, id)
	}
	return plain, nil
}

// OfModule returns the ring an *oauthflow.Module seals its records with (nil:
// they are stored plain). A subpackage that stores a secret beside the
// module's records (mcpauth: an MCP server's dynamic client registration)
// seals it with this ring, so that it opens wherever the module's records do
// and Reencrypt walks it. The ring is the module's own and no part of its
// public face, so the root package sets OfModule as it loads, before any
// package that imports it runs, and nothing writes it afterwards.
var OfModule func(module any) *Ring
