package oauthflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// listReposTool is a consumer tool: it calls the demo API with the user's token.
// It just returns the store's error; Tool turns ErrNoToken into {"error":"unauthorized"}.
func listReposTool(m *oauthflow.Module, apiURL string) *oauthflow.Tool {
	return oauthflow.NewTool("list_repos", "Lists the user's repositories.",
		oauthflow.Schema{Type: "object", Properties: map[string]oauthflow.Property{}},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			resp, err := m.Tokens.Client(ctx, tc.UserID, "demo").Get(apiURL)
			if err != nil {
				return nil, err
			}
			defer func() { _ = resp.Body.Close() }()
			if resp.StatusCode != http.StatusOK {
				return nil, fmt.Errorf("demo API answered %d", resp.StatusCode)
			}
			var me authserver.Me
			if err := json.NewDecoder(resp.Body).Decode(&me); err != nil {
				return nil, err
			}
			return me.Repos, nil
		})
}

// reposWorkflow is the agent pattern: call the tool; on "unauthorized" launch the
// "oauth" sub-workflow with a callback and wait in awaiting_auth; the callback
// goes back to start, where the tool runs again.
func reposWorkflow(m *oauthflow.Module, tool *oauthflow.Tool) *oauthflow.Workflow {
	return reposWorkflowWith(tool, oauthflow.OAuthWorkflowArgs{Provider: "demo"})
}

// reposWorkflowWith is reposWorkflow launching its sign-in with args.
func reposWorkflowWith(tool *oauthflow.Tool, args oauthflow.OAuthWorkflowArgs) *oauthflow.Workflow {
	return &oauthflow.Workflow{
		Name:   "repos",
		States: []string{oauthflow.StateStart, oauthflow.StateAwaitingAuth, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "listRepos", From: oauthflow.StateStart, To: oauthflow.StateEnd,
				Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
					res, err := tool.Call(ctx, oauthflow.ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID}, json.RawMessage(`{}`))
					if err != nil {
						return err
					}
					if _, unauthorized := oauthflow.UnauthorizedResult(res); unauthorized {
						tc.GoTo(oauthflow.StateAwaitingAuth)
						_, err := tc.Launch(ctx, oauthflow.OAuthWorkflowName, args,
							oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "authCompleted"}})
						return err
					}
					return tc.SetResult(json.RawMessage(res))
				}},
			{Name: "authCompleted", From: oauthflow.StateAwaitingAuth, To: oauthflow.StateStart, Wait: true,
				Do: func(_ context.Context, tc *oauthflow.TransitionContext) error {
					var child oauthflow.ChildResult
					if err := tc.DecodeInput(&child); err != nil {
						return err
					}
					if child.Status != oauthflow.RunCompleted {
						tc.GoTo(oauthflow.StateEnd)
						return tc.SetResult(map[string]string{"error": "sign-in failed"})
					}
					return nil
				}},
		},
	}
}

func TestConsumerWorkflowResumesAfterSignIn(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{replicas: 2})
	for _, rep := range env.replicas {
		require.NoError(t, rep.mod.Engine.Register(reposWorkflow(rep.mod, listReposTool(rep.mod, env.as.APIURL()))))
	}
	parent, err := env.mod(0).Engine.Launch(context.Background(), "alice", "repos", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	assert.Equal(t, oauthflow.StateAwaitingAuth, parent.State, "no token: the parent waits for sign-in")
	assert.Equal(t, oauthflow.RunWaiting, parent.Status)
	require.Len(t, parent.Children, 1)
	child := env.run(parent.Children[0])
	assert.Equal(t, parent.ID, child.ParentID)
	assert.Equal(t, "inline", child.Options.Show)
	doc := env.prompt(child.ID)
	assert.Equal(t, oauthflow.PromptPending, doc.Status)

	// The user signs in; the redirect lands on the other replica.
	status, _, _ := get(t, env.consent(doc.AuthURL, 1))
	require.Equal(t, http.StatusOK, status)

	parent = env.run(parent.ID)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status, "the callback resumed the parent and the tool succeeded")
	var repos []authserver.Repo
	require.NoError(t, json.Unmarshal(parent.Result, &repos))
	assert.NotEmpty(t, repos)
	assert.EqualValues(t, 1, env.as.Stats().APICalls, "without a token nothing is sent; after sign-in one call")
}

func TestConsumerWorkflowHearsFailedSignIn(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	require.NoError(t, m.Engine.Register(reposWorkflow(m, listReposTool(m, env.as.APIURL()))))
	parent, err := m.Engine.Launch(context.Background(), "alice", "repos", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	doc := env.prompt(parent.Children[0])
	env.as.FailNext(authserver.Failure{Error: "invalid_grant"})
	status, _, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusBadRequest, status)
	parent = env.run(parent.ID)
	assert.Equal(t, oauthflow.RunCompleted, parent.Status)
	assert.JSONEq(t, `{"error":"sign-in failed"}`, string(parent.Result), "the parent heard status failed")
	assert.Equal(t, oauthflow.PromptError, env.prompt(parent.Children[0]).Status)
}
