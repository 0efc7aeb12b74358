package dpop_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

// A client signs a proof for each request; the server checks it against
// the request it came with and binds the token to the key's thumbprint.
func Example() {
	key, err := dpop.NewKey()
	if err != nil {
		panic(err)
	}
	now := time.Now()
	proof, err := key.Proof("POST", "https://as.example/token", now, "", "")
	if err != nil {
		panic(err)
	}

	jkt, err := dpop.Verify(proof, "POST", "https://as.example/token", now, time.Minute, "", "")
	fmt.Println("accepted:", err == nil, "bound to the key:", jkt == key.Thumbprint())

	// A server that wants a nonce refuses the proof with ErrUseNonce, and
	// answers use_dpop_nonce with a DPoP-Nonce for the client's retry.
	_, err = dpop.Verify(proof, "POST", "https://as.example/token", now, time.Minute, "", "n-1")
	fmt.Println("nonce wanted:", errors.Is(err, dpop.ErrUseNonce))
	// Output:
	// accepted: true bound to the key: true
	// nonce wanted: true
}
