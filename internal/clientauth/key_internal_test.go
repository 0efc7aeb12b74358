package clientauth

import (
	"bytes"
	"encoding/asn1"
	"errors"
	"math/big"
	"testing"
)

// An ES256 signature is R and S padded to 32 bytes each, however short the
// ASN.1 integers are; anything but two positive integers of at most 256
// bits is refused.
func TestFixedECDSA(t *testing.T) {
	t.Parallel()
	der := func(r, s *big.Int) []byte {
		b, err := asn1.Marshal(struct{ R, S *big.Int }{r, s})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	got, err := fixedECDSA(der(big.NewInt(1), big.NewInt(0x0203)))
	want := make([]byte, 64)
	want[31], want[62], want[63] = 1, 2, 3
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("fixedECDSA = %x, %v; want %x", got, err, want)
	}
	big257 := new(big.Int).Lsh(big.NewInt(1), 256)
	for name, sig := range map[string][]byte{
		"R too long": der(big257, big.NewInt(1)),
		"S zero":     der(big.NewInt(1), big.NewInt(0)),
		"trailing":   append(der(big.NewInt(1), big.NewInt(1)), 0),
		"no ASN.1":   []byte("xx"),
	} {
		if _, err := fixedECDSA(sig); !errors.Is(err, ErrKey) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}
