package oauthflow_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// writerWorkflow is the agent pattern with scopes: its tool needs "read
// write"; on unauthorized it launches the "oauth" workflow asking for the
// scopes the tool's answer names (what was granted, and what is missing).
func writerWorkflow(m *oauthflow.Module) *oauthflow.Workflow {
	tool := oauthflow.NewTool("write_note", "Writes a note.", oauthflow.Schema{Type: "object", Properties: map[string]oauthflow.Property{}},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			if _, err := m.Tokens.GetValidAccessTokenFor(ctx, tc.UserID, "peer", []string{"read", "write"}); err != nil {
				return nil, err
			}
			return map[string]bool{"written": true}, nil
		})
	return &oauthflow.Workflow{
		Name:   "writer",
		States: []string{oauthflow.StateStart, oauthflow.StateAwaitingAuth, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "write", From: oauthflow.StateStart, To: oauthflow.StateEnd,
				Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
					res, err := tool.Call(ctx, oauthflow.ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID}, json.RawMessage(`{}`))
					if err != nil {
						return err
					}
					if u, ok := oauthflow.UnauthorizedResult(res); ok {
						tc.GoTo(oauthflow.StateAwaitingAuth)
						_, err := tc.Launch(ctx, oauthflow.OAuthWorkflowName, oauthflow.OAuthWorkflowArgs{Provider: "peer", Scopes: u.Scopes},
							oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "authCompleted"}})
						return err
					}
					return tc.SetResult(json.RawMessage(res))
				}},
			{Name: "authCompleted", From: oauthflow.StateAwaitingAuth, To: oauthflow.StateStart, Wait: true,
				Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }},
		},
	}
}

// Step-up from "read" to "read write" against the independent oidc-provider:
// alice signed in with read; a tool that needs write answers unauthorized
// naming it; the workflow's sign-in asks for the union, the peer grants it,
// the parent resumes and the tool succeeds; the stored scope is the peer's.
func TestInteropScopeStepUp(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
	_, _, redirect := app.signIn(t, "alice") // openid offline_access read
	status, _, _ := get(t, redirect.String())
	require.Equal(t, http.StatusOK, status)
	before, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	require.NotContains(t, strings.Fields(before.Scope), "write")

	require.NoError(t, app.mod.Engine.Register(writerWorkflow(app.mod)))
	parent, err := app.mod.Engine.Launch(context.Background(), "alice", "writer", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	require.Equal(t, oauthflow.StateAwaitingAuth, parent.State, "the grant lacks write: the parent waits for a sign-in")
	require.Len(t, parent.Children, 1)
	doc := app.prompt(t, parent.Children[0])
	asked := strings.Fields(mustQuery(t, doc.AuthURL, "scope"))
	assert.ElementsMatch(t, append(strings.Fields(before.Scope), "write"), asked, "the union of granted and missing")

	status, _, _ = get(t, peer.Authorize(t, doc.AuthURL, app.api.URL+oauthflow.CallbackPath).String())
	require.Equal(t, http.StatusOK, status)
	parent, err = app.mod.Engine.Get(context.Background(), parent.ID)
	require.NoError(t, err)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status)
	assert.JSONEq(t, `{"written":true}`, string(parent.Result), "the tool ran again with the wider grant")
	after, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	assert.Subset(t, strings.Fields(after.Scope), []string{"read", "write"}, "the stored scope is what the peer granted")
}
