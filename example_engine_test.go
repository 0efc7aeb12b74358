package oauthflow_test

import (
	"context"
	"fmt"

	"github.com/oauthflow/oauthflow"
)

// A workflow is a small state machine whose runs live in the store, so any
// instance can take a run further. Here a deletion waits for its user to
// confirm: Launch runs the automatic "ask" and leaves the run waiting; Fire
// runs the waiting "confirm" with the user's answer, and the run ends.
func ExampleEngine_Launch() {
	ctx := context.Background()
	engine := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	err := engine.Register(&oauthflow.Workflow{
		Name:   "delete-repo",
		States: []string{oauthflow.StateStart, "confirming", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "ask", From: oauthflow.StateStart, To: "confirming",
				Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }},
			{Name: "confirm", From: "confirming", To: oauthflow.StateEnd, Wait: true,
				Do: func(_ context.Context, tc *oauthflow.TransitionContext) error {
					var args, answer struct{ Repo string }
					if err := tc.DecodeArgs(&args); err != nil {
						return err
					}
					if err := tc.DecodeInput(&answer); err != nil {
						return err
					}
					return tc.SetResult(map[string]bool{"deleted": answer.Repo == args.Repo})
				}},
		},
	})
	if err != nil {
		panic(err)
	}

	run, err := engine.Launch(ctx, "alice", "delete-repo", map[string]string{"Repo": "demo"}, oauthflow.RunOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.State)

	run, err = engine.Fire(ctx, run.ID, "confirm", map[string]string{"Repo": "demo"}, "alice")
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.State, string(run.Result))
	// Output:
	// waiting confirming
	// completed end {"deleted":true}
}
