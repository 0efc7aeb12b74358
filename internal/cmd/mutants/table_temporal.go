package main

// The mutants of the Temporal integration, a module of its own (temporal/):
// the runner runs their tests in that module.

// temporalActivitiesMutants guards the code of temporal/activities.go.
func temporalActivitiesMutants() []mutant {
	return []mutant{
		{
			Name: "temporal/exchange-any-workflow",
			File: "temporal/activities.go",
			Pkg:  "./temporal",
			Old:  "\tcase st.Session == nil || st.Session.WorkflowID != activity.GetInfo(ctx).WorkflowExecution.ID:\n",
			New:  "\tcase st.Session == nil:\n",
			Run:  "^(TestAnswerForAnotherWorkflowIsRefused)$",
			Why:  "an answer stashed for another workflow's sign-in is refused, not exchanged for this one",
		},
		{
			Name: "temporal/code-in-history",
			File: "temporal/activities.go",
			Pkg:  "./temporal",
			Old:  "\tout := exchangeOutcome{Connected: true}\n",
			New:  "\tout := exchangeOutcome{Connected: true, Message: st.Answer.Code}\n",
			Run:  "^(TestAgentSignsInAndResumes)$",
			Why:  "the authorization code never enters a workflow's history (the activity's result, the update's, the workflow's)",
		},
	}
}

// temporalDeviceMutants guards the code of temporal/device.go.
func temporalDeviceMutants() []mutant {
	return []mutant{
		{
			Name: "temporal/device-slow-down-ignored",
			File: "temporal/device.go",
			Pkg:  "./temporal",
			Old:  "\t\t\tinterval = min(interval+slowDownStep, maxDeviceInterval)\n",
			New:  "\t\t\tinterval = min(interval, maxDeviceInterval)\n",
			Run:  "^(TestDeviceSignInSlowsDownAndSurvivesARestart)$",
			Why:  "a slow_down lengthens the device sign-in's interval by 5 seconds for good (RFC 8628 §3.5)",
		},
		{
			Name: "temporal/device-token-in-history",
			File: "temporal/device.go",
			Pkg:  "./temporal",
			Old:  "\treturn devicePoll{Status: pollConnected, Account: ts.Account}, nil\n",
			New:  "\treturn devicePoll{Status: pollConnected, Account: ts.AccessToken}, nil\n",
			Run:  "^(TestDeviceSignInSlowsDownAndSurvivesARestart)$",
			Why:  "the device grant's tokens never enter the workflow's history (the poll's result)",
		},
		{
			Name: "temporal/device-poll-any-workflow",
			File: "temporal/device.go",
			Pkg:  "./temporal",
			Old:  "\tcase d.WorkflowID != activity.GetInfo(ctx).WorkflowExecution.ID:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestDevicePollRefusesAnotherWorkflowsCode)$",
			Why:  "a poll given another workflow's device code does not send it to the server",
		},
	}
}

// temporalOwnerMutants guards the code of temporal/owner.go.
func temporalOwnerMutants() []mutant {
	return []mutant{
		{
			Name: "temporal/undelivered-answer-kept",
			File: "temporal/owner.go",
			Pkg:  "./temporal",
			Old:  "\t\tst.drop(ctx, handle) // refused before it was redeemed, or never delivered\n",
			New:  "\t\t_ = handle\n",
			Run:  "^(TestCallbackForAWorkflowThatIsGone)$",
			Why:  "an answer no workflow took is removed from the store at once, not left sealed until it lapses",
		},
	}
}

// temporalSignInMutants guards the code of temporal/signin.go.
func temporalSignInMutants() []mutant {
	return []mutant{
		{
			Name: "temporal/update-any-handle",
			File: "temporal/signin.go",
			Pkg:  "./temporal",
			Old:  "\tif !validHandle(req.Handle) {\n",
			New:  "\tif false {\n",
			Run:  "^(TestSignInRefusesUpdatesItCannotTake)$",
			Why:  "the complete update's validator refuses a malformed handle before anything enters the history",
		},
		{
			Name: "temporal/update-while-not-waiting",
			File: "temporal/signin.go",
			Pkg:  "./temporal",
			Old:  "\tif !st.waiting() {\n",
			New:  "\tif false {\n",
			Run:  "^(TestSignInRefusesUpdatesItCannotTake)$",
			Why:  "a sign-in exchanging one answer (or no longer waiting) refuses another: one exchange per sign-in",
		},
		{
			Name: "temporal/replay-breaks",
			File: "temporal/signin.go",
			Pkg:  "./temporal",
			Old:  "\tvar built builtSignIn\n",
			New:  "\t_ = workflow.Sleep(ctx, time.Millisecond)\n\tvar built builtSignIn\n",
			Run:  "^(TestRecordedHistoriesReplay)$",
			Why:  "a change to SignIn that sign-ins already running cannot replay fails against the recorded histories",
		},
	}
}

// temporalStashMutants guards the code of temporal/stash.go.
func temporalStashMutants() []mutant {
	return []mutant{
		{
			Name: "temporal/stash-redeemed-twice",
			File: "temporal/stash.go",
			Pkg:  "./temporal",
			Old:  "\treturn s.open(ctx, handle, v, s.kv.GetDel)\n",
			New:  "\treturn s.open(ctx, handle, v, s.kv.Get)\n",
			Run:  "^(TestStashRedeemsOnce|TestAnswerForAnotherWorkflowIsRefused|TestExchangeRetryFindsTheAnswerGone)$",
			Why:  "a stashed answer is taken once (GETDEL): a retried activity finds it gone and cannot exchange the code again",
		},
		{
			Name: "temporal/stash-plain",
			File: "temporal/stash.go",
			Pkg:  "./temporal",
			Old:  "\tif err := s.kv.Set(ctx, key, s.ring.Seal(b, key), s.ttl); err != nil {\n",
			New:  "\tif err := s.kv.Set(ctx, key, b, s.ttl); err != nil {\n",
			Run:  "^(TestStashRedeemsOnce)$",
			Why:  "a stashed code and verifier are sealed at rest with the module's ring when its records are",
		},
	}
}
