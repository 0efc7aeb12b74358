package oauthflow_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A read that needs scopes the grant lacks is ErrNoToken with a *ScopeError
// naming them, without a refresh (a refresh never adds scopes); with the
// scopes granted it is the token, refreshed as usual.
func TestGetValidAccessTokenForNamesMissingScopes(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			f := newStoreFixture(t, b.new(t))
			require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme",
				&oauthflow.TokenSet{AccessToken: "at", RefreshToken: "rt", ExpiresIn: 30, Scope: "read profile"}))

			_, err := f.store.GetValidAccessTokenFor(ctx, "u", "acme", []string{"read", "write", "admin"})
			require.ErrorIs(t, err, oauthflow.ErrNoToken, "a tool says unauthorized")
			var se *oauthflow.ScopeError
			require.ErrorAs(t, err, &se)
			assert.Equal(t, "acme", se.ProviderID)
			assert.Equal(t, []string{"write", "admin"}, se.Missing)
			assert.Equal(t, []string{"read", "profile"}, se.Granted)
			assert.Equal(t, []string{"read", "profile", "write", "admin"}, se.Scopes(), "what a new sign-in asks for")
			assert.Zero(t, f.prov.refreshes.Load(), "no refresh for a grant that lacks scopes")

			tok, err := f.store.GetValidAccessTokenFor(ctx, "u", "acme", []string{"read"})
			require.NoError(t, err)
			assert.Equal(t, "access-1", tok, "due (30 s is inside the skew), so refreshed")
		})
	}
}

// A tool whose store read lacks scopes answers unauthorized with the
// provider, the missing scopes and the scopes to ask for.
func TestToolReportsMissingScopes(t *testing.T) {
	t.Parallel()
	f := newStoreFixture(t, oauthflow.NewMemoryKV())
	require.NoError(t, f.store.StoreFromTokenSet(ctx, "u", "acme", &oauthflow.TokenSet{AccessToken: "at", ExpiresIn: 3600, Scope: "read"}))
	tok, err := f.store.GetValidAccessToken(ctx, "u", "acme") // valid: MemoryKV now keeps it decoded
	require.NoError(t, err)
	require.Equal(t, "at", tok)
	tool := oauthflow.NewTool("write_thing", "Writes.", oauthflow.Schema{Type: "object", Properties: map[string]oauthflow.Property{}},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			return f.store.GetValidAccessTokenFor(ctx, tc.UserID, "acme", []string{"read", "write"})
		})
	res, err := tool.Call(context.Background(), oauthflow.ToolContext{UserID: "u"}, json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.True(t, oauthflow.IsUnauthorized(res))
	assert.JSONEq(t, `{"error":"unauthorized","provider":"acme","missingScopes":["write"],"scopes":["read","write"]}`, string(res))
	u, ok := oauthflow.UnauthorizedResult(res)
	require.True(t, ok)
	assert.Equal(t, oauthflow.Unauthorized{Error: "unauthorized", Provider: "acme", MissingScopes: []string{"write"},
		Scopes: []string{"read", "write"}}, u)
	_, ok = oauthflow.UnauthorizedResult(json.RawMessage(`{"repos":[]}`))
	assert.False(t, ok)
}
