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
// as errs.CorruptRecord or ErrUnknownKey (naming a key ID the ring lacks), in
// either sealed form.
func FuzzOpenRecord(f *testing.F) {
	ring := fuzzRing(f)
	raw := ring.Seal([]byte(`{"a":1}`), "n")
	for _, seed := range [][]byte{[]byte("enc1:cur:"), []byte("enc1:old:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
		[]byte("enc1:zz:AA"), []byte("enc1::"), []byte("enc1:cur"), ring.SealText([]byte(`{"a":1}`), "n"), []byte(`{}`),
		[]byte("enc2:cur:"), []byte("enc2:cur:short"), []byte("enc2:old:" + strings.Repeat("\x00", 27)),
		[]byte("enc2:zz:\xff\xfe"), []byte("enc2::"), []byte("enc2:cur"), []byte("enc2:c\xffr:" + strings.Repeat("a", 40)),
		raw, raw[:len(raw)-1], []byte("enc2:cur::::::::::::::::::::::::::::::"), []byte(`enc2:{"a":1}`)} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		before := bytes.Clone(b)
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
		if !bytes.Equal(b, before) {
			t.Fatalf("Open wrote the record it read: %q, was %q", b, before)
		}
	})
}

// Seal writes the raw form and SealText the text form; Open reads both, and
// each opens under its own name only. The raw form is the text form without
// its base64: 4 bytes in 3 fewer for the sealed bytes.
func TestOpenReadsBothForms(t *testing.T) {
	t.Parallel()
	ring := fuzzRing(t)
	plain := []byte(`{"accessToken":"gho_x","refreshToken":"ghr_y"}`)
	raw, text := ring.Seal(plain, "n"), ring.SealText(plain, "n")
	if !bytes.HasPrefix(raw, []byte("enc2:cur:")) || !bytes.HasPrefix(text, []byte("enc1:cur:")) {
		t.Fatalf("Seal wrote %.9q, SealText %.9q", raw, text)
	}
	sealedLen := 12 + len(plain) + 16 // nonce, ciphertext, tag
	if len(raw) != len("enc2:cur:")+sealedLen || len(text) != len("enc1:cur:")+(sealedLen*4+2)/3 {
		t.Errorf("raw form %d bytes, text form %d, for %d sealed bytes", len(raw), len(text), sealedLen)
	}
	for _, b := range [][]byte{raw, text} {
		got, err := ring.Open(b, "n")
		if err != nil || !bytes.Equal(got, plain) {
			t.Errorf("%.5s opens as %q, %v", b, got, err)
		}
		if id, ok := KeyID(b); !ok || id != "cur" {
			t.Errorf("%.5s names key %q, %v", b, id, ok)
		}
		if _, err := ring.Open(b, "m"); !errors.Is(err, errs.CorruptRecord) {
			t.Errorf("%.5s opened under another name: %v", b, err)
		}
	}
	if !ring.Current(raw) || ring.Current(text) {
		t.Errorf("current: raw form %v, text form %v; want only the raw form", ring.Current(raw), ring.Current(text))
	}
}

// The raw form's key ID ends at the first ':' after the mark; a ':' among the
// sealed bytes is a byte like any other, and a record cut short is corrupt.
func TestRawFormWithAColonInItsBytes(t *testing.T) {
	t.Parallel()
	ring := fuzzRing(t)
	seal := func() []byte { return ring.Seal([]byte(`{"a":1}`), "n") } // a fresh nonce each time
	b := seal()
	for !bytes.Contains(b[len("enc2:cur:"):], []byte(":")) { // about one record in seven holds one
		b = seal()
	}
	if got, err := ring.Open(b, "n"); err != nil || string(got) != `{"a":1}` {
		t.Errorf("a record with a ':' in its sealed bytes opens as %q, %v", got, err)
	}
	for _, short := range [][]byte{b[:len("enc2:cur:")+12+15], b[:len("enc2:cur:")+3], b[:len(b)-1]} {
		if _, err := ring.Open(short, "n"); !errors.Is(err, errs.CorruptRecord) {
			t.Errorf("a record cut to %d bytes: %v", len(short), err)
		}
	}
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
