package oauthflow

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow/internal/kv"
	"golang.org/x/oauth2"
)

// countingKV counts the keys read from a memory store, one by one (it has no
// batches) or as index members.
type countingKV struct {
	KV
	mem   *kv.Memory
	reads atomic.Int64
}

func (k *countingKV) Get(ctx context.Context, key string) ([]byte, error) {
	k.reads.Add(1)
	return k.KV.Get(ctx, key)
}

func (k *countingKV) Members(ctx context.Context, index string) (map[string]int64, error) {
	k.reads.Add(1)
	return k.mem.Members(ctx, index)
}

func (k *countingKV) Score(ctx context.Context, index, member string) (int64, bool, error) {
	k.reads.Add(1)
	return k.mem.Score(ctx, index, member)
}

// idOnly is a provider with only an ID, as a resolver builds them.
type idOnly string

func (p idOnly) ProviderID() string      { return string(p) }
func (p idOnly) DefaultScopes() []string { return nil }
func (p idOnly) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return ""
}
func (p idOnly) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*TokenSet, error) {
	return nil, ErrNoToken
}
func (p idOnly) RefreshToken(context.Context, string) (*TokenSet, error) { return nil, ErrNoToken }

// Listing a user's connections costs a bounded number of reads whatever
// other users met: after one user's agent met 300 MCP servers (each one a
// provider resolved on this instance), listing another user's zero
// connections reads that user's index and the app's own providers, not
// every provider met.
func TestConnectionsCostIsTheUsersOwn(t *testing.T) {
	t.Parallel()
	mem := kv.NewMemory(nil)
	store := &countingKV{KV: mem, mem: mem}
	reg := NewRegistry()
	for _, id := range []string{"github", "google"} {
		if err := reg.Register(idOnly(id)); err != nil {
			t.Fatal(err)
		}
	}
	reg.AddResolver("mcp-", func(id string) (Provider, error) { return idOnly(id), nil })
	for i := range 300 {
		if _, err := reg.Get(fmt.Sprintf("mcp-server-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	s := NewTokenStore(store, reg)
	list, err := s.Connections(context.Background(), "bob")
	if err != nil || len(list) != 0 {
		t.Fatalf("bob's connections: %v, %v; want none", list, err)
	}
	if n := store.reads.Load(); n > 5 {
		t.Fatalf("listing a user with no connections read %d keys, want at most 5 (the index, the app's 2 providers' records and health)", n)
	}
}
