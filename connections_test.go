package oauthflow_test

import (
	"context"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A user's connections are listed across providers, registered or not (one
// seen only through the index, an MCP server's say), without any token; a
// disconnect removes one; and the index repairs itself both ways: an entry
// whose record went away is dropped, a record without an entry is found
// through the registry and indexed.
func TestConnectionsListAndRepair(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			kv := b.new(t)
			reg := oauthflow.NewRegistry()
			for _, id := range []string{"github", "google", "slack"} {
				require.NoError(t, reg.Register(newFakeProvider(id)))
			}
			now := time.UnixMilli(time.Now().UnixMilli())
			s := oauthflow.NewTokenStore(kv, reg, oauthflow.WithClock(func() time.Time { return now }))
			ctx := context.Background()
			store := func(provider, scope string, refresh string) {
				require.NoError(t, s.StoreTokens(ctx, "alice", provider, oauthflow.StoredTokens{AccessToken: "at-" + provider,
					RefreshToken: refresh, ExpiresAt: now.Add(time.Hour).UnixMilli(), Scope: scope}))
			}
			store("github", "repo read:user", "rt")
			store("google", "openid email", "")
			store("mcp-notes", "notes:read", "rt") // not in the registry
			require.NoError(t, s.StoreTokens(ctx, "bob", "github", oauthflow.StoredTokens{AccessToken: "bobs", Scope: "repo"}))

			list, err := s.Connections(ctx, "alice")
			require.NoError(t, err)
			require.Equal(t, []oauthflow.Connection{
				{ProviderID: "github", Scopes: []string{"repo", "read:user"}, ExpiresAt: now.Add(time.Hour), HasRefreshToken: true,
					ConnectedAt: now, Health: oauthflow.HealthHealthy},
				{ProviderID: "google", Scopes: []string{"openid", "email"}, ExpiresAt: now.Add(time.Hour),
					ConnectedAt: now, Health: oauthflow.HealthHealthy},
				{ProviderID: "mcp-notes", Scopes: []string{"notes:read"}, ExpiresAt: now.Add(time.Hour), HasRefreshToken: true,
					ConnectedAt: now, Health: oauthflow.HealthHealthy},
			}, list)

			require.NoError(t, s.DeleteTokens(ctx, "alice", "google"))
			require.NoError(t, kv.Del(ctx, "oauth:alice:mcp-notes")) // gone behind the store's back (expired, say)
			require.NoError(t, kv.Set(ctx, "oauth:alice:slack",      // written before the index existed
				[]byte(`{"accessToken":"x","expiresAt":0,"scope":"chat:write"}`), 0))
			list, err = s.Connections(ctx, "alice")
			require.NoError(t, err)
			require.Len(t, list, 2)
			assert.Equal(t, "github", list[0].ProviderID)
			assert.Equal(t, oauthflow.Connection{ProviderID: "slack", Scopes: []string{"chat:write"}, Health: oauthflow.HealthHealthy}, list[1],
				"a record without an index entry is found, and connected at an unknown time")

			// The repairs were written: with the registry emptied, the index alone lists them.
			bare := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry())
			list, err = bare.Connections(ctx, "alice")
			require.NoError(t, err)
			var ids []string
			for _, c := range list {
				ids = append(ids, c.ProviderID)
			}
			assert.Equal(t, []string{"github", "slack"}, ids)
			indexed, err := kv.Claim(ctx, "oauth:conn:alice", time.Now(), time.Minute, 10) // what the index holds
			require.NoError(t, err)
			assert.ElementsMatch(t, []string{"github", "slack"}, indexed, "the entries of google and mcp-notes were removed")
		})
	}
}
