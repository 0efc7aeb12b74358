package oauthtemporal

import (
	"bytes"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
)

// TestStashRedeemsOnce: a stashed answer is sealed at rest with the module's
// ring, opens once, and is gone for the second taker (a retried activity).
func TestStashRedeemsOnce(t *testing.T) {
	t.Parallel()
	ring, err := oauthflow.ParseKeyRing(testKeys)
	if err != nil {
		t.Fatal(err)
	}
	kv := oauthflow.NewMemoryKV()
	mod, err := oauthflow.New(t.Context(), oauthflow.Config{KV: kv, Encryption: ring, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	st := New(nil, Options{}).stash(mod, time.Minute)
	in := stashedAnswer{Session: &oauthflow.Session{WorkflowID: "w", CodeVerifier: "the-verifier"}, Answer: oauthflow.CallbackAnswer{Code: "the-code"}}
	handle, err := st.put(t.Context(), in)
	if err != nil || !validHandle(handle) {
		t.Fatalf("put: %q, %v", handle, err)
	}
	raw, err := kv.Get(t.Context(), stashKey(handle))
	if err != nil || bytes.Contains(raw, []byte("the-code")) || bytes.Contains(raw, []byte("the-verifier")) {
		t.Fatalf("the record at rest: %q, %v; want it sealed", raw, err)
	}
	var out stashedAnswer
	if err := st.take(t.Context(), handle, &out); err != nil || out.Answer.Code != "the-code" || out.Session.CodeVerifier != "the-verifier" {
		t.Fatalf("first take: %+v, %v", out, err)
	}
	if err := st.take(t.Context(), handle, &out); !errors.Is(err, errStashGone) {
		t.Fatalf("second take: %v, want errStashGone", err)
	}
}

func TestValidHandle(t *testing.T) {
	t.Parallel()
	for h, want := range map[string]bool{
		"P2LD3KTST3UUWDRSPM57CC6ZRV":  true,
		"P2LD3KTST3UUWDRSPM57CC6ZR":   false,
		"P2LD3KTST3UUWDRSPM57CC6ZRVV": false,
		"p2LD3KTST3UUWDRSPM57CC6ZRV":  false,
		"P2LD3KTST3UUWDRSPM57CC6Z1V":  false,
		"":                            false,
	} {
		if validHandle(h) != want {
			t.Errorf("validHandle(%q) = %v", h, !want)
		}
	}
}
