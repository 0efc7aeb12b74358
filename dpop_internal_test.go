package oauthflow

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

// A token request of a bound grant proves the key to the origin it was sent
// to; a redirect to another origin is followed without the proof.
func TestProofTransportSignsTheFirstOriginOnly(t *testing.T) {
	seen := make(chan string, 2)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- "other:" + r.Header.Get("DPoP")
	}))
	t.Cleanup(other.Close)
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- "token:" + r.Header.Get("DPoP")
		http.Redirect(w, r, other.URL+"/token", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(token.Close)
	key, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	ctx := withProofs(context.Background(), key, &dpop.Nonces{})
	c := &http.Client{Transport: DPoPTransport(ctx, nil)}
	resp, err := c.Post(token.URL+"/token", "application/x-www-form-urlencoded", strings.NewReader("grant_type=x"))
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if got := waitfor.Recv(t, seen, "the token endpoint's request"); got == "token:" {
		t.Error("the token endpoint got no proof")
	}
	if got := waitfor.Recv(t, seen, "the redirected request"); got != "other:" {
		t.Errorf("the other origin got a proof: %.40s", got)
	}
}

// The parsed keys a store keeps are bounded: a process that reads many
// bound connections keeps the most recent keyCacheSize of them, each key
// parsed once while it stays among them.
func TestKeyCacheIsBounded(t *testing.T) {
	t.Parallel()
	var c keyCache
	encs := make([]string, keyCacheSize+8)
	for i := range encs {
		_, enc, err := newGrantKey()
		require.NoError(t, err)
		encs[i] = enc
		first, err := c.get(enc)
		require.NoError(t, err)
		again, err := c.get(enc)
		require.NoError(t, err)
		require.Same(t, first, again, "a key is parsed once while it is kept")
	}
	assert.Len(t, c.keys, keyCacheSize)
	assert.Len(t, c.seq, keyCacheSize)
	assert.NotContains(t, c.keys, encs[0], "the oldest is let go")
	assert.Contains(t, c.keys, encs[len(encs)-1])
}
