package mcpauth_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// lastClientID is the client ID of the fake's last token request.
func (f *fakeMCPAuth) lastClientID() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.lastClient
}

// revokeClient has the fake's token endpoint answer invalid_client to id.
func (f *fakeMCPAuth) revokeClient(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.revoked[id] = true
}

// twoInstances is the fake's server seen by two instances sharing one
// store, connected (its /mcp) by the first.
func twoInstances(t *testing.T) (f *fakeMCPAuth, kv *oauthflow.MemoryKV, a, b *instance, id string) {
	t.Helper()
	f, kv = newFakeMCPAuth(t), oauthflow.NewMemoryKV()
	a, b = newInstance(t, kv, f.srv.Client()), newInstance(t, kv, f.srv.Client())
	id, err := a.conn.Connect(context.Background(), f.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	return f, kv, a, b, id
}

// writtenKV remembers every key written under prefix, so a test can count
// those that live (the store need not list its keys).
type writtenKV struct {
	oauthflow.KV
	prefix  string
	mu      sync.Mutex
	written map[string]bool
}

func newWrittenKV(prefix string) *writtenKV {
	return &writtenKV{KV: oauthflow.NewMemoryKV(), prefix: prefix, written: map[string]bool{}}
}

func (k *writtenKV) note(key string) {
	if strings.HasPrefix(key, k.prefix) {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.written[key] = true
	}
}

func (k *writtenKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	k.note(key)
	return k.KV.Set(ctx, key, v, ttl)
}

func (k *writtenKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	k.note(key)
	return k.KV.SetNX(ctx, key, v, ttl)
}

// live is the keys written under the prefix that are there now, with their
// times to live.
func (k *writtenKV) live(t *testing.T) map[string]time.Duration {
	t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	out := map[string]time.Duration{}
	for key := range k.written {
		ttl, err := k.KV.(*oauthflow.MemoryKV).TTL(context.Background(), key)
		if errors.Is(err, oauthflow.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out[key] = ttl
	}
	return out
}
