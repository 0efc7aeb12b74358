package main

// edges are the guards of issue 21: nothing lost at the edges.
func edges() []mutant {
	return []mutant{
		{
			Name: "edges/reseal-is-newer",
			File: "refresh.go",
			Old:  "\t\tcase !w.sameTokens(r.s.plainOf(cur, r.key)):\n",
			New:  "\t\tcase true:\n",
			Why:  "a record re-sealed by Reencrypt mid-refresh is not newer: the rotated refresh token is written",
			Run:  "TestRefreshSurvivesReencrypt",
		},
		{
			Name: "edges/gone-not-revoked",
			File: "refresh.go",
			Old:  "\tr.s.revoke(ctx, r.userID, r.providerID, t)\n",
			New:  "",
			Why:  "a refresh that finds its record deleted by a disconnect revokes the tokens it got",
			Run:  "TestDisconnectDuringRefreshLeavesNothingLive",
		},
		{
			Name: "edges/disconnect-blind-delete",
			File: "tokenstore.go",
			Old:  "deleted, err := s.kv.CompareAndDelete(ctx, key, raw)",
			New:  "deleted, err := true, s.kv.Del(ctx, key)",
			Why:  "a disconnect deletes only the record it read and revokes, so a refresh written in between is revoked too",
			Run:  "TestDisconnectRevokesTheRecordItDeletes",
		},
		{
			Name: "edges/owed-after-save",
			File: "engine.go",
			Old:  "\tif err := e.owe(ctx, r); err != nil {\n\t\treturn nil, err\n\t}\n",
			New:  "",
			Why:  "a child's delivery is owed before its end is saved, so a crash after the save leaves it to the worker",
			Run:  "TestChildResultSurvivesACrashAfterItsEnd",
		},
		{
			Name: "edges/owe-failure-ignored",
			File: "engine.go",
			Old:  "\tif err := e.owe(ctx, r); err != nil {\n\t\treturn nil, err\n\t}\n",
			New:  "\t_ = e.owe(ctx, r)\n",
			Why:  "a child's end that cannot be owed to its parent is not saved",
			Run:  "TestChildResultSurvivesACrashAfterItsEnd",
		},
		{
			Name: "edges/deliver-unsaved-end",
			File: "delivery.go",
			Old:  "\tif r.State != StateEnd {\n\t\t// Owed",
			New:  "\tif false {\n\t\t// Owed",
			Why:  "a delivery owed for an end whose save failed delivers nothing until the end is saved",
			Run:  "TestDeliveryWaitsForTheChildsSavedEnd",
		},
		{
			Name: "edges/unsaved-run-tidied",
			File: "engine.go",
			Old:  "\tif err != nil { // a run not saved keeps its due work\n",
			New:  "\tif false {\n",
			Why:  "a run whose last save failed keeps its due work (its sign-in's lapse)",
			Run:  "TestUnsavedEndKeepsItsDueWork",
		},
		{
			Name: "edges/fence-blind-write",
			File: "refresh.go",
			Old:  "ok, err := r.s.kv.CompareAndSwap(ctx, r.key, w.old, w.new, r.s.ttl(w.t))",
			New:  "ok, err := true, r.s.kv.Set(ctx, r.key, w.new, r.s.ttl(w.t))",
			Why:  "a holder stalled past its lease between its lease check and its write cannot overwrite the next holder's write",
			Run:  "TestFencedWriteStalledPastItsLease",
		},
		{
			Name: "edges/unknown-provider-asks-sign-in",
			File: "tokenstore.go",
			Old:  "if errors.Is(err, ErrNoToken) && !s.reg.knows(providerID) {",
			New:  "if false {",
			Why:  "a token read for a provider nobody registered is ErrUnknownProvider, not a sign-in that cannot work",
			Run:  "TestUnknownProviderIsNotASignIn",
		},
		{
			Name: "edges/unknown-provider-resolvable-missed",
			File: "registry.go",
			Old:  "return ok || r.resolved[id] != nil || r.resolvable(id)",
			New:  "return ok || r.resolved[id] != nil",
			Why:  "an MCP server's ID (a resolver's prefix) never connected is still ErrNoToken, which connects and signs in",
			Pkg:  "./mcpauth",
		},
	}
}
