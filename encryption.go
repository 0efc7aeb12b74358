package oauthflow

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
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

// encryptionKey is one key of a KeyRing: 32 bytes for AES-256, and the ID that
// records sealed under it carry.
type encryptionKey struct {
	ID  string // 1 to 32 of A-Z, a-z, 0-9, "-", "_" and "."
	Key []byte // 32 bytes
}

// KeyRing holds the keys that seal records at rest. The first one seals new
// writes; all of them open what was sealed before. Rotate by putting a new key
// first and keeping the old ones until Module.Reencrypt has rewritten every
// record. Make one with [ParseKeyRing]. A KeyRing is safe for concurrent use.
type KeyRing struct {
	ring seal.Ring
}

// newKeyRing returns a ring of keys, the first one sealing. It refuses an empty
// ring, a key that is not 32 bytes, a malformed ID and an ID given twice.
func newKeyRing(keys ...encryptionKey) (*KeyRing, error) {
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
// "kid:base64key,..." with standard or URL-safe base64, padded or not, each
// key 32 bytes and each kid 1 to 32 of A-Z, a-z, 0-9, "-", "_" and ".". The
// first key seals; every key opens. It refuses a key that is not 32 bytes, a
// malformed ID and an ID given twice; its errors name the key ID at fault,
// never a key.
func ParseKeyRing(s string) (*KeyRing, error) {
	var keys []encryptionKey
	for i, item := range strings.Split(s, ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(item), ":")
		if !ok {
			return nil, errs.Invalid("encryption key %d: want kid:base64key", i+1)
		}
		key, err := seal.DecodeKey(b64)
		if err != nil {
			return nil, errs.Invalid("encryption key %q: not base64", id)
		}
		keys = append(keys, encryptionKey{ID: id, Key: key})
	}
	return newKeyRing(keys...)
}

