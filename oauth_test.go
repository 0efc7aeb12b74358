package oauthflow_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// A provider's answer that asks to be asked again later is transient, on
// every path that retries (a refresh, a device poll, a workload's grant):
// 408, 429, 5xx and temporarily_unavailable under any status; a refusal is not.
func TestIsTransient(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		pe        oauthflow.ProviderError
		transient bool
	}{
		{oauthflow.ProviderError{StatusCode: http.StatusRequestTimeout}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusTooManyRequests, Code: "slow_down"}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusServiceUnavailable}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusBadRequest, Code: "temporarily_unavailable"}, true},
		{oauthflow.ProviderError{StatusCode: http.StatusBadRequest, Code: "invalid_scope"}, false},
		{oauthflow.ProviderError{StatusCode: http.StatusUnauthorized, Code: "invalid_client"}, false},
		{oauthflow.ProviderError{StatusCode: http.StatusBadRequest, Code: "invalid_grant"}, false},
	} {
		pe := tt.pe
		pe.ProviderID = "acme"
		if got := oauthflow.IsTransient(&pe); got != tt.transient {
			t.Errorf("IsTransient(HTTP %d %q) = %v, want %v", pe.StatusCode, pe.Code, got, tt.transient)
		}
	}
	if oauthflow.IsTransient(errors.New("not a provider's")) {
		t.Error("an error of no kind the library knows is transient")
	}
}

// lockedBuffer is a log destination the module's goroutines share.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) lines() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Split(strings.TrimSpace(b.buf.String()), "\n")
}

// loggedEnv is a flow env whose module logs every level to the returned buffer.
func loggedEnv(t *testing.T) (*flowEnv, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) {
		c.Logger = slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}})
	return env, logs
}

// hostileCode is an error code of 900 KB (the answer still fits the 1 MiB a
// provider's answer is read up to): kept whole, it went into the prompt and
// the run's error, 1.8 MB in the store for a day, and into the page.
var hostileCode = strings.Repeat("x", 900<<10)

// Bounds the tests hold the library to: a message a person reads, and a log line.
const (
	maxShownLen   = 2 << 10
	maxLogLineLen = 4 << 10
	maxPageLen    = 16 << 10
)

// What a token endpoint chooses to answer is bounded before it is kept,
// logged or shown: a sign-in's prompt, its run's error, the callback page,
// a connection's health record and the log lines.
func TestHostileTokenErrorIsBounded(t *testing.T) {
	t.Parallel()
	env, logs := loggedEnv(t)
	env.as.FailNext(authserver.Failure{Grant: authserver.GrantAuthorizationCode, Error: hostileCode, Description: hostileCode[:100<<10]})
	run, doc := env.startSignIn(0, "alice")
	status, page, _ := get(t, env.consent(doc.AuthURL, 0))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Less(t, len(page), maxPageLen, "the page")
	assert.Contains(t, page, "did not accept the sign-in (xxx", "the code is still named")
	prompt := env.prompt(run.ID)
	assert.Equal(t, oauthflow.PromptError, prompt.Status)
	assert.Less(t, len(prompt.Message), maxShownLen, "the prompt")
	assert.Contains(t, prompt.Message, "(xxx")
	r := env.run(run.ID)
	assert.Equal(t, oauthflow.RunFailed, r.Status)
	assert.Less(t, len(r.Error), maxShownLen, "the run's error")

	// A refresh the provider fails with the same answer (HTTP 503: the
	// connection is kept, and its health record says why).
	_, doc = env.startSignIn(0, "bob")
	status, _, _ = get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusOK, status)
	ctx := context.Background()
	tok, err := env.mod(0).Tokens.GetTokens(ctx, "bob", "demo")
	require.NoError(t, err)
	expired := *tok
	expired.ExpiresAt = 1
	require.NoError(t, env.mod(0).Tokens.StoreTokens(ctx, "bob", "demo", expired))
	env.as.FailNext(authserver.Failure{Grant: authserver.GrantRefreshToken, Status: http.StatusServiceUnavailable,
		Error: hostileCode, Description: hostileCode[:100<<10]})
	_, err = env.mod(0).Tokens.GetValidAccessToken(ctx, "bob", "demo")
	require.Error(t, err)
	assert.Less(t, len(err.Error()), maxLogLineLen, "the error the caller gets")
	conns, err := env.mod(0).Tokens.Connections(ctx, "bob")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	assert.Equal(t, oauthflow.HealthRefreshFailing, conns[0].Health)
	assert.NotEmpty(t, conns[0].LastError)
	assert.Less(t, len(conns[0].LastError), maxShownLen, "the health record's last error")
	_, err = env.mod(0).Tokens.GetValidAccessToken(ctx, "bob", "demo") // cooling down: the record's error
	require.Error(t, err)
	assert.Less(t, len(err.Error()), maxLogLineLen)

	lines := logs.lines()
	require.NotEmpty(t, lines)
	for _, line := range lines {
		assert.Less(t, len(line), maxLogLineLen, "a log line: %.200s", line)
	}
}

