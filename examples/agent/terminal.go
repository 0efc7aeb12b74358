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

// runTerminal runs the consumer workflow for user without a browser page: when
// the run waits for sign-in it prints what the user must do, waits until the run
// has ended (or ctx ends), and prints the repositories.
//
// A provider that offers the device grant gets a sign-in with a code: the user
// opens the printed address on any device (a phone will do) and enters the
// code, while the Module's worker polls the provider until the user has acted.
// Any other provider gets a sign-in link, and the server must be serving
// meanwhile: the link leads to the provider, whose redirect lands on the
// frontend page /oauth/callback, which completes the sign-in through POST
// /api/v1/oauth/complete, or without script through its form to the API
// callback. Either way the engine then resumes the run.
func runTerminal(ctx context.Context, a *app, user string, out io.Writer) error {
	grant := ""
	if a.device {
		grant = oauthflow.GrantDevice
	}
	run, err := a.launch(ctx, user, grant)
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
// (the code or the link first, then why the sign-in was not completed).
func (a *app) reportPrompt(ctx context.Context, run *oauthflow.Run, last string, out io.Writer) (string, error) {
	v, err := a.view(ctx, run)
	if err != nil || v.Prompt == nil {
		return last, err
	}
	now := v.Prompt.State + v.Prompt.UserCode + "/" + v.Prompt.Status + "/" + v.Prompt.Message
	if now == last {
		return last, nil
	}
	switch {
	case v.Prompt.Status == oauthflow.PromptPending && v.Prompt.UserCode != "":
		printCode(out, v.ProviderName, v.Prompt)
	case v.Prompt.Status == oauthflow.PromptPending:
		fmt.Fprintf(out, "The agent needs your %s account to list your repositories. Sign in here:\n\n  %s\n\n"+
			"Waiting for the sign-in to complete (Ctrl-C to stop)…\n", v.ProviderName, v.Prompt.AuthURL)
	case v.Prompt.Status == oauthflow.PromptError:
		fmt.Fprintf(out, "Sign-in not completed: %s\n", v.Prompt.Message)
		return now, errSignInNotCompleted
	}
	return now, nil
}

// printCode prints a device sign-in's prompt: the verification URI and the user
// code exactly as the provider gave them, and the complete URI, which carries
// the code, when there is one. The library has refused a code with a control
// character, and an address that is not an http(s) URL, before they get here.
func printCode(out io.Writer, provider string, p *oauthflow.OAuthPromptDocument) {
	fmt.Fprintf(out, "The agent needs your %s account to list your repositories. On any device, open\n\n  %s\n\n"+
		"and enter the code\n\n  %s\n\n", provider, p.VerificationURI, p.UserCode)
	if p.VerificationURIComplete != "" {
		fmt.Fprintf(out, "or open this address, which carries the code:\n\n  %s\n\n", p.VerificationURIComplete)
	}
	fmt.Fprintf(out, "The code expires in %s. Waiting for you to approve (Ctrl-C to stop)…\n",
		time.Until(time.UnixMilli(p.ExpiresAt)).Round(time.Second))
}

// errSignInNotCompleted ends the terminal mode (and the program, non-zero)
// when the sign-in was not completed (a denial, a code that expired).
var errSignInNotCompleted = errors.New("the sign-in was not completed")

func printResult(ctx context.Context, a *app, run *oauthflow.Run, out io.Writer) error {
	v, err := a.view(ctx, run)
	if err != nil {
		return err
	}
	switch {
	case v.Status == oauthflow.RunFailed:
		return fmt.Errorf("the run ended without repositories: %s", v.Error)
	case v.Error != "": // the sign-in ended without a token, and the run with it
		fmt.Fprintln(out, v.Error)
		return errSignInNotCompleted
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
