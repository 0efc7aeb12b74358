package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/oauthflow/oauthflow"
)

// The consumer workflow: its name, its transitions and its arguments.
const (
	reposWorkflowName = "list_repos"
	transitionList    = "listRepos"
	transitionAuthed  = "authCompleted"
)

// repo is one repository as the run's result shows it (GitHub's field names).
type repo struct {
	Name        string `json:"name"`
	FullName    string `json:"full_name"`
	Private     bool   `json:"private"`
	Description string `json:"description"`
}

// runArgs are the workflow's arguments: whose repositories to list, and how
// the user signs in when there is no token ("" through a browser,
// oauthflow.GrantDevice with a code typed on any device).
type runArgs struct {
	Provider string `json:"provider"`
	Grant    string `json:"grant,omitempty"`
}

// reposArgs are the tool's arguments.
type reposArgs struct {
	Provider string `json:"provider"`
}

// reposResult is what a run of the workflow returns: the repositories, or why
// there are none (the user did not complete the sign-in).
type reposResult struct {
	Repos []repo `json:"repos"`
	Error string `json:"error,omitempty"`
}

// repoAPI is where a provider lists the signed-in user's repositories.
type repoAPI struct {
	URL    string
	Header http.Header
	Decode func(body io.Reader) ([]repo, error)
}

// demoRepoAPI is the demo provider's API, whose answer carries the repositories.
func demoRepoAPI(url string) repoAPI {
	return repoAPI{URL: url, Decode: func(body io.Reader) ([]repo, error) {
		var me struct {
			Repos []repo `json:"repos"`
		}
		if err := json.NewDecoder(body).Decode(&me); err != nil {
			return nil, err
		}
		return me.Repos, nil
	}}
}

// githubRepoAPI is GitHub's GET /user/repos.
func githubRepoAPI() repoAPI {
	return repoAPI{
		URL: "https://api.github.com/user/repos?per_page=100&sort=updated",
		Header: http.Header{"Accept": {"application/vnd.github+json"}, "X-Github-Api-Version": {"2022-11-28"},
			"User-Agent": {"oauthflow-agent-example"}},
		Decode: func(body io.Reader) ([]repo, error) {
			var repos []repo
			err := json.NewDecoder(body).Decode(&repos) // decoded first: a return's operands have no set order
			return repos, err
		},
	}
}

// listReposTool calls the provider's API with the user's token. It returns the
// token store's error as it is: the Tool turns ErrNoToken into
// {"error":"unauthorized"}, the signal the workflow waits for sign-in on.
func listReposTool(m *oauthflow.Module, apis map[string]repoAPI) *oauthflow.Tool {
	schema := oauthflow.Schema{Type: "object", Required: []string{"provider"},
		Properties: map[string]oauthflow.Property{"provider": {Type: "string", Description: "provider ID"}}}
	return oauthflow.NewTool("list_repos", "Lists the signed-in user's repositories.", schema,
		func(ctx context.Context, tc oauthflow.ToolContext, args reposArgs) (any, error) {
			api, ok := apis[args.Provider]
			if !ok {
				return nil, fmt.Errorf("%w: no repository API for %q", oauthflow.ErrUnknownProvider, args.Provider)
			}
			return fetchRepos(ctx, m.Tokens, tc.UserID, args.Provider, api)
		})
}

func fetchRepos(ctx context.Context, tokens *oauthflow.TokenStore, user, provider string, api repoAPI) ([]repo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, api.URL, nil)
	if err != nil {
		return nil, err
	}
	for k, v := range api.Header {
		req.Header[k] = v
	}
	resp, err := tokens.Client(ctx, user, provider).Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		// The provider no longer honours the stored token (revoked, or a demo
		// server that restarted): forget it, so that the user signs in again.
		if err := tokens.DeleteTokens(ctx, user, provider); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("%w: the API refused the token", oauthflow.ErrNoToken)
	case resp.StatusCode != http.StatusOK:
		return nil, &oauthflow.FlowError{Message: "The repository API answered " + resp.Status + ".",
			Err: fmt.Errorf("repository API: HTTP %d", resp.StatusCode)}
	}
	return api.Decode(io.LimitReader(resp.Body, 4<<20))
}

// reposWorkflow is the agent pattern: call the tool; on "unauthorized" launch
// the "oauth" workflow as a child, with the run's grant and a callback, and wait
// in awaiting_auth; the engine fires the callback once the user has signed in,
// which goes back to start, where the tool runs again, now with a token.
func reposWorkflow(m *oauthflow.Module, tool *oauthflow.Tool) *oauthflow.Workflow {
	return &oauthflow.Workflow{
		Name:   reposWorkflowName,
		States: []string{oauthflow.StateStart, oauthflow.StateAwaitingAuth, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: transitionList, From: oauthflow.StateStart, To: oauthflow.StateEnd, Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
				return listRepos(ctx, tc, tool)
			}},
			{Name: transitionAuthed, From: oauthflow.StateAwaitingAuth, To: oauthflow.StateStart, Wait: true,
				Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
					return signInDone(ctx, m.Engine, tc)
				}},
		},
	}
}

func listRepos(ctx context.Context, tc *oauthflow.TransitionContext, tool *oauthflow.Tool) error {
	var args runArgs
	if err := tc.DecodeArgs(&args); err != nil {
		return err
	}
	toolArgs, err := json.Marshal(reposArgs{Provider: args.Provider})
	if err != nil {
		return err
	}
	res, err := tool.Call(ctx, oauthflow.ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID}, toolArgs)
	if err != nil {
		return err
	}
	if _, unauthorized := oauthflow.UnauthorizedResult(res); unauthorized {
		tc.GoTo(oauthflow.StateAwaitingAuth)
		_, err := tc.Launch(ctx, oauthflow.OAuthWorkflowName, oauthflow.OAuthWorkflowArgs{Provider: args.Provider, Grant: args.Grant},
			oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: transitionAuthed}})
		return err
	}
	var repos []repo
	if err := json.Unmarshal(res, &repos); err != nil {
		return err
	}
	return tc.SetResult(reposResult{Repos: repos})
}

// signInDone hears the child's end: on success the run goes back to start (the
// tool runs again); otherwise it ends with the sign-in's own message.
func signInDone(ctx context.Context, engine *oauthflow.Engine, tc *oauthflow.TransitionContext) error {
	var child oauthflow.ChildResult
	if err := tc.DecodeInput(&child); err != nil {
		return err
	}
	if child.Status == oauthflow.RunCompleted {
		return nil
	}
	msg := "Sign-in was not completed."
	var prompt oauthflow.OAuthPromptDocument
	if err := engine.Document(ctx, child.RunID, oauthflow.PromptDocumentName, &prompt); err == nil && prompt.Message != "" {
		msg = "Sign-in was not completed: " + prompt.Message
	} else if err != nil && !errors.Is(err, oauthflow.ErrNotFound) {
		return err
	}
	tc.GoTo(oauthflow.StateEnd)
	return tc.SetResult(reposResult{Error: msg})
}
