package main

// unnoticedGuards are the guards of issue 26: six guards no test noticed.
func unnoticedGuards() []mutant {
	return []mutant{
		{
			Name: "mcp/reglock-plain-del",
			File: "mcpauth/register.go",
			Pkg:  "./mcpauth",
			Old:  "_, _ = c.kv.CompareAndDelete(ctx, lock, owner)",
			New:  "_ = c.kv.Del(ctx, lock)",
			Why:  "an instance whose registration outlived its lock frees only its own lock, not the next holder's",
			Run:  "TestRegistrationLockIsFreedOnlyByItsOwner",
		},
		{
			Name: "runlock/release-plain-del",
			File: "internal/lease/lease.go",
			Old:  "\treturn &kv.Op{Kind: kv.OpCompareAndDelete, Key: l.key, Value: l.owner}\n",
			New:  "\t_ = l.kv.Del(context.Background(), l.key) // mutant: a plain DEL\n\treturn &kv.Op{Kind: kv.OpGet, Key: l.key}\n",
			Run:  "TestRunLockFreedOnlyByItsHolder",
			Why:  "a run hold's release frees the run's lock only while it holds it: a holder that outlived its lease leaves the next holder's lock alone",
		},
		{
			Name: "worker/claim-without-lease",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "w.kv.Claim(ctx, Index, w.now(), Lease, n)",
			New:  "w.kv.Claim(ctx, Index, w.now(), 0, n)",
			Run:  "TestWorkerClaimLeasesTheWork",
			Why:  "a claimed piece of work is leased: no other pass takes it again, and a failing job waits out its lease",
		},
		{
			Name: "reencrypt/reseal-not-fenced",
			File: "encryption.go",
			Old:  "swapped, err := kv.CompareAndSwap(ctx, key, b, ring.Seal(plain, key), ttl)",
			New:  "swapped, err := true, kv.Set(ctx, key, ring.Seal(plain, key), ttl)",
			Run:  "TestReencryptLeavesARecordWrittenMidWalk",
			Why:  "Reencrypt rewrites a record only over the bytes it read: a sign-in or refresh written meanwhile is never overwritten",
		},
		{
			Name: "client/recover-again",
			File: "client.go",
			Old:  "\tdiscard(resp)\n\treturn t.send(req, body, fresh)\n",
			New: "\tdiscard(resp)\n\tif resp, err = t.send(req, body, fresh); err != nil || resp.StatusCode != http.StatusUnauthorized {\n" +
				"\t\treturn resp, err\n\t}\n\treturn t.recover(ctx, req, resp, fresh.access)\n",
			Run: "TestClientRetriesA401Once",
			Why: "a 401 to the retry is the API's answer: the Client refreshes once per request, not until its context ends",
		},
		{
			Name: "pending/superseded-kept",
			File: "refresh.go",
			Old:  "\tif ok && !bytes.Equal(w.old, raw) && !w.sameTokens(open(raw)) {\n",
			New:  "\tif false && ok && !bytes.Equal(w.old, raw) && !w.sameTokens(open(raw)) {\n",
			Run:  "TestKeptTokensGiveWayToANewerSignIn",
			Why:  "tokens kept after a failed write give way to a newer record (a sign-in elsewhere): never served, never written over it",
		},
		{
			Name: "mcp/any-403-asks-sign-in",
			File: "mcpauth/transport.go",
			Pkg:  "./mcpauth",
			Old:  "case resp.StatusCode == http.StatusForbidden && ch.Error == \"insufficient_scope\":",
			New:  "case resp.StatusCode == http.StatusForbidden:",
			Run:  "TestTransportHandsBackTheServersOwnRefusal",
			Why:  "only a 403 insufficient_scope asks for a sign-in: the server's own refusal reaches the caller, not ErrNoToken",
		},

		// The check that every wait in a test has a deadline (internal/layout).
		{
			Name: "waits/bare-receive-passes",
			File: "internal/layout/waits_test.go",
			Pkg:  "./internal/layout",
			Old:  "if n.Op == token.ARROW && !inSelect[n] && !isDeadline(n.X) {",
			New:  "if false && n.Op == token.ARROW && !inSelect[n] && !isDeadline(n.X) {",
			Run:  "TestWaitCheckFlagsBlockingWaits",
			Why:  "the wait check flags a channel receive outside a select",
		},
		{
			Name: "waits/any-select-passes",
			File: "internal/layout/waits_test.go",
			Pkg:  "./internal/layout",
			Old:  "has = has || isDeadline(r.X)",
			New:  "has = true",
			Run:  "TestWaitCheckFlagsBlockingWaits",
			Why:  "the wait check flags a select with no timeout, context or default case",
		},
		{
			Name: "waits/wait-call-passes",
			File: "internal/layout/waits_test.go",
			Pkg:  "./internal/layout",
			Old:  "if isMethodCall(n, \"Wait\") && len(n.Args) == 0 {",
			New:  "if false && isMethodCall(n, \"Wait\") && len(n.Args) == 0 {",
			Run:  "TestWaitCheckFlagsBlockingWaits",
			Why:  "the wait check flags a WaitGroup or Cond Wait() on the test's path",
		},
		{
			Name: "waits/goroutines-checked",
			File: "internal/layout/waits_test.go",
			Pkg:  "./internal/layout",
			Old:  "return !elsewhere[n]",
			New:  "return true",
			Run:  "TestWaitCheckFlagsBlockingWaits",
			Why:  "the wait check leaves out code under go and WaitGroup.Go, whose waits hold up nothing the test does not wait for",
		},
	}
}
