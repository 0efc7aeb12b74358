package main

// durableGuards are the guards of the completions that must outlive their
// instance's Close and a store blip (issue 31), and of two guards no test
// noticed before (issue 38): a device code's lifetime cap, and a finishing
// flight's removal of its own map entry only.
func durableGuards() []mutant {
	return []mutant{
		{
			Name: "durable/close-silent-on-unwritten-rotation",
			File: "module.go",
			Old:  "\terr := m.Tokens.refresher.unwrittenErr()\n",
			New:  "\tvar err error\n",
			Run:  "^(TestCloseReportsARotatedTokenLeftUnwritten)$",
			Why:  "Close says which connections' rotated refresh tokens only this process holds, instead of nil before an exit loses them",
		},
		{
			Name: "durable/close-reports-what-rotated-nothing",
			File: "refresh.go",
			Old:  "if !w.unconfirmed && w.rotated() {",
			New:  "if !w.unconfirmed {",
			Run:  "^(TestCloseReportsARotatedTokenLeftUnwritten)$",
			Why:  "a kept write that rotated nothing loses nothing (the stored refresh token works): Close does not cry wolf",
		},
		{
			Name: "durable/signin-write-not-retried",
			File: "signin.go",
			Old:  "\t\tif err == nil || !errors.Is(err, ErrStoreUnavailable) {\n",
			New:  "\t\tif true {\n",
			Run:  "^(TestSignInTokensSurviveAStoreBlip|TestDeviceApprovalSurvivesAStoreBlip)$",
			Why:  "a store blip at a sign-in's token write (the code spent) is tried again, not the tokens dropped",
		},
		{
			Name: "durable/signin-write-retried-past-its-half",
			File: "signin.go",
			Old:  "ctx, cancel := context.WithTimeout(ctx, left/2)",
			New:  "ctx, cancel := context.WithCancel(ctx)",
			Run:  "^(TestSignInTokensWriteGivesUpWithinTheCompletion)$",
			Why:  "the token write's retries leave the completion time to end the run and its prompt honestly",
		},
		{
			Name: "durable/device-poll-dies-with-close",
			File: "oauthworkflow.go",
			Old:  "\tctx, cancel := o.serverOwned(ctx)\n\tdefer cancel()\n\tr, err := o.fireIfWaiting(ctx, runID, transitionPollDevice)",
			New:  "\tr, err := o.fireIfWaiting(ctx, runID, transitionPollDevice)",
			Run:  "^(TestDeviceApprovalOutlivesClose)$",
			Why:  "a device poll the provider answered with tokens stores them, ends the run and its prompt, though Close stops the worker",
		},
		{
			Name: "durable/device-lifetime-uncapped",
			File: "oauthworkflow.go",
			Old:  "life = time.Duration(min(a.ExpiresIn, int64(maxDeviceLifetime/time.Second))) * time.Second",
			New:  "life = time.Duration(a.ExpiresIn) * time.Second",
			Run:  "^(TestDeviceSignInLifetimeCappedAtAnHour)$",
			Why:  "a device code is polled for an hour at most, whatever expires_in the server names",
		},
		{
			Name: "durable/flight-deletes-newer-entry",
			File: "internal/flight/flight.go",
			Pkg:  "./internal/flight",
			Old:  "\t\tif g.calls[key] == f {\n\t\t\tdelete(g.calls, key)\n\t\t}\n",
			New:  "\t\tdelete(g.calls, key)\n",
			Run:  "^(TestFlightEndingLeavesANewerCallAlone)$",
			Why:  "a call that published early and ends later removes only its own entry, not a newer call's for the key",
		},
	}
}
