package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/oauthflow/oauthflow"
)

// terminalPoll is how often the terminal mode reads the run while it waits.
const terminalPoll = 500 * time.Millisecond

// runTerminal runs the consumer workflow for user without a browser page: it
// prints the sign-in link when the run waits for sign-in, waits until the run
// has ended (or ctx ends), and prints the repositories. The server must be
// serving a meanwhile: the link leads to the provider, whose redirect lands on
// the frontend page /oauth/callback, which completes the sign-in through POST
// /api/v1/oauth/complete, or without script through its form to the API
// callback; the engine then resumes the run.
func runTerminal(ctx context.Context, a *app, user string, out io.Writer) error {
	run, err := a.launch(ctx, user)
	if err != nil && run == nil {
		return err
	}
	tick := time.NewTicker(terminalPoll)
	defer tick.Stop()
	prompt := ""
	for !settled(run.Status) {
		if prompt, err = a.reportPrompt(ctx, run, prompt, out); err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if run, err = a.mod.Engine.Get(ctx, run.ID); err != nil {
			return err
		}
	}
	return printResult(ctx, a, run, out)
}

func settled(status string) bool {
	return status == oauthflow.RunCompleted || status == oauthflow.RunFailed
}

// reportPrompt prints what changed in the run's sign-in prompt since last
// (the link first, then an error the user can retry the link after).
func (a *app) reportPrompt(ctx context.Context, run *oauthflow.Run, last string, out io.Writer) (string, error) {
	v, err := a.view(ctx, run)
	if err != nil || v.Prompt == nil {
		return last, err
	}
	now := v.Prompt.State + "/" + v.Prompt.Status + "/" + v.Prompt.Message
	if now == last {
		return last, nil
	}
	switch v.Prompt.Status {
	case oauthflow.PromptPending:
		fmt.Fprintf(out, "The agent needs your %s account to list your repositories. Sign in here:\n\n  %s\n\n"+
			"Waiting for the sign-in to complete (Ctrl-C to stop)…\n", v.ProviderName, v.Prompt.AuthURL)
	case oauthflow.PromptError:
		fmt.Fprintf(out, "Sign-in not completed: %s\n", v.Prompt.Message)
		return now, errSignInNotCompleted
	}
	return now, nil
}

// errSignInNotCompleted ends the terminal mode (and the program, non-zero)
// when the provider reports the sign-in was not completed (a denial).
var errSignInNotCompleted = errors.New("the sign-in was not completed")

func printResult(ctx context.Context, a *app, run *oauthflow.Run, out io.Writer) error {
	v, err := a.view(ctx, run)
	if err != nil {
		return err
	}
	if v.Status == oauthflow.RunFailed || v.Error != "" {
		return fmt.Errorf("the run ended without repositories: %s", v.Error)
	}
	fmt.Fprintf(out, "Your %s repositories (%d):\n", v.ProviderName, len(v.Repos))
	for _, r := range v.Repos {
		line := "  " + r.FullName
		if r.Private {
			line += " (private)"
		}
		if r.Description != "" {
			line += " — " + r.Description
		}
		fmt.Fprintln(out, line)
	}
	return nil
}
