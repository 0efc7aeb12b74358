package oauthflow

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/seal"
)

// Token lifetimes the record rules give.
const (
	// refreshableTokenTTL keeps a record with a refresh token, or one that never expires.
	refreshableTokenTTL = 30 * 24 * time.Hour
	maxExpiresIn        = 100 * 365 * 24 * 3600 // seconds; longer is clamped
)

// tokenRecords is where a TokenStore keeps its token records, and what
// reading, writing and using one takes: the store, the ring that seals them
// at rest, the clock and skew that say whether a token is fresh, the
// registry of the providers they are for, the logger and hook that hear of
// them, the replicas a write must reach, and the parsed DPoP keys of bound
// grants with each origin's last nonce. A TokenStore, its refresher and its
// refresh ahead share one.
type tokenRecords struct {
	kv         kv.Store
	reg        *Registry
	now        func() time.Time
	skew       time.Duration
	ring       *seal.Ring // seals records at rest; nil: plain
	events     notifier
	acks       int           // replicas a rotated refresh token must reach (WithReplicaAcks)
	ackTimeout time.Duration // how long a write waits for them
	keys       keyCache      // DPoP keys of bound grants, parsed
	nonces     dpop.Nonces   // the last DPoP nonce of each origin
}

// read returns the record under key as stored (the fence a refresh writes
// against) and parsed in place.
func (r *tokenRecords) read(ctx context.Context, key string) ([]byte, tokenView, error) {
	return r.readFrom(ctx, r.kv, key, key)
}

// readFrom is read from store, the store's KV or the one under its prefix; name
// is key without the prefix, what a sealed record is bound to.
func (r *tokenRecords) readFrom(ctx context.Context, store kv.Store, key, name string) ([]byte, tokenView, error) {
	b, err := store.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, tokenView{}, ErrNoToken
	}
	if err != nil {
		return nil, tokenView{}, errs.Store(ctx, "read tokens", err)
	}
	v, err := r.parse(b, name)
	return b, v, err
}

// parse reads a stored token record, opening it first when it is sealed.
func (r *tokenRecords) parse(b []byte, name string) (tokenView, error) {
	plain, err := r.ring.Open(b, name)
	if err != nil {
		return tokenView{}, err
	}
	return parseTokenView(plain)
}

// seal is the stored form of t under the record name.
func (r *tokenRecords) seal(t StoredTokens, name string) []byte {
	return r.ring.Seal(encodeStoredTokens(t), name)
}

// plainOf is the record stored as raw under name, opened; nil when it does not open.
func (r *tokenRecords) plainOf(raw []byte, name string) []byte {
	plain, err := r.ring.Open(raw, name)
	if err != nil {
		return nil
	}
	return plain
}

// decodeMemo decodes the token record named name for kv.Memory.GetMemo; nil
// when it does not decode (the general read then reports why).
func (r *tokenRecords) decodeMemo(name string, b []byte) any {
	v, err := r.parse(b, name)
	if err != nil {
		return nil
	}
	return &tokenMemo{access: string(v.access), expiresAt: v.expiresAt, key: string(v.boundKey()), ring: r.ring}
}

// fresh reports whether a token expiring at expiresAt is valid for at least the skew.
func (r *tokenRecords) fresh(expiresAt int64) bool {
	return expiresAt == 0 || r.now().Add(r.skew).UnixMilli() < expiresAt
}

// expiresAt is when a token that expires in expiresIn seconds expires
// (Unix ms, at most maxExpiresIn from now); 0 for one that never does.
func (r *tokenRecords) expiresAt(expiresIn int64) int64 {
	if expiresIn <= 0 {
		return 0
	}
	return r.now().UnixMilli() + min(expiresIn, maxExpiresIn)*1000
}

// ttl is how long the store keeps t: refreshableTokenTTL with a refresh
// token or without expiry, else the seconds left (at least 1).
func (r *tokenRecords) ttl(t StoredTokens) time.Duration {
	if t.RefreshToken != "" || t.ExpiresAt == 0 {
		return refreshableTokenTTL
	}
	left := math.Ceil(float64(t.ExpiresAt-r.now().UnixMilli()) / 1000)
	return time.Duration(max(left, 1)) * time.Second
}

// validRead is a token valid now: its expiry, and for a DPoP-bound token the
// encoded key it is bound to ("" for Bearer).
type validRead struct {
	access    string
	expiresAt int64
	key       string
}

