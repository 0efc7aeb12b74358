package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	oauthtemporal "github.com/oauthflow/oauthflow/temporal"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// The agent: a workflow that calls one tool, the demo provider's API as its
// user. The first call finds no token; the workflow signs the user in and
// calls it again.

const (
	agentWorkflowName = "example.Agent"
	listReposName     = "example.ListRepos"
)

// registerAgent registers the agent's workflow and its tool on w.
func registerAgent(w worker.Registry, t *tool) {
	w.RegisterWorkflowWithOptions(agentWorkflow, workflow.RegisterOptions{Name: agentWorkflowName})
	w.RegisterActivityWithOptions(t.listRepos, activity.RegisterOptions{Name: listReposName})
}

// agentWorkflow lists userID's repositories, signing the user in when the
// tool says the user must.
func agentWorkflow(ctx workflow.Context, userID string) (string, error) {
	ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 30 * time.Second})
	var answer string
	err := oauthtemporal.CallWithSignIn(ctx, userID, func(ctx workflow.Context) error {
		return workflow.ExecuteActivity(ctx, listReposName, userID).Get(ctx, &answer)
	})
	return answer, err
}

// tool is the agent's tool: the provider's API, called with the user's token.
type tool struct {
	integ    *oauthtemporal.Integration
	provider string
	api      string
}

// listRepos calls the API as userID and says what it answered. Without a
// token it returns oauthtemporal.Unauthorized, which the workflow acts on.
func (t *tool) listRepos(ctx context.Context, userID string) (string, error) {
	c, err := t.integ.Client(ctx, userID, t.provider)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, t.api, nil)
	if err != nil {
		return "", err
	}
	resp, err := c.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the API answered %s", resp.Status)
	}
	var body struct {
		User  string `json:"user"`
		Repos []struct {
			Name string `json:"name"`
		} `json:"repos"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&body); err != nil {
		return "", err
	}
	names := make([]string, len(body.Repos))
	for i, r := range body.Repos {
		names[i] = r.Name
	}
	return fmt.Sprintf("%s's repositories: %s", body.User, strings.Join(names, ", ")), nil
}
