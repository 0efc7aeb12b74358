package oauthflow_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/oauthflow/oauthflow"
)

// Encryption at rest is one Config field. A ring is written as the
// OAUTHFLOW_ENCRYPTION_KEYS variable holds it, "kid:base64key,..." with
// 32-byte keys, the first one sealing; with Config.Encryption nil, New reads
// that variable (KeyRingFromEnv). Token records and pending sign-ins are then
// stored sealed, and read back as ever.
func ExampleKeyRing() {
	ctx := context.Background()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, err := oauthflow.ParseKeyRing("2026-11:" + base64.StdEncoding.EncodeToString(key))
	if err != nil {
		panic(err)
	}
	kv := oauthflow.NewMemoryKV()
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: kv, Encryption: ring})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	_ = m.Tokens.StoreTokens(ctx, "alice", "github", oauthflow.StoredTokens{AccessToken: "gho-secret", Scope: "repo"})
	raw, _ := kv.Get(ctx, "oauth:alice:github")
	fmt.Println("sealing key:", ring.CurrentKeyID())
	fmt.Println("token in the stored bytes:", bytes.Contains(raw, []byte("gho-secret")))
	tokens, _ := m.Tokens.GetTokens(ctx, "alice", "github")
	fmt.Println("read back:", tokens.AccessToken)
	// Output:
	// sealing key: 2026-11
	// token in the stored bytes: false
	// read back: gho-secret
}

// Rotating a key: put the new key first and keep the old one, so that every
// instance seals with the new key and still opens what the old one sealed;
// then Reencrypt re-seals what is stored, and the old key can leave the ring.
// A walk is safe to run while the app serves, and to run again.
func ExampleReencrypt() {
	ctx := context.Background()
	kv := oauthflow.NewMemoryKV()
	k1, k2 := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(k1)
	_, _ = rand.Read(k2)
	old, _ := oauthflow.NewKeyRing(oauthflow.EncryptionKey{ID: "k1", Key: k1})
	before := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithEncryption(old))
	_ = before.StoreTokens(ctx, "alice", "github", oauthflow.StoredTokens{AccessToken: "gho-secret", Scope: "repo"})

	rotated, _ := oauthflow.NewKeyRing(oauthflow.EncryptionKey{ID: "k2", Key: k2}, oauthflow.EncryptionKey{ID: "k1", Key: k1})
	p, err := oauthflow.Reencrypt(ctx, kv, rotated, oauthflow.ReencryptOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("rewritten:", p.Rewritten, "under unknown keys:", p.Unknown)

	newOnly, _ := oauthflow.NewKeyRing(oauthflow.EncryptionKey{ID: "k2", Key: k2})
	after := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithEncryption(newOnly))
	tokens, err := after.GetTokens(ctx, "alice", "github")
	if err != nil {
		panic(err)
	}
	fmt.Println("read without k1:", tokens.AccessToken)
	// Output:
	// rewritten: 1 under unknown keys: 0
	// read without k1: gho-secret
}
