package oauthflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/seal"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// fuzzRing is a fixed two-key ring: "cur" seals, "old" also opens.
func fuzzRing(t testing.TB) *KeyRing {
	r, err := newKeyRing(encryptionKey{ID: "cur", Key: bytes.Repeat([]byte{1}, 32)},
		encryptionKey{ID: "old", Key: bytes.Repeat([]byte{2}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A sealed token record decodes exactly as its plain form does: the same
// records accepted, the same tokens, the same refusals (errCorruptRecord), in
// either sealed form (raw, as records are written; text, as they were). The
// sealed form opens under its own name only, and any change to its bytes
// (at, to) makes it a refusal that is errCorruptRecord or ErrUnknownKey, never
// other tokens.
func FuzzDecodeSealedTokens(f *testing.F) {
	for _, seed := range []string{
		`{"accessToken":"a","refreshToken":"r","expiresAt":1700000000000,"scope":"read write"}`,
		`{"accessToken":"a","expiresAt":0,"scope":""}`,
		`{"accessToken":"a\u00e9","expiresAt":-0,"scope":"s"}`,
		`{"accessToken":"a","expiresAt":1,"scope":"s","x":1}`,
		`enc1:cur:AAAA`, "enc2:cur:\x00:\xff", `enc2:old:{"accessToken":"a"}`, `null`, ``,
	} {
		f.Add([]byte(seed), "oauth:alice:github", uint16(7), byte('x'))
	}
	f.Add([]byte(`{"accessToken":"a"}`), "oauth:bob:github", uint16(3), byte(':')) // the raw form's key ID cut short
	ring := fuzzRing(f).sealer()
	store := &tokenRecords{ring: ring}
	f.Fuzz(func(t *testing.T, plain []byte, name string, at uint16, to byte) {
		want, wantErr := parseTokenView(plain)
		for _, sealed := range [][]byte{ring.Seal(plain, name), ring.SealText(plain, name)} {
			got, err := store.parse(sealed, name)
			if (err == nil) != (wantErr == nil) || err == nil && !reflect.DeepEqual(got.tokens(), want.tokens()) {
				t.Fatalf("sealed %q decodes as %+v, %v; plain as %+v, %v", plain, got.tokens(), err, want.tokens(), wantErr)
			}
			if err != nil && !errors.Is(err, errCorruptRecord) {
				t.Fatalf("refusal %v does not wrap errCorruptRecord", err)
			}
			if _, err := ring.Open(sealed, name+"x"); !errors.Is(err, errCorruptRecord) {
				t.Fatalf("a record opened under another name: %v", err)
			}
			checkChangedRecord(t, ring, sealed, plain, name, int(at)%len(sealed), to)
		}
	})
}

// checkChangedRecord fails when sealed, with its byte at i set to to, opens
// to anything but plain or fails otherwise than as errCorruptRecord or
// ErrUnknownKey.
func checkChangedRecord(t *testing.T, ring *seal.Ring, sealed, plain []byte, name string, i int, to byte) {
	t.Helper()
	if sealed[i] == to {
		return
	}
	changed := bytes.Clone(sealed)
	changed[i] = to
	opened, err := ring.Open(changed, name)
	switch {
	case err == nil && !seal.Sealed(changed):
		// no longer a sealed record: it is read as plain, as it is
		if !bytes.Equal(opened, changed) {
			t.Fatalf("plain record %q read as %q", changed, opened)
		}
	case err == nil:
		// base64 can decode two spellings of the last bits to the same bytes
		if !bytes.Equal(opened, plain) || !bytes.HasPrefix(changed, []byte(seal.TextMark)) {
			t.Fatalf("changed record %q opened to %q", changed, opened)
		}
	case !errors.Is(err, errCorruptRecord) && !errors.Is(err, ErrUnknownKey):
		t.Fatalf("changed record: error %v is neither corrupt nor an unknown key", err)
	}
}

// gatedKV holds every Get at its gate until the gate opens, counting the
// Gets held there.
type gatedKV struct {
	KV
	gate     chan struct{}
	mu       sync.Mutex
	inFlight int
}

func (k *gatedKV) Get(ctx context.Context, key string) ([]byte, error) {
	k.mu.Lock()
	k.inFlight++
	k.mu.Unlock()
	select {
	case <-k.gate:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return k.KV.Get(ctx, key)
}

func (k *gatedKV) ScanPrefix(ctx context.Context, prefix, cursor string, count int) ([]string, string, error) {
	return k.KV.(kv.Scanner).ScanPrefix(ctx, prefix, cursor, count)
}

// Reencrypt rewrites a batch's records side by side, Concurrency at a time
// and never more: three round trips a record one after another would take
// minutes for a million records. In a synctest bubble, once every goroutine
// is blocked, the reads held at the gate are exactly the ones in flight.
func TestReencryptSideBySide(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		plain := NewTokenStore(NewMemoryKV(), NewRegistry())
		for i := range 40 {
			if err := plain.StoreTokens(ctx, fmt.Sprintf("user-%d", i), "demo", StoredTokens{AccessToken: "at", Scope: "read"}); err != nil {
				t.Fatal(err)
			}
		}
		store := &gatedKV{KV: plain.kv, gate: make(chan struct{})}
		type result struct {
			p   ReencryptProgress
			err error
		}
		done := make(chan result, 1)
		go func() {
			p, err := Reencrypt(ctx, store, fuzzRing(t), ReencryptOptions{Concurrency: 4})
			done <- result{p, err}
		}()
		synctest.Wait() // every reader Reencrypt started is at the gate
		store.mu.Lock()
		held := store.inFlight
		store.mu.Unlock()
		close(store.gate)
		select {
		case r := <-done:
			if r.err != nil || r.p.Rewritten != 40 {
				t.Fatalf("rewrote %d records: %v", r.p.Rewritten, r.err)
			}
		case <-time.After(time.Minute): // the bubble's clock: it moves only when everything waits
			t.Fatal("Reencrypt did not end")
		}
		if held != 4 {
			t.Errorf("%d of Reencrypt's reads were in flight at once, want Concurrency's 4", held)
		}
	})
}

// midWalkHook counts what a client sends, and once armed runs write just
// before the first pipeline that holds a script: a Reencrypt batch's
// compare-and-swaps, sent after its reads. write hears the string
// arguments of those scripts, the keys of the records the batch read
// among them.
type midWalkHook struct {
	armed     atomic.Bool
	writing   atomic.Bool
	write     func(ctx context.Context, args []string)
	pipelines atomic.Int64 // pipelines sent, the write's own and handshakes left out
	alone     atomic.Int64 // reads and writes of a key sent alone, the write's own left out
}

func (h *midWalkHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *midWalkHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		switch cmd.Name() {
		case "get", "pttl", "set", "eval", "evalsha":
			if !h.writing.Load() {
				h.alone.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}

func (h *midWalkHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.writing.Load() || slices.Contains([]string{"hello", "client", "auth", "select"}, cmds[0].Name()) {
			return next(ctx, cmds) // the write's own, or a new connection's handshake
		}
		h.pipelines.Add(1)
		if slices.ContainsFunc(cmds, func(c redis.Cmder) bool { return c.Name() == "eval" }) && h.armed.CompareAndSwap(true, false) {
			var args []string
			for _, c := range cmds {
				for _, a := range c.Args() {
					if s, ok := a.(string); ok && c.Name() == "eval" {
						args = append(args, s)
					}
				}
			}
			h.writing.Store(true)
			h.write(ctx, args)
			h.writing.Store(false)
		}
		return next(ctx, cmds)
	}
}

// On one Redis node Reencrypt reads a batch of records in one round trip and
// rewrites them in another, each with a compare-and-swap over the bytes it
// read: a sign-in that lands between the two is left as its writer sealed
// it and counted as changed, and the batch's other records are rewritten.
func TestReencryptBatchLeavesARecordWrittenMidWalk(t *testing.T) {
	t.Parallel()
	for name, client := range map[string]func(t *testing.T) (redis.UniversalClient, string){
		"miniredis": func(t *testing.T) (redis.UniversalClient, string) { _, c := redistest.Mini(t); return c, "" },
		"redis": func(t *testing.T) (redis.UniversalClient, string) {
			c := redistest.Real(t)
			return c, redistest.Prefix(t, c)
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c, prefix := client(t)
			testReencryptBatchLeavesARecordWrittenMidWalk(t, c, WithKeyPrefix(NewRedisKV(c), prefix), prefix == "")
		})
	}
}

func testReencryptBatchLeavesARecordWrittenMidWalk(t *testing.T, c redis.UniversalClient, store KV, oneScan bool) {
	ctx := context.Background()
	oldRing, newRing := fuzzRingOf(t, "k1"), fuzzRingOf(t, "k2", "k1")
	expiry := time.Now().Add(time.Hour).UnixMilli()
	before := NewTokenStore(store, NewRegistry(), WithEncryption(oldRing), WithLogger(slog.New(slog.DiscardHandler)))
	after := NewTokenStore(store, NewRegistry(), WithEncryption(newRing), WithLogger(slog.New(slog.DiscardHandler)))
	const records = 12
	for i := range records {
		if err := before.StoreTokens(ctx, fmt.Sprint("user-", i), "demo", StoredTokens{AccessToken: "old", ExpiresAt: expiry}); err != nil {
			t.Fatal(err)
		}
	}
	signIn := StoredTokens{AccessToken: "new", RefreshToken: "rt-new", ExpiresAt: expiry, Scope: "read"}
	// The sign-in lands on a record of the batch whose compare-and-swaps
	// are about to go: read by the walk, not yet rewritten. (On a shared
	// Redis the walk's SCAN may bring the records in more than one batch.)
	signedIn := ""
	hook := &midWalkHook{write: func(ctx context.Context, args []string) {
		for _, a := range args {
			if m := batchUser.FindStringSubmatch(a); m != nil {
				signedIn = m[1]
				break
			}
		}
		if err := after.StoreTokens(ctx, signedIn, "demo", signIn); err != nil {
			t.Errorf("the sign-in during the walk, as %q: %v", signedIn, err)
		}
	}}
	c.AddHook(hook)
	hook.armed.Store(true)
	p, err := Reencrypt(ctx, store, newRing, ReencryptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hook.armed.Load() {
		t.Fatal("the walk sent no compare-and-swap in a pipeline")
	}
	if p.Changed != 1 || p.Rewritten != records-1 {
		t.Errorf("the walk counted %d changed and %d rewritten; want 1 changed, %d rewritten", p.Changed, p.Rewritten, records-1)
	}
	if n := hook.alone.Load(); n != 0 {
		t.Errorf("the walk sent %d reads or writes of a record alone; want every one in a batch", n)
	}
	if n := hook.pipelines.Load(); oneScan && n != 2 {
		t.Errorf("the walk took %d pipelines for one batch; want 2, its reads and its writes", n)
	}
	for i := range records {
		got, err := after.GetTokens(ctx, fmt.Sprint("user-", i), "demo")
		if err != nil {
			t.Fatal(err)
		}
		want := StoredTokens{AccessToken: "old", ExpiresAt: expiry}
		if fmt.Sprint("user-", i) == signedIn {
			want = signIn
		}
		if !reflect.DeepEqual(*got, want) {
			t.Errorf("user-%d holds %+v after the walk; want %+v", i, *got, want)
		}
	}
}

// batchUser finds the user of a record's key among a script's arguments.
var batchUser = regexp.MustCompile(`oauth:(user-[0-9]+):demo$`)

// fuzzRingOf is a ring of fixed keys named by ids, the first one sealing.
func fuzzRingOf(t *testing.T, ids ...string) *KeyRing {
	var keys []encryptionKey
	for _, id := range ids {
		keys = append(keys, encryptionKey{ID: id, Key: bytes.Repeat([]byte(id[1:]), 32)})
	}
	r, err := newKeyRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
