package main

// table is the list of mutants, each a bug some test must catch. Old is the
// exact current text (it must occur once in File); when the code moves, the
// run reports the entry stale and it is rewritten here against the new code.
// Pkg "" is the root package, Run "" is every test of Pkg.
func table() []mutant {
	return []mutant{
		// The refresh: in-process single flight, waiters, the shared context.
		{
			Name: "flight/no-single-flight",
			File: "flight.go",
			Old:  "f, running := g.calls[key]\n",
			New:  "f, running := g.calls[key]\n\trunning = false // mutant\n",
			Why:  "concurrent refreshes of one record in one process make one provider call",
		},
		{
			Name: "flight/waiter-ignores-own-ctx",
			File: "flight.go",
			Old: "\tselect {\n\tcase <-f.done:\n\t\treturn f.val, f.err\n" +
				"\tcase <-ctx.Done():\n\t\treturn StoredTokens{}, ctx.Err()\n\t}\n",
			New: "\t<-f.done\n\treturn f.val, f.err\n",
			Why: "a caller waiting on a shared refresh returns when its own context ends",
		},
		{
			Name: "refresh/under-callers-ctx",
			File: "refresh.go",
			Old:  "context.WithTimeout(context.WithoutCancel(ctx), s.refreshTimeout)",
			New:  "context.WithTimeout(ctx, s.refreshTimeout)",
			Why:  "the shared refresh does not die with the context of the caller that started it",
		},
		{
			Name: "refresh/rotation-lost",
			File: "refresh.go",
			Old:  "\tif ts.RefreshToken != \"\" {\n\t\tt.RefreshToken = ts.RefreshToken\n\t}\n",
			New:  "",
			Why:  "a refresh answer with a new refresh token replaces the stored one (rotation)",
		},

		// Dead grants: only invalid_grant, or a code the provider itself declares.
		{
			Name: "grant/every-code-dead",
			File: "oauth.go",
			Old:  "return providerCode(err) == \"invalid_grant\"",
			New:  "return providerCode(err) != \"\"",
			Why:  "only invalid_grant deletes a record; invalid_client (a rotated secret) must not log every user out",
		},
		{
			Name: "grant/every-4xx-dead",
			File: "oauth.go",
			Old:  "return providerCode(err) == \"invalid_grant\"",
			New:  "return providerCode(err) == \"invalid_grant\" || providerStatus(err)/100 == 4",
			Why:  "a 4xx without invalid_grant (429, 400 invalid_request, 401) is not a dead grant",
		},
		{
			Name: "grant/provider-codes-unchecked",
			File: "oauth.go",
			Old:  "return ok && code != \"\" && slices.Contains(dc.DeadGrantCodes(), code)",
			New:  "return code != \"\" || ok && slices.Contains(dc.DeadGrantCodes(), code)",
			Why:  "a provider's own dead-grant codes count only when it lists them (DeadGrantCoder)",
		},
		{
			Name: "grant/provider-codes-ignored",
			File: "oauth.go",
			Pkg:  "./providers", // the root package has no provider that declares codes
			Old:  "return ok && code != \"\" && slices.Contains(dc.DeadGrantCodes(), code)",
			New:  "return false && ok && code != \"\" && slices.Contains(dc.DeadGrantCodes(), code)",
			Run:  "DeadGrant",
			Why:  "a code the provider declares dead (GitHub bad_refresh_token) deletes the record like invalid_grant",
		},

		// Leases: the cross-process refresh lock and the run lock.
		{
			Name: "lease/release-without-owner-check",
			File: "lease.go",
			Old:  "_, _ = l.kv.CompareAndDelete(context.WithoutCancel(ctx), l.key, l.owner)",
			New:  "_ = l.kv.Del(context.WithoutCancel(ctx), l.key)",
			Why:  "a holder whose lease expired does not free the lock its successor now holds",
		},
		{
			Name: "lease/renewal-removed",
			File: "lease.go",
			Old:  "case <-tick.C:",
			New:  "case <-make(chan time.Time): // mutant: never renews",
			Why:  "a refresh slower than the lease keeps its lock, so no other instance refreshes at the same time",
		},
		{
			Name: "engine/run-lock-removed",
			File: "lease.go",
			Old:  "\tif take.ok {\n",
			New:  "\tif true {\n",
			Why:  "fires of one run are serialised (across instances): a transition never runs twice",
		},
		{
			Name: "engine/self-fire-not-refused",
			File: "engine.go",
			Old:  "\tif holds(ctx, id) {\n",
			New:  "\tif false && holds(ctx, id) {\n",
			Why:  "a run that fires itself within its own transition is refused at once, not deadlocked on its own lock",
		},
		{
			Name: "engine/fan-out-unguarded",
			File: "callchain.go",
			Old:  "func (ch *callChain) later(fn func(context.Context)) {\n\tch.mu.Lock()\n\tdefer ch.mu.Unlock()\n",
			New:  "func (ch *callChain) later(fn func(context.Context)) {\n",
			Why:  "children launched from several goroutines of one transition defer their parent's notification safely",
		},

		// Sessions and the KV primitives they and the locks stand on.
		{
			Name: "session/consume-not-single-use",
			File: "session.go",
			Old:  "\t\tread = ss.kv.GetDel\n",
			New:  "\t\tread = ss.kv.Get\n",
			Why:  "a state is consumed once: of concurrent callbacks exactly one completes",
		},
		{
			Name: "kv/memory-compare-and-delete-no-compare",
			File: "kv_memory.go",
			Old:  "\tif _, ok := m.holds(key, value); !ok {\n\t\treturn false, nil\n\t}\n\tdelete(m.m, key)\n",
			New:  "\tdelete(m.m, key)\n",
			Why:  "CompareAndDelete deletes only while the key holds the given value (lock release)",
		},
		{
			Name: "kv/redis-compare-and-delete-no-compare",
			File: "kv_redis.go",
			Old:  "if redis.call(\"GET\", KEYS[1]) == ARGV[1] then return redis.call(\"DEL\", KEYS[1]) end\nreturn 0",
			New:  "return redis.call(\"DEL\", KEYS[1])",
			Why:  "CompareAndDelete deletes only while the key holds the given value (lock release)",
		},

		// The public endpoints.
		{
			Name: "pages/post-message-to-any-origin",
			File: "pages.go",
			Old:  "window.opener.postMessage(result, targets[i]);",
			New:  "window.opener.postMessage(result, \"*\");",
			Why:  "the callback page posts its result (and the state) to its own origin and Config.FrontendOrigins only",
		},
		{
			Name: "cors/any-origin-allowed",
			File: "cors.go",
			Old:  "_, ok := o.set[origin]\n\treturn ok",
			New:  "return origin != \"\"",
			Why:  "POST /complete answers CORS for Config.FrontendOrigins only, never for any origin",
		},
		{
			Name: "handlers/complete-invalid-body-422",
			File: "handlers.go",
			Old:  "return p, http.StatusBadRequest, \"invalid_request\", \"The body is not a valid completion request.\"",
			New:  "return p, http.StatusUnprocessableEntity, \"invalid_request\", \"The body is not a valid completion request.\"",
			Why:  "POST /complete answers a malformed body with 400 invalid_request",
		},
		{
			Name: "handlers/complete-internal-200",
			File: "handlers.go",
			Old:  "status, code = http.StatusInternalServerError, \"internal_error\"",
			New:  "status, code = http.StatusOK, \"internal_error\"",
			Why:  "POST /complete answers an unexpected failure with 500, never a success status",
		},
		{
			Name: "handlers/complete-internal-502",
			File: "handlers.go",
			Old:  "status, code = http.StatusInternalServerError, \"internal_error\"",
			New:  "status, code = http.StatusBadGateway, \"internal_error\"",
			Why:  "POST /complete answers an unexpected failure with 500, not the provider's 502",
		},

		// Fenced refresh writes: a sign-in, a disconnect or a lost lease wins.
		{
			Name: "refresh/write-not-fenced",
			File: "refresh.go",
			Old:  "ok, err := r.s.kv.CompareAndSwap(ctx, r.key, w.old, w.new, r.s.ttl(w.t))",
			New:  "ok, err := true, r.s.kv.Set(ctx, r.key, w.new, r.s.ttl(w.t))",
			Why:  "a refresh writes only through a compare-and-set on the record it read: a sign-in or DeleteTokens in between wins",
		},
		{
			Name: "refresh/dead-grant-delete-not-fenced",
			File: "refresh.go",
			Old:  "deleted, derr := r.s.kv.CompareAndDelete(ctx, r.key, raw)",
			New:  "deleted, derr := true, r.s.kv.Del(ctx, r.key)",
			Why:  "a dead grant deletes the record only while it is still the one refreshed, never a newer sign-in",
		},
		{
			Name: "lease/write-without-holding",
			File: "refresh.go",
			Old:  "\theld, err := l.confirm(ctx)\n\tif err != nil {\n\t\treturn err\n\t}\n\tif !held {\n\t\treturn errLeaseLost\n\t}\n",
			New:  "",
			Why:  "a lease holder whose lock is in other hands never writes",
		},
		{
			Name: "lease/delete-without-holding",
			File: "refresh.go",
			Old:  "\theld, cerr := l.confirm(ctx)\n",
			New:  "\theld, cerr := true, error(nil)\n",
			Why:  "a lease holder whose lock is in other hands never deletes a dead grant: the new holder decides",
		},
		{
			Name: "refresh/other-record-not-current",
			File: "refresh.go",
			Old:  "return !bytes.Equal(raw, seen) && s.now().UnixMilli() < v.expiresAt",
			New:  "return false",
			Why:  "a waiter takes a record another refresh wrote, even one that lives less than the skew, instead of refreshing again",
		},
		{
			Name: "refresh/rotated-write-not-kept",
			File: "refresh.go",
			Old:  "\tr.s.pending.keep(r.key, w)\n\tr.publish(t, nil)\n",
			New:  "\tr.publish(t, nil)\n",
			Why:  "a write that fails after a rotating refresh is kept in the process: the only live refresh token is not lost",
		},
		{
			Name: "refresh/rotated-write-not-retried",
			File: "refresh.go",
			Old:  "\tr.retry(ctx, l, w)\n",
			New:  "",
			Why:  "a write that fails after a rotating refresh is retried within the refresh deadline",
		},
		{
			Name: "refresh/no-early-answer",
			File: "refresh.go",
			Old:  "\tr.publish(t, nil)\n",
			New:  "",
			Why:  "the callers get the refreshed token at once, not after the write's retries",
		},
		{
			Name: "refresh/kept-tokens-not-shared",
			File: "refresh.go",
			Old:  "if pw, ok := r.s.pendingFor(r.key, raw); ok && r.usable(pw.t) {",
			New:  "if pw, ok := r.s.pendingFor(r.key, raw); false && ok && r.usable(pw.t) {",
			Why:  "a caller that comes while a write is retried gets the kept tokens",
		},

		// The keyspace, the public endpoints' state check, the engine's run IDs.
		{
			Name: "keys/hostile-user-id-not-escaped",
			File: "keys.go",
			Old:  "\treturn !reservedSegment(first) && !strings.HasPrefix(userID, escapeMark)\n",
			New:  "\treturn first != \"\" || true\n",
			Why:  "keys of different kinds and users are disjoint for every user ID (\"lock:alice\" reaches no lock of alice's)",
		},
		{
			Name: "handlers/state-format-unchecked",
			File: "handlers.go",
			Old:  "if p.State != \"\" && !issuedState(p.State) {",
			New:  "if false {",
			Why:  "the public endpoints refuse a state not of the issued form before touching the store",
		},
		{
			Name: "engine/run-id-unchecked",
			File: "engine.go",
			Old:  "\tif !issuedRunID(runID) {\n\t\treturn nil, fmt.Errorf(\"%w: %q\", ErrRunNotFound, runID)\n\t}\n\tb, err",
			New:  "\tb, err",
			Why:  "the engine refuses a run ID not of its own form before touching the store",
		},

		// Completion is the server's once the state is consumed.
		{
			Name: "handlers/completion-under-request-ctx",
			File: "handlers.go",
			Old:  "\towned, cancel := m.serverOwned(ctx)\n",
			New:  "\towned, cancel := context.WithCancel(ctx)\n",
			Why:  "a browser that leaves after the provider answered does not lose the sign-in",
		},

		// The background worker: a sign-in nobody finishes lapses on its own.
		{
			Name: "worker/lapse-not-scheduled",
			File: "oauthworkflow.go",
			Old:  "if err := m.work.schedule(ctx, jobLapse, tc.Run.ID, m.now().Add(m.signInTTL)); err != nil {",
			New:  "if err := error(nil); err != nil {",
			Why:  "a sign-in that lapses unused ends its run and resumes the parent with status failed",
		},
		{
			Name: "worker/lapse-left-after-connect",
			File: "oauthworkflow.go",
			Old:  "\tm.tidyDueWork(ctx, tc.Run.ID, jobLapse)\n",
			New:  "",
			Why:  "a connected sign-in leaves no due work behind",
		},

		{
			Name: "delivery/not-owed",
			File: "engine.go",
			Old:  "\te.owe(ctx, r)\n",
			New:  "",
			Why:  "a child's end is recorded as due to its parent before the first try, so a failed try is retried",
		},
		{
			Name: "delivery/heard-twice",
			File: "engine.go",
			Old:  "if child != \"\" && slices.Contains(r.Heard, child) {",
			New:  "if false && slices.Contains(r.Heard, child) {",
			Why:  "a delivery tried again after it landed changes nothing: the parent hears each child once",
		},

		{
			Name: "engine/ended-run-kept-30-days",
			File: "engine.go",
			Old:  "\tif r.State == StateEnd {\n\t\treturn e.doneTTL\n\t}\n",
			New:  "",
			Why:  "a finished sign-in's run is kept for the finished-run TTL (24 h), not 30 days",
		},
		{
			Name: "engine/ended-run-documents-kept",
			File: "engine.go",
			Old:  "\texpire, err := e.shortenOps(ctx, r)\n\treturn append(ops, expire...), err\n",
			New:  "\treturn ops, nil\n",
			Why:  "an ended run's documents expire with it",
		},

		{
			Name: "completion/not-watched",
			File: "completion.go",
			Old:  "\treturn m.Engine.withTake(ctx, s.WorkflowID, watch, prompt)\n",
			New:  "\t_ = watch\n\treturn m.Engine.withTake(ctx, s.WorkflowID, prompt)\n",
			Why:  "a completion whose instance dies mid-way is failed honestly by another instance",
		},
		{
			Name: "completion/watch-left-behind",
			File: "oauthworkflow.go",
			Old:  "\t\tm.tidyDueWork(ctx, tc.Run.ID, jobAbandon)\n",
			New:  "",
			Why:  "a completion that ended leaves no due work behind",
		},
		{
			Name: "completion/failed-watch-left-behind",
			File: "handlers.go",
			Old:  "\t\tm.completionDone(owned, s) // a completion that succeeded removed its watch with the run's last save\n",
			New:  "",
			Why:  "a completion that failed leaves no due work behind either",
		},
		{
			Name: "engine/released-before-saved",
			File: "engine.go",
			Old:  "\tops := append(append(save, f.tidy...), &kvOp{kind: opCompareAndDelete, key: l.key, value: l.owner})\n",
			New:  "\tops := append([]*kvOp{{kind: opCompareAndDelete, key: l.key, value: l.owner}}, append(save, f.tidy...)...)\n",
			Why:  "a run's last save lands before its lock is free: the next holder reads what this one wrote",
		},
		{
			Name: "engine/take-write-unchecked",
			File: "engine.go",
			Old:  "\t\t\tif op.err != nil {\n\t\t\t\treturn storeErr(ctx, \"write with the run's lock\", op.err)\n\t\t\t}\n",
			New:  "",
			Why:  "a write sent with a run lock's take (a completion's watch) lands before the run's transition runs",
		},
		{
			Name: "engine/take-read-stale",
			File: "documents.go",
			Old:  "\t\tf.wrote(docKey(r.ID, name), b)\n",
			New:  "\t\t_ = b\n",
			Why:  "a document read with a run lock's take follows the hold's own writes",
		},
		{
			Name: "batch/order-lost",
			File: "kv_batch.go",
			Old:  "\tc, single := r.c.(*redis.Client)\n\tif !single {\n\t\treturn false\n\t}\n",
			New:  "\tc := r.c\n",
			Why:  "a batch is pipelined only where one connection keeps its order, never across Cluster nodes",
		},

		{
			Name: "engine/save-without-holding",
			File: "engine.go",
			Old:  "\tif !held {\n\t\treturn fmt.Errorf(\"run %s: %w\", id, errLeaseLost)\n\t}\n",
			New:  "\t_ = held\n",
			Why:  "an instance that hung past its run lock's lease rewrites neither the run nor its documents",
		},
		{
			Name: "engine/trust-a-stale-proof",
			File: "lease.go",
			Old:  "\treturn p != 0 && l.now().UnixNano()-p < int64(l.trustedFor())\n",
			New:  "\treturn p != 0\n",
			Why:  "a run lock proven long ago is asked about again before a write: the holder may have hung past its lease",
		},

		// Contexts: a caller's own cancellation is not a store outage.
		{
			Name: "ctx/cancel-is-store-unavailable",
			File: "oauth.go",
			Old:  "if ctx != nil && ctx.Err() != nil {",
			New:  "if false {",
			Why:  "a caller's own context.Canceled is reported as such, never as ErrStoreUnavailable",
		},
		{
			Name: "ctx/client-keeps-makers-ctx",
			File: "client.go",
			Old:  "ctx := withValuesOf(req.Context(), t.src.values)",
			New:  "ctx := t.src.values",
			Why:  "a Client reads each token under the request's own context",
		},

		// Encryption at rest and re-encryption.
		{
			Name: "crypt/record-not-bound-to-its-name",
			File: "encryption.go",
			Old:  "func boundTo(name string) []byte { return readOnlyBytes(name) }",
			New:  "func boundTo(name string) []byte { return nil }",
			Why:  "a sealed record copied under another user's key does not open there",
			Run:  "TestSealedRecordMovedToAnotherKeyDoesNotOpen",
		},
		{
			Name: "crypt/unknown-key-is-corrupt",
			File: "encryption.go",
			Old:  "return nil, fmt.Errorf(\"%w: key ID %q\", ErrUnknownKey, id)",
			New:  "return nil, fmt.Errorf(\"%w: %w: key ID %q\", ErrCorruptRecord, ErrUnknownKey, id)",
			Why:  "a record under a key the ring lacks is never deleted, by a read or a disconnect",
			Run:  "TestEncryptionKeyRotation",
		},
		{
			Name: "crypt/memo-of-another-ring",
			File: "tokenstore.go",
			Old:  "if !ok || t == nil || t.ring != s.ring {",
			New:  "if !ok || t == nil {",
			Why:  "what one ring opened is not handed to a store whose ring lacks the key",
			Run:  "TestEncryptionKeyRotation",
		},
		{
			Name: "crypt/session-not-put-back",
			File: "session.go",
			Old:  "if consume && errors.Is(err, ErrUnknownKey) {",
			New:  "if false {",
			Why:  "a sign-in consumed by an instance without its key is put back for one that has it",
			Run:  "TestEncryptedSessions",
		},
		{
			Name: "crypt/kept-tokens-lost-to-resealing",
			File: "refresh.go",
			Old:  "\treturn w.oldPlain != nil && plain != nil && bytes.Equal(w.oldPlain, plain)\n",
			New:  "\treturn false\n",
			Why:  "a re-encryption changes a record's bytes, not its tokens: the rotated tokens kept in the process still land",
			Run:  "TestReencrypt",
		},
		{
			Name: "crypt/kept-tokens-dropped-when-superseded",
			File: "refresh.go",
			Old:  "\tif !ok {\n\t\treturn errSuperseded",
			New:  "\tif !ok {\n\t\tr.s.pending.drop(r.key)\n\t\treturn errSuperseded",
			Why:  "a retried write that meets the record sealed anew keeps the rotated tokens for the next read to judge",
			Run:  "TestReencrypt",
		},

		{
			Name: "crypt/reencrypt-one-cluster-master",
			File: "kv_scan.go",
			Old:  "\tcase i+1 < len(masters):\n",
			New:  "\tcase false:\n",
			Why:  "a re-encryption on a Cluster walks every master, not the first one",
			Run:  "TestRedisClusterKV",
		},

		// Sign-ins bound to the user who started them.
		{
			Name: "bind/callback-not-verified",
			File: "handlers.go",
			Old:  "\tif out, ok := m.verify(r, p.State); !ok {\n",
			New:  "\tif out, ok := m.verify(r, p.State); false && !ok {\n",
			Why:  "a completion from another user's browser is refused before its code is exchanged",
			Run:  "TestVerifyUserOnBothEndpoints|TestBoundSignIn",
		},
		{
			Name: "bind/error-redirect-not-verified",
			File: "handlers.go",
			Old:  "if m.verifies() && m.checkUser(r, s, p.State) != nil {",
			New:  "if false {",
			Why:  "another user cannot end a sign-in with an error redirect",
			Run:  "TestVerifyUserOnBothEndpoints",
		},
		{
			Name: "bind/cookie-not-checked",
			File: "binding.go",
			Old:  "if cerr != nil || !bindingMatches(s, c.Value) {",
			New:  "if cerr != nil && c == nil {",
			Why:  "a bound sign-in completes only in the browser that opened it through /start",
			Run:  "TestBoundSignIn",
		},
		{
			Name: "bind/start-from-any-origin",
			File: "binding.go",
			Old:  "\tif !m.sameOrAllowedOrigin(r) {\n",
			New:  "\tif false {\n",
			Why:  "only the app's own pages can bind a browser to a sign-in (no login CSRF from another site)",
			Run:  "TestBoundSignIn",
		},
		{
			Name: "bind/start-without-secret",
			File: "binding.go",
			Old:  "if err != nil || !bindingMatches(s, secret) {",
			New:  "if err != nil || secret == \"\" {",
			Why:  "a browser is bound only with the sign-in's secret, which no link carries",
			Run:  "TestBoundSignIn",
		},

		// The Client's recovery from a 401 (issue 12).
		{
			Name: "client/rejected-token-counts-as-current",
			File: "refresh.go",
			Old:  "\tif r.when.rejected != \"\" && string(v.access) == r.when.rejected {\n",
			New:  "\tif false {\n",
			Why:  "a token an API refused is refreshed however long it has left",
			Run:  "TestClient",
		},
		{
			Name: "client/retry-without-a-replayable-body",
			File: "client.go",
			Old:  "resp.StatusCode != http.StatusUnauthorized || !replayable(req) {",
			New:  "resp.StatusCode != http.StatusUnauthorized {",
			Why:  "a request whose body cannot be replayed is sent once, and forces no refresh",
			Run:  "TestClient",
		},
		{
			Name: "client/dead-grant-hidden-behind-the-401",
			File: "client.go",
			Old:  "\tcase errors.Is(err, ErrNoToken):\n",
			New:  "\tcase false && errors.Is(err, ErrNoToken):\n",
			Why:  "a 401 whose refresh finds the grant dead is ErrNoToken, so the tool says unauthorized",
			Run:  "TestClient",
		},

		{
			Name: "refresh/no-second-look-once-listening",
			File: "refresh.go",
			Old:  "\t\t\t\treleased, wait.max, backoff = ch, wait.watched, wait.watched\n\t\t\t\tcontinue\n",
			New:  "\t\t\t\treleased, wait.max, backoff = ch, wait.watched, wait.watched\n",
			Why:  "a waiter whose watch began after the holder let go looks again instead of waiting for an announcement it missed",
			Run:  "TestRefreshWaiterLooksAgainOnceListening",
		},

		// A user's connections (issue 12).
		{
			Name: "conn/sign-in-not-indexed",
			File: "tokenstore.go",
			Old:  "\tops := []*kvOp{set, {kind: opSchedule, key: connIndexKey(userID), member: providerID, due: now}}\n",
			New:  "\tops := []*kvOp{set}\n",
			Why:  "a sign-in enters the provider in the user's connection index, so providers outside the registry are listed",
			Run:  "TestConnectionsListAndRepair",
		},
		{
			Name: "conn/stale-entry-kept",
			File: "connections.go",
			Old:  "\tcase !found && listed:\n",
			New:  "\tcase false:\n",
			Why:  "an index entry whose record is gone is removed by the listing",
			Run:  "TestConnectionsListAndRepair",
		},
		{
			Name: "conn/unindexed-record-left-out",
			File: "connections.go",
			Old:  "\tcase found && !listed:\n",
			New:  "\tcase false:\n",
			Why:  "a record without an index entry is indexed by the listing",
			Run:  "TestConnectionsListAndRepair",
		},

		// Health: the backoff between failed refreshes, and the fingerprint
		// that ties a health record to the tokens it speaks of.
		{
			Name: "health/no-cooldown",
			File: "health.go",
			Old:  "s.now().UnixMilli() >= m.NextAttempt",
			New:  "true",
			Why:  "a connection whose refreshes fail is not refreshed by every read until its next attempt",
			Run:  "TestRefreshBackoff",
		},
		{
			Name: "health/cooldown-of-other-tokens",
			File: "health.go",
			Old:  "if m.Failures == 0 || !m.about(fingerprint(base)) ||",
			New:  "if m.Failures == 0 ||",
			Why:  "a sign-in after failed refreshes is refreshed at once: the backoff was the old tokens'",
			Run:  "TestHealthFollowsTheTokens",
		},
		{
			Name: "health/failures-not-counted",
			File: "health.go",
			Old:  "next.RefreshedAt, next.Failures = m.RefreshedAt, m.Failures+1",
			New:  "next.RefreshedAt = m.RefreshedAt",
			Why:  "failures in a row are counted, and the backoff grows with them",
			Run:  "TestRefreshBackoff",
		},
		{
			Name: "health/recovered-for-other-tokens",
			File: "health.go",
			Old:  "if m.Failures > 0 && m.about(fingerprint(base)) {",
			New:  "if m.Failures > 0 {",
			Why:  "recovered is told only for tokens that were failing, not for a sign-in that replaced them",
			Run:  "TestHealthFollowsTheTokens",
		},
		{
			Name: "health/listing-ignores-fingerprint",
			File: "connections.go",
			Old:  "\tif !m.about(fingerprint(t)) {\n\t\treturn\n\t}\n",
			New:  "",
			Why:  "the listing shows a new sign-in healthy, whatever its predecessor's record says",
			Run:  "TestHealthFollowsTheTokens",
		},
		{
			Name: "health/kept-after-disconnect",
			File: "tokenstore.go",
			Old:  "\ts.forget(ctx, userID, providerID)\n",
			New:  "",
			Why:  "a disconnect deletes the connection's health record",
			Run:  "TestHealthFollowsTheTokens",
		},
		{
			Name: "health/kept-after-dead-grant",
			File: "refresh.go",
			Old:  "\tr.s.forget(ctx, r.userID, r.providerID)\n",
			New:  "",
			Why:  "a dead grant deletes the connection's health record",
			Run:  "TestHealthFollowsTheTokens",
		},

		// Refresh ahead: once across instances, idle connections parked, and
		// the races of the worker's removals with reads and sign-ins.
		{
			Name: "ahead/refreshes-a-refreshed-record",
			File: "refresh.go",
			Old:  "return v.expiresAt == 0 || !bytes.Equal(raw, seen) && r.s.fresh(v.expiresAt)",
			New:  "return v.expiresAt == 0",
			Why:  "two instances that found a connection due refresh it once: the second finds it refreshed",
			Run:  "TestRefreshDueOnceForTwoClaims",
		},
		{
			Name: "ahead/never-due",
			File: "refresh.go",
			Old:  "\tif r.when.ahead {\n",
			New:  "\tif false {\n",
			Why:  "a connection within the ahead time of its expiry is refreshed though still valid",
			Run:  "TestRefreshAheadAcrossInstances",
		},
		{
			Name: "ahead/idle-kept-alive",
			File: "ahead.go",
			Old:  "\tcase now.Sub(seen) > a.idle:\n",
			New:  "\tcase false:\n",
			Why:  "a connection not read for the idle time is left alone",
			Run:  "TestRefreshAheadAcrossInstances",
		},
		{
			Name: "ahead/reads-not-marked",
			File: "ahead.go",
			Old:  "\tif ok && now.UnixMilli()-last < a.markEvery().Milliseconds() {\n",
			New:  "\tif ok && last >= 0 {\n",
			Why:  "reads keep a connection under refresh ahead",
			Run:  "TestRefreshAheadAcrossInstances",
		},
		{
			Name: "ahead/memory-reads-not-marked",
			File: "ahead.go",
			Old:  "\tif now.UnixMilli()-t.marked.Load() < s.ahead.markEvery().Milliseconds() {\n",
			New:  "\tif _ = now; true {\n",
			Why:  "reads served from MemoryKV's decoded record keep a connection under refresh ahead too",
			Run:  "TestRefreshAheadAcrossInstances",
		},
		{
			Name: "ahead/park-loses-a-read",
			File: "ahead.go",
			Old:  "\tif err != nil || !ok || !again.After(seen) {\n",
			New:  "\tif _, _ = again, ok; err == nil {\n",
			Why:  "a read that lands while the worker parks an idle connection brings it back",
			Run:  "TestParkKeepsARaceWithARead",
		},
		{
			Name: "ahead/leave-loses-a-sign-in",
			File: "ahead.go",
			Old:  "\tif err != nil || v.expiresAt == 0 || len(v.refresh) == 0 {\n\t\treturn errHandled\n\t}\n\trunBatch(",
			New:  "\t_ = err\n\treturn errHandled\n\trunBatch(",
			Why:  "a sign-in that lands while the worker takes a connection out keeps it in",
			Run:  "TestLeaveKeepsARaceWithASignIn",
		},
		{
			Name: "ahead/short-tokens-every-pass",
			File: "ahead.go",
			Old:  "\t\tdue = a.next(time.UnixMilli(m.RefreshedAt), v.expiresAt) // short tokens: halfway\n",
			New:  "",
			Why:  "tokens that live less than the ahead time are refreshed halfway through their life, not by every pass",
			Run:  "TestRefreshAheadOfShortTokens",
		},
		{
			Name: "ahead/off-keeps-entries",
			File: "ahead.go",
			Old:  "\t\treturn s.leave(ctx, member) // refresh ahead was turned off, or the entry is not ours\n",
			New:  "\t\treturn nil\n",
			Why:  "an instance without refresh ahead takes the entries out",
			Run:  "TestRefreshAheadOffTakesEntriesOut",
		},

		// Provider resolvers: providers registered at run time, rebuilt on
		// the instance that meets them second.
		{
			Name: "registry/resolved-twice",
			File: "registry.go",
			Old:  "\t\tif !ok {\n\t\t\treturn nil, err\n\t\t}\n\t\treturn first, nil\n",
			New:  "\t\t_, _ = first, ok\n\t\treturn nil, err\n",
			Why:  "a provider resolved by two callers at once is the one registered first, for both",
			Run:  "TestRegistryResolver",
		},
		{
			Name: "registry/resolver-id-unchecked",
			File: "registry.go",
			Old:  "\tif isNil(p) || p.ProviderID() != id {\n",
			New:  "\tif isNil(p) {\n",
			Why:  "a resolver's provider of another ID is refused, never registered under its own",
			Run:  "TestRegistryResolver",
		},

		// MCP servers: what discovery refuses.
		{
			Name: "mcp/issuer-unchecked",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\t\tif strings.TrimSuffix(md.Issuer, \"/\") != strings.TrimSuffix(issuer, \"/\") {\n",
			New:  "\t\tif false {\n",
			Why:  "authorization server metadata naming another issuer is refused (RFC 8414 §3.3)",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/pkce-unchecked",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\tif !slices.Contains(md.CodeChallengeMethodsSupported, \"S256\") {\n",
			New:  "\tif slices.Contains(md.CodeChallengeMethodsSupported, \"none of them\") {\n",
			Why:  "an authorization server that does not advertise PKCE S256 is refused",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/resource-unchecked",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\tif path != parent && !strings.HasPrefix(path, parent+\"/\") {\n",
			New:  "\tif _, _ = parent, path; false {\n",
			Why:  "resource metadata of another resource is refused (RFC 9728 §3.3)",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/challenge-ignored",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\tif fromChallenge != \"\" {\n",
			New:  "\tif false {\n",
			Why:  "the resource_metadata URL of the server's challenge is asked before the well-known ones",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/registration-unlocked",
			File: "mcpauth/register.go",
			Old:  "\t\tif took {\n",
			New:  "\t\tif took || !took {\n",
			Pkg:  "./mcpauth",
			Why:  "instances that meet an authorization server at once register one client between them",
			Run:  "TestConnectAcrossInstances",
		},
		{
			Name: "mcp/resource-not-sent",
			File: "mcpauth/connector.go",
			Old:  "TokenParams: map[string]string{\"resource\": d.Resource},",
			New:  "",
			Pkg:  "./mcpauth",
			Why:  "token requests name the MCP server as their resource (RFC 8707)",
			Run:  "TestConnectAcrossInstances",
		},

		// Not a guard: renewEvery stops renewing a lease that is in other hands,
		// which saves commands but changes no outcome (the holder confirms the
		// lease before every write), so "renewal result ignored" would survive.
	}
}
