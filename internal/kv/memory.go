package kv

import (
	"bytes"
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// Memory is an in-process Store. It honours TTLs and frees expired entries as
// it goes (no background goroutine). Values are copied in; Get hands back the
// stored slice, which must be treated as read-only. The zero value is an empty
// store on the real clock, ready to use.
//
// Due-time indexes (Schedule, Unschedule, Claim) are kept apart from the
// key/value entries, so an index and a key may share a name here; on Redis they
// may not, and the library never gives them the same name.
type Memory struct {
	now func() time.Time

	mu        sync.RWMutex
	m         map[string]memEntry
	idx       map[string]map[string]int64 // index → member → due, Unix ms
	writes    int                         // since the last sweep
	peak      int                         // the most entries m held since it was last rebuilt
	lastSweep time.Time
}

type memEntry struct {
	v    []byte
	exp  int64 // Unix nanoseconds; 0 = never
	memo any   // v as the reader that asked decoded it (see getMemo); nil until then
}

var (
	_ Store           = (*Memory)(nil)
	_ Scanner         = (*Memory)(nil)
	_ IndexReader     = (*Memory)(nil)
	_ AbsentScheduler = (*Memory)(nil)
)

// NewMemory returns an empty store on the clock now (nil: time.Now).
func NewMemory(now func() time.Time) *Memory {
	m := &Memory{m: make(map[string]memEntry)}
	m.SetClock(now)
	return m
}

// SetClock sets the clock the store reads expiries against (nil: time.Now),
// and starts its time between sweeps from that clock's now. Call it before
// the store is used.
func (m *Memory) SetClock(now func() time.Time) {
	if now != nil {
		m.now = now
	}
	m.lastSweep = m.clock()
}

// clock returns the store's time: its clock's, or time.Now for a zero Memory.
func (m *Memory) clock() time.Time {
	if m.now == nil {
		return time.Now()
	}
	return m.now()
}

// Close drops every entry and index; the store stays usable. The store holds no goroutine, so nothing outlives it.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m = make(map[string]memEntry)
	m.idx, m.peak = nil, 0
	return nil
}

// Len reports the number of key/value entries held, expired or not yet swept;
// index members are not counted.
func (m *Memory) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.m)
}

func (e memEntry) live(now int64) bool { return e.exp == 0 || now < e.exp }

// entry returns key's entry when it is live. Called with mu held (read or write).
func (m *Memory) entry(key string) (memEntry, bool) {
	e, ok := m.m[key]
	return e, ok && e.live(m.clock().UnixNano())
}

// holds reports whether key is live and holds value. Called with mu held.
func (m *Memory) holds(key string, value []byte) (memEntry, bool) {
	e, ok := m.entry(key)
	return e, ok && bytes.Equal(e.v, value)
}

func (m *Memory) expiry(ttl time.Duration) int64 {
	if ttl == 0 {
		return 0
	}
	return m.clock().Add(ttl).UnixNano()
}

// Get returns the value of key, or errs.NotFound.
func (m *Memory) Get(_ context.Context, key string) ([]byte, error) {
	m.mu.RLock()
	e, ok := m.entry(key)
	m.mu.RUnlock()
	if !ok {
		return nil, errs.NotFound
	}
	return e.v, nil
}

// GetMemo returns the value under key and what decode made of it, decoding
// each stored value once: later reads of the same value get the same result
// without decoding again, and a write starts afresh. key is a byte slice so that
// a caller can build it in a buffer of its own; looking it up allocates nothing.
// decode must be a pure function of the value for a given key; a caller that
// decodes differently from others (another key ring) must check whose result
// it got. The result must be treated as read-only.
func (m *Memory) GetMemo(key []byte, decode func([]byte) any) ([]byte, any, bool) {
	v, memo, _, ok := m.GetMemoAt(key, decode)
	return v, memo, ok
}

// GetMemoAt is GetMemo that also returns the time on the store's clock that
// the value was found live at: a caller on the same clock reads no other.
func (m *Memory) GetMemoAt(key []byte, decode func([]byte) any) (value []byte, memo any, at time.Time, ok bool) {
	m.mu.RLock()
	e, ok := m.m[string(key)]
	m.mu.RUnlock()
	at = m.clock()
	if !ok || !e.live(at.UnixNano()) {
		return nil, nil, at, false
	}
	if e.memo != nil {
		return e.v, e.memo, at, true
	}
	memo = decode(e.v)
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur, ok := m.m[string(key)]; ok && sameBytes(cur.v, e.v) {
		cur.memo = memo
		m.m[string(key)] = cur
	}
	return e.v, memo, at, true
}

// OnSystemClock reports whether the store reads expiries against time.Now
// (no other clock was set).
func (m *Memory) OnSystemClock() bool { return m.now == nil }