// keyRingFromEnv reads OAUTHFLOW_ENCRYPTION_KEYS: nil and no error when it is
// unset or empty.
func keyRingFromEnv() (*KeyRing, error) {
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

// usable reports whether r can seal: a ring made by ParseKeyRing, not a zero
// KeyRing.
func (r *KeyRing) usable() bool { return r.ring.Usable() }

// checkRing panics on a zero KeyRing: a setup error, caught before any record
// is written plain or a seal is attempted without a key.
func checkRing(r *KeyRing) *KeyRing {
	if r != nil && !r.usable() {
		panic("oauthflow: a KeyRing must be made with ParseKeyRing")
	}
	return r
}

// sealer is the ring that seals with r's keys; nil (records stored plain)
// for a nil r.
func (r *KeyRing) sealer() *seal.Ring {
	if r == nil {
		return nil
	}
	return &r.ring
}

// ReencryptOptions tunes a Reencrypt walk.
type ReencryptOptions struct {
	// Cursor resumes a walk where an earlier one stopped (its progress's
	// Cursor); "" starts from the beginning.
	Cursor string
	// Batch is how many keys are asked of the store at a time. 0: 500.
	Batch int
	// Concurrency is how many records of a batch are rewritten side by side
	// where the store cannot send a batch in one round trip (a Redis
	// Cluster, a KV of the app's own), each with its own round trips. 0: 16.
	Concurrency int
	// Progress hears the running totals after each batch.
	Progress func(ReencryptProgress)
}

// ReencryptProgress is how far a Reencrypt walk has come.
type ReencryptProgress struct {
	// Cursor resumes the walk after the last batch done; "" once it is over.
	Cursor string
	// Scanned counts the keys looked at, records or not.
	Scanned int
	// Rewritten counts the records sealed anew under the ring's current key.
	Rewritten int
	// Current counts the records already sealed under the current key, in
	// the raw form; one in the older text form (enc1) is rewritten.
	Current int
	// Changed counts the records written by someone else between the walk's
	// read and its write; their writer sealed them, so they are left alone.
	Changed int
	// Unknown counts the records sealed under a key the ring lacks, and
	// Corrupt those that do not open; both are left as they are.
	Unknown, Corrupt int
}

const (
	reencryptBatch       = 500
	reencryptConcurrency = 16
)

// Reencrypt walks kv (SCAN, on every master of a Cluster) and seals every
// token record, pending sign-in and MCP dynamic registration under ring's
// current key, in the raw form, so that older keys can leave the ring. Each
// record is rewritten with a compare-and-swap that keeps its time to live: a
// record written meanwhile (by a sign-in, a refresh, another walk) is left to
// its writer. On one Redis node (a RedisKV over a single node or a
// Sentinel-managed primary) a batch takes two round trips, one for its reads
// and one for its compare-and-swaps; elsewhere its records go Concurrency at a
// time, each with its own read, TTL and compare-and-swap. A walk that stops (an error, ctx ending) returns the progress so
// far, whose Cursor resumes it; running it again from the start is also safe,
// and rewrites nothing twice.
func Reencrypt(ctx context.Context, kv KV, ring *KeyRing, opts ReencryptOptions) (ReencryptProgress, error) {
	return reencrypt(ctx, kv, ring.sealer(), opts)
}

// reencrypt is Reencrypt with the ring that seals.
func reencrypt(ctx context.Context, kv KV, ring *seal.Ring, opts ReencryptOptions) (ReencryptProgress, error) {
	if ring == nil || !ring.Usable() {
		return ReencryptProgress{}, errs.Invalid("no encryption key ring is configured")
	}
	scanner, err := scannerOf(kv)
	if err != nil {
		return ReencryptProgress{}, err
	}
	batch := opts.Batch
	if batch <= 0 {
		batch = reencryptBatch
	}
	workers := opts.Concurrency
	if workers <= 0 {
		workers = reencryptConcurrency
	}
	p := ReencryptProgress{Cursor: opts.Cursor}
	for {
		if err := ctx.Err(); err != nil {
			return p, err
		}
		keys, next, err := scanner.ScanPrefix(ctx, "oauth:", p.Cursor, batch)
		if err != nil {
			return p, errs.Store(ctx, "scan keys", err)
		}
		done, err := resealAll(ctx, kv, ring, keys, workers)
		if err != nil {
			return p, err
		}
		p.add(done)
		p.Cursor = next
		if opts.Progress != nil {
			opts.Progress(p)
		}
		if next == "" {
			return p, nil
		}
	}
}

// resealAll reseals keys and returns what it counted: in two round trips
// where the store sends a batch in one, else one by one on up to workers
// goroutines, the first error stopping the rest.
func resealAll(ctx context.Context, store KV, ring *seal.Ring, keys []string, workers int) (ReencryptProgress, error) {
	if s := storeOf(store); kv.InOneTrip(s) {
		return resealBatch(ctx, s, ring, keys)
	}
	var (
		mu    sync.Mutex
		total ReencryptProgress
		first error
		next  int
		wg    sync.WaitGroup
	)
	take := func() (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		if first != nil || next == len(keys) {
			return "", false
		}
		next++
		return keys[next-1], true
	}
	for range min(workers, len(keys)) {
		wg.Go(func() {
			var mine ReencryptProgress
			for key, ok := take(); ok; key, ok = take() {
				if err := reseal(ctx, store, ring, key, &mine); err != nil {
					mu.Lock()
					first = cmp.Or(first, err)
					mu.Unlock()
					break
				}
			}
			mu.Lock()
			total.add(mine)
			mu.Unlock()
		})
	}
	wg.Wait()
	return total, first
}

// add counts q's records into p.
func (p *ReencryptProgress) add(q ReencryptProgress) {
	p.Scanned += q.Scanned
	p.Rewritten += q.Rewritten
	p.Current += q.Current
	p.Changed += q.Changed
	p.Unknown += q.Unknown
	p.Corrupt += q.Corrupt
}

// swapped counts a compare-and-swap's answer: rewritten, or changed by
// someone else since it was read.
func (p *ReencryptProgress) swapped(ok bool) {
	if ok {
		p.Rewritten++
	} else {
		p.Changed++
	}
}

// reseal rewrites the record under key (when it is one that is sealed at
// rest) under ring's current key, counting what it found in p: a read, a
// read of its time to live and a compare-and-swap, one after another.
func reseal(ctx context.Context, kv KV, ring *seal.Ring, key string, p *ReencryptProgress) error {
	p.Scanned++
	if !sealedKind(key) {
		return nil
	}
	b, err := kv.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return errs.Store(ctx, "read "+key, err)
	}
	next := resealed(ring, key, b, p)
	if next == nil {
		return nil
	}
	ttl, err := kv.TTL(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return errs.Store(ctx, "read the ttl of "+key, err)
	}
	swapped, err := kv.CompareAndSwap(ctx, key, b, next, ttl)
	if err != nil {
		return errs.Store(ctx, "rewrite "+key, err)
	}
	p.swapped(swapped)
	return nil
}