// validOf is the validRead of stored tokens t.
func validOf(t StoredTokens) validRead {
	r := validRead{access: t.AccessToken, expiresAt: t.ExpiresAt}
	if t.TokenType == tokenTypeDPoP {
		r.key = t.DPoPKey
	}
	return r
}

// Durability across a Redis failover. Redis replicates asynchronously: a
// master can acknowledge a write and die before any replica has it, and the
// promoted replica then holds the record as it was. For most records that
// costs a retry; for a rotated refresh token it costs the grant (the store
// keeps the spent token, the provider refuses it). With replica
// acknowledgements on, a write that holds a rotated refresh token or a new
// sign-in's tokens is followed by Redis WAIT on the key's master, and a
// refreshed record that is not on enough replicas in time is kept in the
// refreshing process: when it finds the record it replaced back in the
// store (a failover lost the write), it writes it again.

// replicated reports whether the write of key just made is on the replicas
// WithReplicaAcks asks for: true when it is, or when nothing is asked or
// the store cannot tell.
func (r *tokenRecords) replicated(ctx context.Context, key string) bool {
	w, ok := r.kv.(kv.ReplicaWaiter)
	if r.acks == 0 || !ok {
		return true
	}
	got, err := w.WaitReplicas(ctx, key, r.acks, r.ackTimeout)
	if err == nil && got >= r.acks {
		return true
	}
	attrs := []any{slog.Int("want", r.acks), slog.Int("replicas", got)}
	if err != nil {
		attrs = append(attrs, slog.String("error", err.Error()))
	}
	r.events.log.WarnContext(ctx, "oauthflow: tokens written to the Redis master are not on enough replicas yet", attrs...)
	return false
}

// Records are strict JSON: a record with an unknown field is refused.
// StoredTokens is read on every API call, so its decoder has a fast path for the
// exact form encodeStoredTokens writes (plain ASCII strings, no escapes) and falls
// back to encoding/json for anything else; both accept and refuse the same inputs
// (FuzzDecodeStoredTokens checks that).

func encodeStoredTokens(t StoredTokens) []byte {
	if b, ok := appendPlainStoredTokens(t); ok {
		return b
	}
	b, _ := json.Marshal(t) // strings, an int and authorization details checked on the way in (grantedDetails): it cannot fail
	return b
}

// appendPlainStoredTokens writes t as encoding/json does, when every string
// is one that encoding/json writes as it is (printable ASCII but for ", \,
// <, > and &) and t holds no metadata and no authorization details: a
// record every sign-in and refresh writes, without the reflection.
// FuzzEncodeStoredTokens holds the two to the same bytes.
func appendPlainStoredTokens(t StoredTokens) ([]byte, bool) {
	if len(t.Metadata) > 0 || len(t.AuthorizationDetails) > 0 {
		return nil, false
	}
	fields := [...]struct {
		name, value string
		always      bool
	}{
		{`{"accessToken":"`, t.AccessToken, true},
		{`,"refreshToken":"`, t.RefreshToken, false},
		{`,"scope":"`, t.Scope, true},
		{`,"tokenType":"`, t.TokenType, false},
		{`,"dpopKey":"`, t.DPoPKey, false},
		{`,"account":"`, t.Account, false},
	}
	n := 64
	for _, f := range fields {
		if !jsonVerbatim(f.value) {
			return nil, false
		}
		n += len(f.name) + len(f.value) + 1
	}
	b := make([]byte, 0, n)
	for i, f := range fields {
		if i == 2 { // expiresAt goes between refreshToken and scope, as the struct has it
			b = strconv.AppendInt(append(b, `,"expiresAt":`...), t.ExpiresAt, 10)
		}
		if f.always || f.value != "" {
			b = append(append(append(b, f.name...), f.value...), '"')
		}
	}
	return append(b, '}'), true
}

// jsonVerbatim tells whether encoding/json writes s between its quotes as
// it is.
func jsonVerbatim(s string) bool {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c < 0x20 || c >= 0x80, c == '"', c == '\\', c == '<', c == '>', c == '&':
			return false
		}
	}
	return true
}

