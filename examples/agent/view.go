package main

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/oauthflow/oauthflow"
)

// runView is what the page shows of a run: its status and state, the sign-in
// prompt of its "oauth" child while it waits in awaiting_auth, and the
// repositories once it has them. It carries no token, no run data and no
// arguments beyond the provider.
type runView struct {
	ID           string                         `json:"id"`
	Status       string                         `json:"status"` // running | waiting | completed | failed
	State        string                         `json:"state"`  // start | awaiting_auth | end
	Provider     string                         `json:"provider"`
	ProviderName string                         `json:"providerName"`
	Child        *childView                     `json:"child,omitempty"`
	Prompt       *oauthflow.OAuthPromptDocument `json:"prompt,omitempty"`
	Repos        []repo                         `json:"repos,omitempty"`
	Error        string                         `json:"error,omitempty"`
}

// childView names the "oauth" child run and how to show it ("inline": inside this view).
type childView struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Show   string `json:"show"`
}

func (a *app) view(ctx context.Context, run *oauthflow.Run) (*runView, error) {
	v := &runView{ID: run.ID, Status: run.Status, State: run.State, Provider: a.provider,
		ProviderName: a.providerName, Error: run.Error}
	if run.Status == oauthflow.RunCompleted && len(run.Result) > 0 {
		var res reposResult
		if err := json.Unmarshal(run.Result, &res); err != nil {
			return nil, err
		}
		v.Repos, v.Error = res.Repos, res.Error
	}
	if run.State != oauthflow.StateAwaitingAuth || len(run.Children) == 0 {
		return v, nil
	}
	child, err := a.mod.Engine.Get(ctx, run.Children[len(run.Children)-1])
	if err != nil {
		return nil, err
	}
	v.Child = &childView{ID: child.ID, Status: child.Status, Show: child.Options.Show}
	var prompt oauthflow.OAuthPromptDocument
	switch err := a.mod.Engine.Document(ctx, child.ID, oauthflow.PromptDocumentName, &prompt); {
	case err == nil:
		v.Prompt = &prompt
	case !errors.Is(err, oauthflow.ErrNotFound):
		return nil, err
	}
	return v, nil
}
