package oauthflow

import (
	"context"
	"encoding/json"
)

// maxToolSignIns bounds the sign-ins one ToolWorkflow run asks for: a tool
// still unauthorized after as many completed sign-ins will not be helped by
// another.
const maxToolSignIns = 2

// ToolWorkflow is the agent pattern as a ready workflow named name: it calls
// tool with the run's arguments; when the tool answers "unauthorized" it runs
// the "oauth" sign-in as a child (for provider, or the provider the answer
// names, asking for the scopes the answer asks for) and calls the tool again
// once the sign-in completes. The run's result is the tool's answer, or
// {"error":"sign-in failed"} when the user did not sign in, or
// {"error":"unauthorized",...} when the tool still refuses after two sign-ins.
// Register it on every instance's Engine and Launch it for a user.
func ToolWorkflow(name string, tool *Tool, provider string) *Workflow {
	return &Workflow{
		Name:   name,
		States: []string{StateStart, StateAwaitingAuth, StateEnd},
		Transitions: []Transition{
			{Name: "call", From: StateStart, To: StateEnd,
				Do: func(ctx context.Context, tc *TransitionContext) error {
					args := tc.Run.Args
					if len(args) == 0 || string(args) == "null" {
						args = json.RawMessage(`{}`)
					}
					res, err := tool.Call(ctx, ToolContext{UserID: tc.Run.UserID, RunID: tc.Run.ID}, args)
					if err != nil {
						return err
					}
					u, unauthorized := UnauthorizedResult(res)
					if !unauthorized || len(tc.Run.Children) >= maxToolSignIns {
						return tc.SetResult(res)
					}
					p := provider
					if u.Provider != "" {
						p = u.Provider
					}
					tc.GoTo(StateAwaitingAuth)
					_, err = tc.Launch(ctx, OAuthWorkflowName, OAuthWorkflowArgs{Provider: p, Scopes: u.Scopes},
						RunOptions{Callback: &Callback{Transition: "signedIn"}})
					return err
				}},
			{Name: "signedIn", From: StateAwaitingAuth, To: StateStart, Wait: true,
				Do: func(_ context.Context, tc *TransitionContext) error {
					var child ChildResult
					if err := tc.DecodeInput(&child); err != nil {
						return err
					}
					if child.Status != RunCompleted {
						tc.GoTo(StateEnd)
						return tc.SetResult(map[string]string{"error": "sign-in failed"})
					}
					return nil
				}},
		},
	}
}