// decodeStoredTokens decodes a stored token record, wrapping errCorruptRecord on
// anything that is not exactly one valid record.
func decodeStoredTokens(b []byte) (StoredTokens, error) {
	if t, ok := fastDecodeStoredTokens(b); ok {
		return t, nil
	}
	var raw struct {
		AccessToken  *string           `json:"accessToken"`
		RefreshToken *string           `json:"refreshToken"`
		ExpiresAt    *int64            `json:"expiresAt"`
		Scope        *string           `json:"scope"`
		TokenType    *string           `json:"tokenType"`
		DPoPKey      *string           `json:"dpopKey"`
		Account      *string           `json:"account"`
		Metadata     map[string]string `json:"metadata"`
		Details      json.RawMessage   `json:"authorizationDetails"`
	}
	if err := strictUnmarshal(b, &raw); err != nil {
		return StoredTokens{}, err
	}
	details, err := grantedDetails(raw.Details)
	if err != nil {
		return StoredTokens{}, fmt.Errorf("%w: %w", errCorruptRecord, err)
	}
	if raw.AccessToken == nil || raw.ExpiresAt == nil || raw.Scope == nil {
		return StoredTokens{}, fmt.Errorf("%w: token record lacks accessToken, expiresAt or scope", errCorruptRecord)
	}
	t := StoredTokens{AccessToken: *raw.AccessToken, ExpiresAt: *raw.ExpiresAt, Scope: *raw.Scope}
	if raw.RefreshToken != nil {
		t.RefreshToken = *raw.RefreshToken
	}
	if raw.TokenType != nil {
		t.TokenType = *raw.TokenType
	}
	if raw.DPoPKey != nil {
		t.DPoPKey = *raw.DPoPKey
	}
	if raw.Account != nil {
		t.Account = *raw.Account
	}
	if len(raw.Metadata) > 0 {
		t.Metadata = raw.Metadata
	}
	t.AuthorizationDetails = details
	return t, nil
}

// strictUnmarshal decodes a stored record, wrapping errCorruptRecord on failure.
func strictUnmarshal(b []byte, v any) error {
	if err := strictDecode(b, v); err != nil {
		return fmt.Errorf("%w: %w", errCorruptRecord, err)
	}
	return nil
}

// strictDecode decodes exactly one JSON value into v, refusing unknown fields
// and trailing data.
func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}

// tokenView is a token record parsed in place: its strings still point into the
// stored bytes, so the hot path turns only the access token into a string.
type tokenView struct {
	access, refresh, scope, tokenType, dpopKey, account []byte
	expiresAt                                           int64
	metadata                                            map[string]string // read by the strict decoder only
	details                                             json.RawMessage   // read by the strict decoder only
}

func (v tokenView) tokens() StoredTokens {
	return StoredTokens{AccessToken: string(v.access), RefreshToken: string(v.refresh),
		ExpiresAt: v.expiresAt, Scope: string(v.scope), TokenType: string(v.tokenType), DPoPKey: string(v.dpopKey),
		Account: string(v.account), Metadata: v.metadata, AuthorizationDetails: v.details}
}

// boundKey is the encoded key the access token is bound to, nil for a Bearer token.
func (v tokenView) boundKey() []byte {
	if string(v.tokenType) != tokenTypeDPoP {
		return nil
	}
	return v.dpopKey
}

// fastDecodeStoredTokens parses {"accessToken":"…","refreshToken":"…","expiresAt":N,"scope":"…",
// "tokenType":"…","dpopKey":"…","account":"…"} with the fields in that order, refreshToken,
// tokenType, dpopKey and account optional, no white space, and strings of ASCII without
// escapes or control bytes. Anything else returns ok=false.
func fastDecodeStoredTokens(b []byte) (StoredTokens, bool) {
	v, ok := fastParseStoredTokens(b)
	if !ok {
		return StoredTokens{}, false
	}
	return v.tokens(), true
}

func fastParseStoredTokens(b []byte) (v tokenView, ok bool) {
	p := fastParser{b: b, ok: true}
	p.lit(`{"accessToken":`)
	v.access = p.str()
	if p.peekLit(`,"refreshToken":`) {
		v.refresh = p.str()
	}
	p.lit(`,"expiresAt":`)
	v.expiresAt = p.int()
	p.lit(`,"scope":`)
	v.scope = p.str()
	if p.peekLit(`,"tokenType":`) {
		v.tokenType = p.str()
	}
	if p.peekLit(`,"dpopKey":`) {
		v.dpopKey = p.str()
	}
	if p.peekLit(`,"account":`) {
		v.account = p.str()
	}
	p.lit(`}`)
	return v, p.ok && p.i == len(p.b)
}

// parseTokenView is fastParseStoredTokens with the strict decoder behind it.
func parseTokenView(b []byte) (tokenView, error) {
	if v, ok := fastParseStoredTokens(b); ok {
		return v, nil
	}
	t, err := decodeStoredTokens(b)
	if err != nil {
		return tokenView{}, err
	}
	return tokenView{access: []byte(t.AccessToken), refresh: []byte(t.RefreshToken),
		scope: []byte(t.Scope), tokenType: []byte(t.TokenType), dpopKey: []byte(t.DPoPKey),
		account: []byte(t.Account), expiresAt: t.ExpiresAt, metadata: t.Metadata, details: t.AuthorizationDetails}, nil
}

