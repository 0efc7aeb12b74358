package oauthflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// exchangeByTool signs alice in to acme through the two tools on a module
// configured by withhold, and returns exchange_oauth_token's result.
func exchangeByTool(t *testing.T, withhold bool) (*oauthflow.Module, json.RawMessage) {
	t.Helper()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("acme")))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		WithholdTokens: withhold, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	tc := oauthflow.ToolContext{UserID: "alice"}
	res, err := m.BuildOAuthURL.Call(context.Background(), tc, json.RawMessage(`{"provider":"acme","scopes":[]}`))
	require.NoError(t, err)
	var out oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &out))
	args, _ := json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: "acme", Code: "c", State: out.State, ExpectedState: out.State})
	res, err = m.ExchangeOAuthToken.Call(context.Background(), tc, args)
	require.NoError(t, err)
	return m, res
}

// With Config.WithholdTokens, exchange_oauth_token's result, which an agent
// hands to a model, says the user is connected and carries no token; the
// tokens are stored for the user all the same, and the tool's description
// says so. Without it the result carries the tokens, and the description
// tells the model to keep them to itself.
func TestExchangeResultWithholdsTokens(t *testing.T) {
	t.Parallel()
	m, res := exchangeByTool(t, true)
	for _, secret := range []string{"from-code", "rt-0"} { // what the fake provider grants
		assert.NotContains(t, string(res), secret, "the tool result carries a token")
	}
	var receipt oauthflow.ExchangeOAuthTokenReceipt
	require.NoError(t, json.Unmarshal(res, &receipt))
	assert.Equal(t, oauthflow.ExchangeOAuthTokenReceipt{Connected: true, Provider: "acme", Scope: "read", ExpiresIn: 3600}, receipt)
	stored, err := m.Tokens.GetTokens(context.Background(), "alice", "acme")
	require.NoError(t, err)
	assert.Equal(t, "from-code", stored.AccessToken)
	assert.Contains(t, m.ExchangeOAuthToken.Description, "never carries the tokens")

	m, res = exchangeByTool(t, false)
	var spec oauthflow.ExchangeOAuthTokenResult
	require.NoError(t, json.Unmarshal(res, &spec))
	assert.Equal(t, "from-code", spec.AccessToken, "the result with the tokens")
	assert.True(t, strings.Contains(m.ExchangeOAuthToken.Description, "never repeat them"), m.ExchangeOAuthToken.Description)
}
