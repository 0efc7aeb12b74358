package dpop_test

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

// The EC P-256 key of RFC 7517 Appendix A.1 and A.2.
const (
	rfc7517D = "870MB6gfuTJ4HtUnUvYMyJpr5eUZNP4Bk43bVdj3eAE"
	rfc7517X = "MKBCTNIcKUSDii11ySs3526iDZ8AiTo7Tu6KPAqv7D4"
	rfc7517Y = "4Etl6SRW2YiLUrN5vfvVHuhp7x8PxltmWWlbbM4IFyM"
)

// encodedKey is MarshalBinary's format written out by hand: version 1, d, x, y.
func encodedKey(t *testing.T, d, x, y string) []byte {
	t.Helper()
	out := []byte{1}
	for _, member := range []string{d, x, y} {
		b, err := enc.DecodeString(member)
		if err != nil || len(b) != 32 {
			t.Fatalf("member %q: %d bytes, %v", member, len(b), err)
		}
		out = append(out, b...)
	}
	return out
}

func TestKeyRoundTrip(t *testing.T) {
	t.Parallel()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 97 || b[0] != 1 {
		t.Fatalf("encoding is %d bytes, version %d; want 97 bytes, version 1", len(b), b[0])
	}
	back, err := dpop.ParseKey(b)
	if err != nil {
		t.Fatal(err)
	}
	again, err := back.MarshalBinary()
	if err != nil || !bytes.Equal(again, b) {
		t.Fatalf("re-encoded %x, %v; want %x", again, err, b)
	}
	if back.Thumbprint() != k.Thumbprint() || back.PublicJWK() != k.PublicJWK() {
		t.Fatalf("parsed key is %s %+v, want %s %+v", back.Thumbprint(), back.PublicJWK(), k.Thumbprint(), k.PublicJWK())
	}
	// The parsed key signs as the original: a server bound to the
	// original's thumbprint accepts its proofs.
	now := time.Unix(1_700_000_000, 0)
	proof, err := back.Proof("GET", "https://rs.example/r", now, "", "")
	if err != nil {
		t.Fatal(err)
	}
	if jkt, err := dpop.Verify(proof, "GET", "https://rs.example/r", now, 0, "", ""); err != nil || jkt != k.Thumbprint() {
		t.Fatalf("Verify = %q, %v; want %q", jkt, err, k.Thumbprint())
	}
}

func TestNewKeyIsNewEachTime(t *testing.T) {
	t.Parallel()
	a, errA := dpop.NewKey()
	b, errB := dpop.NewKey()
	if errA != nil || errB != nil {
		t.Fatal(errA, errB)
	}
	if a.Thumbprint() == b.Thumbprint() {
		t.Fatal("two new keys share a thumbprint")
	}
}

func TestParseKeyRefusesGarbage(t *testing.T) {
	t.Parallel()
	valid := encodedKey(t, rfc7517D, rfc7517X, rfc7517Y)
	with := func(i int, c byte) []byte {
		b := bytes.Clone(valid)
		b[i] = c
		return b
	}
	order := encodedKey(t, "_____wAAAAD__________7zm-q2nF56E87nKwvxjJVE", rfc7517X, rfc7517Y) // n, the group order
	for _, tc := range []struct {
		name   string
		b      []byte
		reason string // in the error's text
	}{
		{"nil", nil, "empty"},
		{"empty", []byte{}, "empty"},
		{"version only", []byte{1}, "1 bytes, want 97"},
		{"unknown version", with(0, 2), "version 2"},
		{"version zero", with(0, 0), "version 0"},
		{"one byte short", valid[:96], "96 bytes, want 97"},
		{"one byte long", append(bytes.Clone(valid), 0), "98 bytes, want 97"},
		{"scalar zero", append(append([]byte{1}, make([]byte, 32)...), valid[33:]...), "private scalar"},
		{"scalar is the group order", order, "private scalar"},
		{"scalar all ones", append(append([]byte{1}, bytes.Repeat([]byte{0xff}, 32)...), valid[33:]...), "private scalar"},
		{"scalar changed", with(5, valid[5]^1), "public point"},
		{"x changed", with(40, valid[40]^1), "public point"},
		{"y changed", with(96, valid[96]^1), "public point"},
		{"text", []byte("this is not a key, it is a sentence of ninety-seven bytes, written to look long enough to pass"), "version 116"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := dpop.ParseKey(tc.b)
			if !errors.Is(err, dpop.ErrKeyEncoding) || !strings.Contains(err.Error(), tc.reason) || k != nil {
				t.Fatalf("ParseKey = %v, %v; want nil and ErrKeyEncoding for %q", k, err, tc.reason)
			}
		})
	}
	if _, err := dpop.ParseKey(valid); err != nil {
		t.Fatalf("the RFC 7517 key itself: %v", err)
	}
}

// FuzzParseKey: ParseKey never panics, and what it accepts it encodes back
// to the same bytes.
func FuzzParseKey(f *testing.F) {
	k, err := dpop.NewKey()
	if err != nil {
		f.Fatal(err)
	}
	b, err := k.MarshalBinary()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(b)
	f.Add([]byte{})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := dpop.ParseKey(b)
		if err != nil {
			return
		}
		again, err := k.MarshalBinary()
		if err != nil || !bytes.Equal(again, b) {
			t.Fatalf("accepted %x, re-encoded %x, %v", b, again, err)
		}
	})
}

// TestThumbprint computes the RFC 7638 thumbprint of the RFC 7517 key from
// its JWK members: the required members, in lexicographic order, no
// whitespace, hashed with SHA-256.
func TestThumbprint(t *testing.T) {
	t.Parallel()
	k, err := dpop.ParseKey(encodedKey(t, rfc7517D, rfc7517X, rfc7517Y))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := k.PublicJWK(), (dpop.JWK{Kty: "EC", Crv: "P-256", X: rfc7517X, Y: rfc7517Y}); got != want {
		t.Fatalf("PublicJWK = %+v, want %+v", got, want)
	}
	canonical := `{"crv":"P-256","kty":"EC","x":"` + rfc7517X + `","y":"` + rfc7517Y + `"}`
	sum := sha256.Sum256([]byte(canonical))
	if got, want := k.Thumbprint(), enc.EncodeToString(sum[:]); got != want {
		t.Fatalf("Thumbprint = %s, want %s", got, want)
	}
}