// resealBatch reseals keys in two round trips: one batch reads each record
// that is sealed at rest, one rewrites those that need it, each with a
// compare-and-swap over the bytes read (a record written meanwhile is left to
// its writer) that keeps its time to live.
func resealBatch(ctx context.Context, store kv.Store, ring *seal.Ring, keys []string) (ReencryptProgress, error) {
	p := ReencryptProgress{Scanned: len(keys)}
	reads := readsOf(keys)
	kv.RunBatch(ctx, store, reads...)
	writes := make([]*kv.Op, 0, len(reads))
	for _, read := range reads {
		w, err := resealOp(ctx, ring, read, &p)
		if err != nil {
			return p, err
		}
		if w != nil {
			writes = append(writes, w)
		}
	}
	kv.RunBatch(ctx, store, writes...)
	for _, w := range writes {
		if w.Err != nil {
			return p, errs.Store(ctx, "rewrite "+w.Key, w.Err)
		}
		p.swapped(w.OK)
	}
	return p, nil
}

// readsOf is a GET for each of keys that names a record sealed at rest.
func readsOf(keys []string) []*kv.Op {
	var reads []*kv.Op
	for _, key := range keys {
		if sealedKind(key) {
			reads = append(reads, &kv.Op{Kind: kv.OpGet, Key: key})
		}
	}
	return reads
}

// resealOp is the compare-and-swap that rewrites the record read read, its
// time to live kept; nil when it needs none or is gone, counted in p.
func resealOp(ctx context.Context, ring *seal.Ring, read *kv.Op, p *ReencryptProgress) (*kv.Op, error) {
	if errors.Is(read.Err, ErrNotFound) {
		return nil, nil
	}
	if read.Err != nil {
		return nil, errs.Store(ctx, "read "+read.Key, read.Err)
	}
	next := resealed(ring, read.Key, read.Got, p)
	if next == nil {
		return nil, nil
	}
	return &kv.Op{Kind: kv.OpCompareAndSwap, Key: read.Key, Old: read.Got, Value: next, TTL: kv.KeepTTL}, nil
}

// resealed is b, the record stored under key, sealed anew under ring's
// current key; nil, counted in p, when it needs no rewrite (it is current)
// or cannot have one (it is under a key the ring lacks, or corrupt).
func resealed(ring *seal.Ring, key string, b []byte, p *ReencryptProgress) []byte {
	if ring.Current(b) {
		p.Current++
		return nil
	}
	plain, err := ring.Open(b, key)
	switch {
	case errors.Is(err, ErrUnknownKey):
		p.Unknown++
		return nil
	case err != nil:
		p.Corrupt++
		return nil
	}
	return ring.Seal(plain, key)
}

// sealedKind reports whether key (without the app's prefix) names a record
// that is sealed at rest: a token record, a pending sign-in, or an MCP
// server's dynamic client registration (mcpauth, through seal.OfModule).
func sealedKind(key string) bool {
	rest, ok := strings.CutPrefix(key, "oauth:")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, ":")
	if first == "session" || strings.HasPrefix(rest, "mcp:client:") {
		return true
	}
	return !keyspace.ReservedSegment(first) // any other reserved word is another kind; the rest are users
}