type fastParser struct {
	b  []byte
	i  int
	ok bool
}

func (p *fastParser) lit(s string) {
	if !p.ok || !bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		p.ok = false
		return
	}
	p.i += len(s)
}

func (p *fastParser) peekLit(s string) bool {
	if p.ok && bytes.HasPrefix(p.b[p.i:], []byte(s)) {
		p.i += len(s)
		return true
	}
	return false
}

func (p *fastParser) str() []byte {
	if !p.ok || p.i >= len(p.b) || p.b[p.i] != '"' {
		p.ok = false
		return nil
	}
	start := p.i + 1
	n := bytes.IndexByte(p.b[start:], '"')
	if n < 0 || !plainASCII(p.b[start:start+n]) {
		p.ok = false // escapes, control or non-ASCII bytes: leave them to encoding/json
		return nil
	}
	p.i = start + n + 1
	return p.b[start : start+n : start+n]
}

// plainASCII reports whether s holds only printable ASCII other than '\\',
// what a JSON string needs no decoding for. It looks at eight bytes at a time:
// a byte is refused when its high bit is set, when it is below 0x20, or when
// it equals '\\'. The borrow tricks may also mark a byte above one that is
// refused, never a word that has none (FuzzPlainASCII holds it to the
// byte-by-byte rule).
func plainASCII(s []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for len(s) >= 8 {
		x := binary.LittleEndian.Uint64(s)
		y := x ^ ('\\' * ones)
		if (x|(x-0x20*ones)&^x|(y-ones)&^y)&highs != 0 {
			return false
		}
		s = s[8:]
	}
	for _, c := range s {
		if c < 0x20 || c >= 0x80 || c == '\\' {
			return false
		}
	}
	return true
}

func (p *fastParser) int() int64 {
	if !p.ok {
		return 0
	}
	j := p.i
	if j < len(p.b) && p.b[j] == '-' {
		j++
	}
	digits := j
	for j < len(p.b) && p.b[j] >= '0' && p.b[j] <= '9' {
		j++
	}
	// JSON forbids leading zeros; leave "-0", "01" and friends to encoding/json.
	if j == digits || j-digits > 18 || (p.b[digits] == '0' && j-digits > 1) || string(p.b[p.i:j]) == "-0" {
		p.ok = false
		return 0
	}
	var n int64
	for _, c := range p.b[digits:j] {
		n = n*10 + int64(c-'0') // at most 18 digits: no overflow
	}
	if digits > p.i {
		n = -n
	}
	p.i = j
	return n
}

// tokenMemo is what the hot read needs of a token record, decoded once per
// stored value (kv.Memory.GetMemo) and shared by every read of it: only by the
// readers that hold the ring it was opened with.
type tokenMemo struct {
	access    string
	expiresAt int64
	key       string // the DPoP key the token is bound to, encoded; "" for Bearer
	ring      *seal.Ring
	marked    atomic.Int64 // when a read of this value last marked its connection (Unix ms; markMemo)
}

// Bounds of what a token record keeps besides the tokens.
const (
	maxAccountLen  = 256  // bytes of an account name
	maxMetadata    = 16   // fields kept with the tokens
	maxMetadataLen = 2048 // bytes of one kept value
)

// keptMetadata is md bounded: at most maxMetadata fields (the first by name),
// each value showable and at most maxMetadataLen bytes; nil when empty.
func keptMetadata(md map[string]string) map[string]string {
	if len(md) == 0 {
		return nil
	}
	out := make(map[string]string, min(len(md), maxMetadata))
	for _, k := range slices.Sorted(maps.Keys(md)) {
		if len(out) == maxMetadata {
			break
		}
		if v := showable(md[k], maxMetadataLen); v != "" && k != "" && len(k) <= 64 {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// refreshedMetadata is a refresh answer's metadata (a new instance_url),
// bounded as keptMetadata bounds it, then the stored fields it does not
// name, by name, while there is room: at most maxMetadata in all.
func refreshedMetadata(old, answer map[string]string) map[string]string {
	kept := keptMetadata(answer)
	if kept == nil {
		return old
	}
	for _, k := range slices.Sorted(maps.Keys(old)) {
		if len(kept) >= maxMetadata {
			break
		}
		if _, ok := kept[k]; !ok {
			kept[k] = old[k]
		}
	}
	return kept
}
