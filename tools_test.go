package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestToolSchemasAreStrict(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	tc := oauthflow.ToolContext{UserID: "alice"}
	for name, args := range map[string]string{
		"unknown field":         `{"provider":"demo","scopes":[],"admin":true}`,
		"missing scopes":        `{"provider":"demo"}`,
		"null provider":         `{"provider":null,"scopes":[]}`,
		"wrong type":            `{"provider":1,"scopes":[]}`,
		"scopes not strings":    `{"provider":"demo","scopes":[1]}`,
		"not an object":         `["demo"]`,
		"not JSON":              `{`,
		"unknown provider":      `{"provider":"nope","scopes":[]}`,
		"two values":            `{"provider":"demo","scopes":[]} {}`,
		"trailing after object": `{"provider":"demo","scopes":[]}]`,
	} {
		_, err := m.BuildOAuthURL.Call(context.Background(), tc, json.RawMessage(args))
		assert.Error(t, err, name)
	}
	for name, args := range map[string]string{
		"missing expectedState": `{"provider":"demo","code":"c","state":"s"}`,
		"unknown field":         `{"provider":"demo","code":"c","state":"s","expectedState":"s","verifier":"x"}`,
	} {
		_, err := m.ExchangeOAuthToken.Call(context.Background(), tc, json.RawMessage(args))
		assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument, name)
	}
	desc, err := json.Marshal(m.BuildOAuthURL)
	require.NoError(t, err)
	assert.JSONEq(t, `{"name":"build_oauth_url","description":"Builds the authorization URL the user visits to connect a provider, with a single-use CSRF state.",
		"parameters":{"type":"object","additionalProperties":false,"required":["provider","scopes"],"properties":{
		"provider":{"type":"string","description":"provider ID, e.g. github"},
		"scopes":{"type":"array","items":{"type":"string"},"description":"scopes to ask for; empty means the provider's defaults"},
		"authorizationDetails":{"type":"array","items":{"type":"object"},
			"description":"authorization details to ask for (RFC 9396), when the provider takes them: objects, each with a string \"type\""}}}}`, string(desc))
}

func TestBuildOAuthURLKeepsVerifierPrivate(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	res, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"},
		json.RawMessage(`{"provider":"demo","scopes":["read","write"]}`))
	require.NoError(t, err)
	var out oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &out))
	raw, err := base64.RawURLEncoding.DecodeString(out.State)
	require.NoError(t, err)
	assert.Len(t, raw, 32, "state is 32 random bytes")

	u, err := url.Parse(out.AuthURL)
	require.NoError(t, err)
	assert.Equal(t, out.State, u.Query().Get("state"))
	assert.Equal(t, "S256", u.Query().Get("code_challenge_method"))
	assert.Equal(t, "read write", u.Query().Get("scope"))

	s, err := oauthflow.PeekSession(m.Sessions, context.Background(), out.State)
	require.NoError(t, err)
	require.NotEmpty(t, s.CodeVerifier)
	assert.Equal(t, "alice", s.UserID)
	assert.NotContains(t, out.AuthURL, s.CodeVerifier, "the verifier never appears in the URL")
	assert.NotContains(t, string(res), s.CodeVerifier, "nor in the tool result")
}

