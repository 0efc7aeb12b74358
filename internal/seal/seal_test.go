package seal

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/errs"
)

// fuzzRing is a fixed two-key ring: "cur" seals, "old" also opens.
func fuzzRing(t testing.TB) *Ring {
	r := &Ring{}
	for i, id := range []string{"cur", "old"} {
		if err := r.Add(id, bytes.Repeat([]byte{byte(i + 1)}, 32)); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// Whatever bytes a store hands back, opening them never panics and fails only
// as errs.CorruptRecord or ErrUnknownKey (naming a key ID the ring lacks).
func FuzzOpenRecord(f *testing.F) {
	ring := fuzzRing(f)
	for _, seed := range [][]byte{[]byte("enc1:cur:"), []byte("enc1:old:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
		[]byte("enc1:zz:AA"), []byte("enc1::"), []byte("enc1:cur"), ring.Seal([]byte(`{"a":1}`), "n"), []byte(`{}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		plain, err := ring.Open(b, "n")
		switch {
		case err == nil && !Sealed(b) && !bytes.Equal(plain, b):
			t.Fatalf("plain %q read as %q", b, plain)
		case errors.Is(err, ErrUnknownKey):
			id, ok := KeyID(b)
			if !ok || ring.find(id) != nil || !strings.Contains(err.Error(), id) {
				t.Fatalf("unknown key error %v for %q", err, b)
			}
		case err != nil && !errors.Is(err, errs.CorruptRecord):
			t.Fatalf("error %v for %q", err, b)
		}
	})
}

// A nil Ring stands for no encryption: it stores plain, reads plain, and
// reports a sealed record as sealed under a key it lacks, never as plain.
func TestNilRingIsPlain(t *testing.T) {
	t.Parallel()
	var none *Ring
	if got := none.Seal([]byte(`{"a":1}`), "n"); string(got) != `{"a":1}` {
		t.Errorf("a nil ring sealed %q", got)
	}
	if got, err := none.Open([]byte(`{"a":1}`), "n"); err != nil || string(got) != `{"a":1}` {
		t.Errorf("a nil ring read a plain record as %q, %v", got, err)
	}
	sealed := fuzzRing(t).Seal([]byte(`{"a":1}`), "n")
	if _, err := none.Open(sealed, "n"); !errors.Is(err, ErrUnknownKey) || !strings.Contains(err.Error(), `"cur"`) {
		t.Errorf("a nil ring opened a sealed record: %v", err)
	}
}

// Add refuses a malformed ID, a key of the wrong size and an ID given
// twice, naming the ID and never the key; the first key added seals.
func TestAddRefusesBadKeys(t *testing.T) {
	t.Parallel()
	key := bytes.Repeat([]byte("z"), 32)
	for _, tc := range []struct {
		id  string
		key []byte
	}{{"", key}, {"a:b", key}, {strings.Repeat("k", MaxKeyIDLen+1), key}, {"short", key[:16]}, {"cur", key}} {
		r := fuzzRing(t)
		err := r.Add(tc.id, tc.key)
		if !errors.Is(err, errs.InvalidArgument) || bytes.Contains([]byte(err.Error()), tc.key) {
			t.Errorf("Add(%q, %d bytes) = %v", tc.id, len(tc.key), err)
		}
		if r.CurrentKeyID() != "cur" || len(r.keys) != 2 {
			t.Errorf("a refused key changed the ring: current %q, %d keys", r.CurrentKeyID(), len(r.keys))
		}
	}
}
