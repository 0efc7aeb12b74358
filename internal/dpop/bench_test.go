package dpop_test

import (
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

// BenchmarkProof is the client's cost per request: a resource request's
// proof, with ath and a nonce.
func BenchmarkProof(b *testing.B) {
	k, err := dpop.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := k.Proof("POST", "https://rs.example/mcp?session=1", now, "access-token", "n-1"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerify is a test server's cost per request for the same proof.
func BenchmarkVerify(b *testing.B) {
	k, err := dpop.NewKey()
	if err != nil {
		b.Fatal(err)
	}
	now := time.Unix(1_700_000_000, 0)
	proof, err := k.Proof("POST", "https://rs.example/mcp?session=1", now, "access-token", "n-1")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := dpop.Verify(proof, "POST", "https://rs.example/mcp", now, 0, "access-token", "n-1"); err != nil {
			b.Fatal(err)
		}
	}
}
