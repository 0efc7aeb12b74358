package oauthflow

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/seal"
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