// spoofing is what an untrusted authorization server may put in its error
// text for a terminal or a page to act on: an OSC 8 hyperlink, a screen
// clear, a right-to-left override, a C1 control and a zero-width space.
const spoofing = "Go to \x1b]8;;https://evil.example\x07example.com\x1b]8;;\x07 \x1b[2J\u202egnp.exe\u202c \u009b31m\u200b."

// requireShowable fails when s holds a character that would not show as
// itself: a control (C0 or C1) or a format character (bidi, zero-width).
func requireShowable(t *testing.T, s, what string) {
	t.Helper()
	s = strings.NewReplacer("\n", "", "\t", "").Replace(s) // a page's own layout
	for _, r := range s {
		require.False(t, unicode.IsControl(r) || unicode.Is(unicode.Cf, r), "%s holds %U: %q", what, r, s)
	}
}

// The error text of a provider's redirect and of its token endpoint reaches
// the prompt (which the terminal agent prints) and the pages without the
// characters a terminal acts on or that reorder what a person reads.
func TestProviderErrorTextIsFiltered(t *testing.T) {
	t.Parallel()
	env, _ := loggedEnv(t)

	// A provider's error redirect, at the API callback and at POST /complete.
	run, doc := env.startSignIn(0, "alice")
	u, _ := url.Parse(env.replicas[0].api.URL + oauthflow.CallbackPath)
	u.RawQuery = url.Values{"error": {"access_denied\x1b[2J"}, "state": {doc.State}, "error_description": {spoofing}}.Encode()
	status, page, _ := get(t, u.String())
	assert.Equal(t, http.StatusBadRequest, status)
	prompt := env.prompt(run.ID)
	assert.Equal(t, oauthflow.PromptError, prompt.Status)
	assert.Contains(t, prompt.Message, "example.com", "the description is still shown")
	requireShowable(t, prompt.Message, "the prompt's message")
	assert.Contains(t, page, "example.com")
	requireShowable(t, page, "the page")
	u.RawQuery = url.Values{"error": {"server_error\u202e"}, "state": {doc.State}}.Encode()
	_, page, _ = get(t, u.String())
	requireShowable(t, env.prompt(run.ID).Message, "the prompt's message naming the code")
	requireShowable(t, page, "the page naming the code")
	status, _ = env.postComplete(0, "application/json",
		`{"state":"`+doc.State+`","error":"access_denied","error_description":"\u001b]8;;https://evil.example\u0007x\u202e"}`)
	assert.Equal(t, http.StatusOK, status)
	requireShowable(t, env.prompt(run.ID).Message, "the prompt's message after POST /complete")

	// A token endpoint's error code.
	env.as.FailNext(authserver.Failure{Grant: authserver.GrantAuthorizationCode, Error: "bad\x1b[2J\u202ecode", Description: spoofing})
	status, page, _ = get(t, env.consent(doc.AuthURL, 0))
	assert.Equal(t, http.StatusBadRequest, status)
	prompt = env.prompt(run.ID)
	assert.Contains(t, prompt.Message, "bad")
	requireShowable(t, prompt.Message, "the prompt's message")
	requireShowable(t, env.run(run.ID).Error, "the run's error")
	requireShowable(t, page, "the page")
}

// hostileProvider is an app's own Provider whose refresh fails with an error
// of its server's choosing, carried whole: the library bounds what it keeps
// and logs of any provider, not only of those that bound their answers.
type hostileProvider struct{ code string }

func (hostileProvider) ProviderID() string      { return "own" }
func (hostileProvider) DefaultScopes() []string { return nil }
func (hostileProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "https://own.example/authorize"
}
func (hostileProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return nil, errors.New("not used")
}
func (p hostileProvider) RefreshToken(context.Context, string) (*oauthflow.TokenSet, error) {
	return nil, &oauthflow.ProviderError{ProviderID: "own", StatusCode: http.StatusServiceUnavailable, Code: p.code, Description: p.code}
}

func TestAppProvidersErrorIsBoundedWhereKept(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	ctx := context.Background()
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(),
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Registry.Register(hostileProvider{code: hostileCode}))
	require.NoError(t, m.Tokens.StoreTokens(ctx, "carol", "own", oauthflow.StoredTokens{AccessToken: "at", RefreshToken: "rt", ExpiresAt: 1}))
	_, err = m.Tokens.GetValidAccessToken(ctx, "carol", "own")
	require.Error(t, err)
	assert.Less(t, len(err.Error()), maxLogLineLen, "the error the caller gets")
	conns, err := m.Tokens.Connections(ctx, "carol")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	assert.NotEmpty(t, conns[0].LastError)
	assert.Less(t, len(conns[0].LastError), maxShownLen, "the health record's last error")
	lines := logs.lines()
	require.NotEmpty(t, lines)
	for _, line := range lines {
		assert.Less(t, len(line), maxLogLineLen, "a log line: %.200s", line)
	}
}
