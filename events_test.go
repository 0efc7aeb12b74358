package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/stretchr/testify/require"
)

// A code the provider refuses with invalid_grant ends a sign-in, but no grant
// existed to die: the flow's event does not say grant_dead, whether the
// sign-in ran in the OAuth workflow or was started by build_oauth_url itself.
func TestFailedCodeExchangeIsNoDeadGrant(t *testing.T) {
	t.Parallel()
	for name, start := range map[string]func(env *flowEnv) string{
		"workflow": func(env *flowEnv) string { _, doc := env.startSignIn(0, "alice"); return doc.AuthURL },
		"tool": func(env *flowEnv) string {
			res, err := env.mod(0).BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"},
				json.RawMessage(`{"provider":"demo","scopes":[]}`))
			require.NoError(t, err)
			var built oauthflow.BuildOAuthURLResult
			require.NoError(t, json.Unmarshal(res, &built))
			return built.AuthURL
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			env := newFlowEnv(t, envOptions{})
			link := start(env)
			env.as.FailNext(authserver.Failure{Error: "invalid_grant"})
			status, _, _ := get(t, env.consent(link, 0))
			require.Equal(t, http.StatusBadRequest, status)
			e, ok := env.events.last(oauthflow.EventFlowFailed)
			require.True(t, ok, "no flow_failed event")
			require.Error(t, e.Err)
			if e.GrantDead {
				t.Errorf("a refused code exchange is reported as a dead grant: %+v", e)
			}
		})
	}
}

// A provider that could not be reached is logged as such, not as an answer
// with HTTP status 0; a failure without a dead grant logs no grant_dead.
func TestEventLogSaysAProviderWasNotReached(t *testing.T) {
	var logs bytes.Buffer
	hook := oauthflow.LogEvents(slog.New(slog.NewTextHandler(&logs, nil)))
	dns := &net.DNSError{Err: "no such host", Name: "github.example", IsNotFound: true}
	hook(context.Background(), oauthflow.Event{Kind: oauthflow.EventRefreshFailed, UserID: "alice", ProviderID: "github",
		Err: &oauthflow.ProviderError{ProviderID: "github", Err: dns}})
	line := logs.String()
	if strings.Contains(line, "HTTP 0") || !strings.Contains(line, "could not reach") {
		t.Errorf("a DNS failure is logged as %q; want \"could not reach\", no HTTP status", line)
	}
	if !strings.Contains(line, "no such host") {
		t.Errorf("the log line %q drops the network's reason", line)
	}
	if strings.Contains(line, "grant_dead") {
		t.Errorf("a failure with no dead grant logs grant_dead: %q", line)
	}
	logs.Reset()
	hook(context.Background(), oauthflow.Event{Kind: oauthflow.EventRefreshFailed, UserID: "alice", ProviderID: "github",
		Err: &oauthflow.ProviderError{ProviderID: "github", StatusCode: 400, Code: "invalid_grant"}, GrantDead: true})
	if line := logs.String(); !strings.Contains(line, "grant_dead=true") || !strings.Contains(line, "HTTP 400 invalid_grant") {
		t.Errorf("a dead grant's refusal is logged as %q", line)
	}
}

// The Module's own log (Config.Logger) keeps routine successes at Debug and
// what an operator acts on at Info and above: at slog's default level a
// completed sign-in, a stored, refreshed or deleted token writes no line,
// while a failed refresh still does, at Warn. LogEvents is the audit trail
// of every event.
func TestModuleLogsRoutineEventsAtDebug(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelDebug} {
		t.Run(level.String(), func(t *testing.T) {
			t.Parallel()
			logs := &lockedBuffer{}
			ctx := context.Background()
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(newFakeProvider("acme")))
			require.NoError(t, reg.Register(hostileProvider{code: "temporarily_unavailable"}))
			m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
				Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))})
			require.NoError(t, err)
			t.Cleanup(func() { _ = m.Close() })
			completeWithTool(t, m)
			require.NoError(t, m.Tokens.DeleteTokens(ctx, "alice", "acme"))
			require.NoError(t, m.Tokens.StoreTokens(ctx, "carol", "own", oauthflow.StoredTokens{AccessToken: "at", RefreshToken: "rt", ExpiresAt: 1}))
			_, err = m.Tokens.GetValidAccessToken(ctx, "carol", "own")
			require.Error(t, err)

			logged := strings.Join(logs.lines(), "\n")
			for _, kind := range []oauthflow.EventKind{oauthflow.EventConnected, oauthflow.EventTokensStored, oauthflow.EventTokensDeleted} {
				line := "msg=\"oauthflow: " + string(kind) + "\""
				if got, want := strings.Contains(logged, line), level == slog.LevelDebug; got != want {
					t.Errorf("at %s, a line %s is written: %v, want %v\n%s", level, line, got, want, logged)
				}
			}
			if !strings.Contains(logged, "level=WARN msg=\"oauthflow: refresh_failed\"") {
				t.Errorf("at %s, the failed refresh is not logged at Warn:\n%s", level, logged)
			}
		})
	}
}
