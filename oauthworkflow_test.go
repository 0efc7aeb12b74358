package oauthflow_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// signInChild completes the sign-in the run waits for, as the user's browser.
func signInChild(t *testing.T, env *flowEnv, run *oauthflow.Run) {
	t.Helper()
	require.Equal(t, oauthflow.StateAwaitingAuth, run.State, "the run waits for a sign-in: %s", run.Result)
	doc := env.prompt(run.Children[len(run.Children)-1])
	status, _, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusOK, status)
}

// ToolWorkflow is the agent pattern ready made: the tool's "unauthorized"
// runs a sign-in, after which the tool runs again and its answer is the
// result; a tool still unauthorized after two completed sign-ins ends the
// run with its answer instead of a third.
func TestToolWorkflow(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	m := env.mod(0)
	require.NoError(t, m.Engine.Register(oauthflow.ToolWorkflow("repos", listReposTool(m, env.as.APIURL()), "demo")))
	never := oauthflow.NewTool("never", "Always unauthorized.", oauthflow.Schema{Type: "object"},
		func(context.Context, oauthflow.ToolContext, struct{}) (any, error) { return nil, oauthflow.ErrNoToken })
	require.NoError(t, m.Engine.Register(oauthflow.ToolWorkflow("never", never, "demo")))
	ctx := context.Background()

	run, err := m.Engine.Launch(ctx, "alice", "repos", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	signInChild(t, env, run)
	run = env.run(run.ID)
	require.Equal(t, oauthflow.RunCompleted, run.Status)
	var repos []authserver.Repo
	require.NoError(t, json.Unmarshal(run.Result, &repos))
	assert.NotEmpty(t, repos, "the tool ran again after the sign-in")

	run, err = m.Engine.Launch(ctx, "bob", "never", nil, oauthflow.RunOptions{})
	require.NoError(t, err)
	signInChild(t, env, run)
	signInChild(t, env, env.run(run.ID))
	run = env.run(run.ID)
	assert.Equal(t, oauthflow.RunCompleted, run.Status)
	assert.Len(t, run.Children, 2, "two sign-ins, not a third")
	assert.True(t, oauthflow.IsUnauthorized(run.Result), "%s", run.Result)
}
