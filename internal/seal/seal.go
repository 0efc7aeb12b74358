// Package seal seals stored records at rest with AES-256-GCM, in one of two
// forms:
//
//	enc2:{keyID}:{nonce ‖ ciphertext ‖ tag}            raw bytes, what Seal writes
//	enc1:{keyID}:{base64url(nonce ‖ ciphertext ‖ tag)}  text, what SealText writes
//
// A record is a value of its own in the store, where any bytes fit, so it is
// sealed raw: a third smaller than its text form. A sealed value carried
// inside text (a JSON string) is sealed as text. Open reads both forms, and
// records written before the raw form existed are enc1.
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

// The marks that start a sealed record, one for each form; a plain record
// starts with "{". A key ID holds no ':', so the first ':' after the mark
// ends it, whatever bytes follow.
const (
	RawMark  = "enc2:"
	TextMark = "enc1:"
)

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
	head []byte // RawMark, the id and ':': how a record Seal writes under this key starts
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
	r.keys = append(r.keys, ringKey{id: id, aead: aead, head: []byte(RawMark + id + ":")})
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

// Seal returns plain sealed under r's current key in the raw form, bound to
// name (the record's key without the app's prefix); a nil r returns plain as
// it is. The result is bytes, not text: it is for a value of its own in the
// store, never for a field of a JSON document (SealText).
func (r *Ring) Seal(plain []byte, name string) []byte {
	if r == nil {
		return plain
	}
	k := r.current
	head, nonceLen := len(k.head), k.aead.NonceSize()
	out := make([]byte, head+nonceLen, head+nonceLen+len(plain)+k.aead.Overhead())
	copy(out, k.head)
	nonce := out[head:]
	_, _ = rand.Read(nonce) // crypto/rand.Read never fails (Go 1.24)
	return k.aead.Seal(out, nonce, plain, boundTo(name))
}

// SealText is Seal in the text form (enc1, base64url), for a sealed value
// carried inside text: a JSON string holds valid UTF-8 only.
func (r *Ring) SealText(plain []byte, name string) []byte {
	if r == nil {
		return plain
	}
	k := r.current
	raw := r.Seal(plain, name)[len(k.head):]
	out := make([]byte, 0, len(TextMark)+len(k.id)+1+base64.RawURLEncoding.EncodedLen(len(raw)))
	out = append(append(append(out, TextMark...), k.id...), ':')
	return base64.RawURLEncoding.AppendEncode(out, raw)
}

// boundTo is the additional data that binds a sealed record to its name:
// the name's own memory, without a copy, since GCM only reads it.
func boundTo(name string) []byte { return unsafe.Slice(unsafe.StringData(name), len(name)) }

// Sealed reports whether b is a sealed record, in either form, as opposed to
// plain JSON.
func Sealed(b []byte) bool {
	return bytes.HasPrefix(b, []byte(RawMark)) || bytes.HasPrefix(b, []byte(TextMark))
}

// Current reports whether b is sealed as Seal seals now: in the raw form,
// under r's current key. Anything else (plain, the text form, an older key)
// is rewritten by a re-encryption.
func (r *Ring) Current(b []byte) bool {
	return r != nil && len(r.keys) > 0 && bytes.HasPrefix(b, r.current.head)
}

// KeyID returns the key ID a sealed record names; ok is false for a plain
// record and for a sealed one without a valid key ID.
func KeyID(b []byte) (id string, ok bool) {
	id, _, ok = split(b)
	return id, ok
}

// split returns the key ID of a sealed record and the body after it; ok is
// false for a plain record and for a sealed one without a valid key ID. The
// ID ends at the first ':' after the mark, looked for among the bytes a key
// ID can take only: the raw body after it may hold any byte.
func split(b []byte) (id string, body []byte, ok bool) {
	if !Sealed(b) {
		return "", nil, false
	}
	rest := b[len(RawMark):] // both marks are as long
	end := bytes.IndexByte(rest[:min(len(rest), MaxKeyIDLen+1)], ':')
	if end < 0 || !validKeyID(string(rest[:end])) {
		return "", nil, false
	}
	return string(rest[:end]), rest[end+1:], true
}

// Open returns the plain form of a stored record: b itself when it is
// plain, else b opened with r (which may be nil) and checked against name,
// in either sealed form. A key ID the ring lacks is ErrUnknownKey; anything
// that does not open is errs.CorruptRecord. Open never writes b.
func (r *Ring) Open(b []byte, name string) ([]byte, error) {
	if !Sealed(b) {
		return b, nil
	}
	id, body, ok := split(b)
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
	raw, own := sealedBytes(b, body)
	if len(raw) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, fmt.Errorf("%w: sealed record under key %q is malformed", errs.CorruptRecord, id)
	}
	nonce, sealed := raw[:k.aead.NonceSize()], raw[k.aead.NonceSize():]
	var dst []byte // the raw form opens into a new slice: b is read-only
	if own {
		dst = sealed[:0]
	}
	plain, err := k.aead.Open(dst, nonce, sealed, boundTo(name))
	if err != nil {
		return nil, fmt.Errorf("%w: sealed record under key %q does not open here (altered, or moved from another key)", errs.CorruptRecord, id)
	}
	return plain, nil
}

// sealedBytes is the nonce, ciphertext and tag of the sealed record b, whose
// body follows its key ID: the body itself in the raw form, and in the text
// form a decoded copy, which own says may be opened in place; nil when the
// text does not decode.
func sealedBytes(b, body []byte) (raw []byte, own bool) {
	if !bytes.HasPrefix(b, []byte(TextMark)) {
		return body, false
	}
	raw = make([]byte, base64.RawURLEncoding.DecodedLen(len(body)))
	n, err := base64.RawURLEncoding.Decode(raw, body)
	if err != nil {
		return nil, false
	}
	return raw[:n], true
}

// OfModule returns the ring an *oauthflow.Module seals its records with (nil:
// they are stored plain). A subpackage that stores a secret beside the
// module's records (mcpauth: an MCP server's dynamic client registration)
// seals it with this ring, so that it opens wherever the module's records do
// and Reencrypt walks it. The ring is the module's own and no part of its
// public face, so the root package sets OfModule as it loads, before any
// package that imports it runs, and nothing writes it afterwards.
var OfModule func(module any) *Ring