func TestExchangeStateMismatchExchangesNothing(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	out := buildURL(t, m, "alice")
	redirect, _ := url.Parse(env.consent(out.AuthURL, 0))
	code := redirect.Query().Get("code")

	args, _ := json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: "demo", Code: code, State: out.State, ExpectedState: out.State + "x"})
	_, err := m.ExchangeOAuthToken.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"}, args)
	assert.ErrorIs(t, err, oauthflow.ErrStateMismatch)
	assert.Zero(t, env.as.Stats().CodeRequests, "nothing exchanged")
	_, err = m.Tokens.GetTokens(context.Background(), "alice", "demo")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken, "nothing stored")
	_, err = oauthflow.PeekSession(m.Sessions, context.Background(), out.State)
	assert.NoError(t, err, "the sign-in is not consumed by a mismatch")

	// The direct tool path: with matching states it consumes the sign-in and stores the tokens.
	args, _ = json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: "demo", Code: code, State: out.State, ExpectedState: out.State})
	res, err := m.ExchangeOAuthToken.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"}, args)
	require.NoError(t, err)
	var ex oauthflow.ExchangeOAuthTokenResult
	require.NoError(t, json.Unmarshal(res, &ex))
	assert.NotEmpty(t, ex.AccessToken)
	assert.Equal(t, "read", ex.Scope)
	_, err = oauthflow.PeekSession(m.Sessions, context.Background(), out.State)
	assert.ErrorIs(t, err, oauthflow.ErrSessionNotFound, "single use")

	_, err = m.ExchangeOAuthToken.Call(context.Background(), oauthflow.ToolContext{UserID: "mallory"}, args)
	assert.Error(t, err, "a used state cannot be replayed")
}

func TestExchangeForAnotherUserIsForbidden(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	out := buildURL(t, m, "alice")
	args, _ := json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: "demo", Code: "c", State: out.State, ExpectedState: out.State})
	_, err := m.ExchangeOAuthToken.Call(context.Background(), oauthflow.ToolContext{UserID: "mallory"}, args)
	assert.ErrorIs(t, err, oauthflow.ErrForbidden)
	assert.Zero(t, env.as.Stats().CodeRequests)
}

func TestConsumerToolReportsUnauthorized(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	tool := listReposTool(env.mod(0), env.as.APIURL())
	res, err := tool.Call(context.Background(), oauthflow.ToolContext{UserID: "nobody"}, json.RawMessage(`{}`))
	require.NoError(t, err)
	assert.JSONEq(t, `{"error":"unauthorized"}`, string(res))
	_, ok := oauthflow.UnauthorizedResult(res)
	assert.True(t, ok)
	_, ok = oauthflow.UnauthorizedResult(json.RawMessage(`[{"name":"x"}]`))
	assert.False(t, ok)
}

// The whole flow never writes a token, a code or a verifier to the log.
func TestFlowLogsNoSecrets(t *testing.T) {
	t.Parallel()
	var buf lockedWriter
	buf.w = &bytes.Buffer{}
	env := newFlowEnv(t, envOptions{as: authserver.Options{}})
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: env.kv, Registry: env.mod(0).Registry, Logger: log})
	require.NoError(t, err)
	_, doc, err := m.StartSignIn(context.Background(), "alice", "demo")
	require.NoError(t, err)
	s, err := oauthflow.PeekSession(m.Sessions, context.Background(), doc.State)
	require.NoError(t, err)
	mux := http.NewServeMux()
	m.Mount(mux)
	api := httptest.NewServer(mux)
	defer api.Close()
	redirect, _ := url.Parse(env.consent(doc.AuthURL, 0))
	resp, err := http.Post(api.URL+oauthflow.CompletePath, "application/json",
		strings.NewReader(`{"code":"`+redirect.Query().Get("code")+`","state":"`+doc.State+`"}`))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	tok, err := m.Tokens.GetTokens(context.Background(), "alice", "demo")
	require.NoError(t, err)
	logged := buf.w.String()
	require.NotEmpty(t, logged)
	for _, secret := range []string{tok.AccessToken, tok.RefreshToken, s.CodeVerifier, redirect.Query().Get("code"), "demo-secret"} {
		assert.False(t, strings.Contains(logged, secret), "the log holds a secret")
	}
}

// buildURL calls build_oauth_url for the demo provider as user.
func buildURL(t *testing.T, m *oauthflow.Module, user string) oauthflow.BuildOAuthURLResult {
	t.Helper()
	res, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: user}, json.RawMessage(`{"provider":"demo","scopes":[]}`))
	require.NoError(t, err)
	var out oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &out))
	return out
}

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