// sameBytes reports whether a and b are the same stored value (not merely equal bytes).
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// Set stores a copy of value under key.
func (m *Memory) Set(_ context.Context, key string, value []byte, ttl time.Duration) error {
	if err := checkTTL(ttl); err != nil {
		return err
	}
	e := memEntry{v: bytes.Clone(value), exp: m.expiry(ttl)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.put(key, e)
	return nil
}

// SetNX stores value only when key is absent or expired.
func (m *Memory) SetNX(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.entry(key); ok {
		return false, nil
	}
	m.put(key, memEntry{v: bytes.Clone(value), exp: m.expiry(ttl)})
	return true, nil
}

// GetDel returns and removes key atomically.
func (m *Memory) GetDel(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entry(key)
	delete(m.m, key)
	if !ok {
		return nil, errs.NotFound
	}
	return e.v, nil
}

// Del removes key; an absent key is not an error.
func (m *Memory) Del(_ context.Context, key string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
	return nil
}

// TTL returns the time left on key.
func (m *Memory) TTL(_ context.Context, key string) (time.Duration, error) {
	m.mu.RLock()
	e, ok := m.entry(key)
	m.mu.RUnlock()
	if !ok {
		return 0, errs.NotFound
	}
	if e.exp == 0 {
		return 0, nil
	}
	left := time.Duration(e.exp - m.clock().UnixNano())
	if left <= 0 { // expired since the look-up
		return 0, errs.NotFound
	}
	return left, nil
}

// CompareAndDelete removes key only while it holds value.
func (m *Memory) CompareAndDelete(_ context.Context, key string, value []byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.holds(key, value); !ok {
		return false, nil
	}
	delete(m.m, key)
	return true, nil
}

// CompareAndExpire resets key's ttl only while it holds value.
func (m *Memory) CompareAndExpire(_ context.Context, key string, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.holds(key, value)
	if !ok {
		return false, nil
	}
	e.exp = m.expiry(ttl)
	m.m[key] = e
	return true, nil
}

// CompareAndSwap sets key to a copy of value with ttl only while it holds old.
func (m *Memory) CompareAndSwap(_ context.Context, key string, old, value []byte, ttl time.Duration) (bool, error) {
	if err := checkTTL(ttl); err != nil {
		return false, err
	}
	e := memEntry{v: bytes.Clone(value), exp: m.expiry(ttl)}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.holds(key, old); !ok {
		return false, nil
	}
	m.put(key, e)
	return true, nil
}

// put stores e and, every so often, sweeps out expired entries so that a store
// that is written to but rarely read does not grow without bound. Called with mu held.
func (m *Memory) put(key string, e memEntry) {
	if m.m == nil {
		m.m = make(map[string]memEntry)
	}
	m.m[key] = e
	m.peak = max(m.peak, len(m.m))
	m.writes++
	m.maybeSweep()
}

// maybeSweep sweeps after many writes, or a minute after the last sweep. Writes
// call it, and so does Claim, which a Module's background worker calls every
// second: a store that is only read from and deleted from still gives back
// what expires. Called with mu held.
func (m *Memory) maybeSweep() {
	if m.writes < len(m.m)/2+64 && m.clock().Sub(m.lastSweep) < time.Minute {
		return
	}
	m.sweep()
}

// minRebuild is the fewest entries a map must have held before a sweep rebuilds it.
const minRebuild = 1024

func (m *Memory) sweep() {
	now := m.clock()
	for k, e := range m.m {
		if !e.live(now.UnixNano()) {
			delete(m.m, k)
		}
	}
	// A Go map never shrinks: the table that once held a burst of sign-ins stays
	// allocated after they are gone. Copy the live entries into a map of their size.
	if m.peak >= minRebuild && len(m.m) < m.peak/4 {
		live := make(map[string]memEntry, len(m.m))
		for k, e := range m.m {
			live[k] = e
		}
		m.m, m.peak = live, len(live)
	}
	m.writes = 0
	m.lastSweep = now
}

// Schedule sets member's due time in index, adding it if absent. An index
// never expires: its members stay until they are unscheduled.
func (m *Memory) Schedule(_ context.Context, index, member string, due time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.idx == nil {
		m.idx = make(map[string]map[string]int64)
	}
	if m.idx[index] == nil {
		m.idx[index] = make(map[string]int64)
	}
	m.idx[index][member] = due.UnixMilli()
	return nil
}

// Unschedule removes member from index, and the index once it is empty.
func (m *Memory) Unschedule(_ context.Context, index, member string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.idx[index], member)
	if len(m.idx[index]) == 0 {
		delete(m.idx, index)
	}
	return nil
}

// Claim takes up to n members of index due at or before now, in due order, and
// moves each to now+lease under the one lock.
func (m *Memory) Claim(_ context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	if err := checkClaim(lease, n); err != nil {
		return nil, err
	}
	nowMs, untilMs := claimWindow(now, lease)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maybeSweep()
	due := dueMembers(m.idx[index], nowMs, n)
	for _, member := range due {
		m.idx[index][member] = untilMs
	}
	return due, nil
}

// dueMembers returns up to n members of set due at or before nowMs, ordered by
// due time and then by member, as a Redis sorted set orders them. It scans the
// whole set, which suits the sizes a memory store holds.
func dueMembers(set map[string]int64, nowMs int64, n int) []string {
	type item struct {
		member string
		due    int64
	}
	var due []item
	for member, d := range set {
		if d <= nowMs {
			due = append(due, item{member, d})
		}
	}
	slices.SortFunc(due, func(a, b item) int {
		return cmp.Or(cmp.Compare(a.due, b.due), strings.Compare(a.member, b.member))
	})
	out := make([]string, min(n, len(due)))
	for i := range out {
		out[i] = due[i].member
	}
	return out
}
