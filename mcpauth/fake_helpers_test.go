package mcpauth_test

import (
	"context"
	"testing"

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
