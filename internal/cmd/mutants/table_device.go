package main

// deviceSignIns are the guards of the device authorization grant (RFC 8628,
// issue 23): polls the worker spaces and ends, secrets it seals, and answers
// it refuses to show.
func deviceSignIns() []mutant {
	const run = "^(TestDevice.*|TestStartDeviceSignIn.*)$"
	return []mutant{
		{
			Name: "device/polls-before-interval",
			File: "oauthworkflow.go",
			Old:  "\tif now < d.NextPollAt {\n\t\treturn nil\n\t}\n",
			New:  "",
			Run:  run,
			Why:  "work claimed early never polls sooner than the interval since the last poll",
		},
		{
			Name: "device/slow-down-forgotten",
			File: "oauthworkflow.go",
			Old:  "d.Failures, d.Interval = 0, d.Interval+int64(slowDownStep/time.Second)",
			New:  "d.Failures = 0",
			Run:  run,
			Why:  "slow_down lengthens the interval for good, on every instance",
		},
		{
			Name: "device/slow-down-not-now",
			File: "oauthworkflow.go",
			Old:  "\t\tinterval += slowDownStep\n",
			New:  "",
			Run:  run,
			Why:  "the poll after a slow_down already waits the longer interval",
		},
		{
			Name: "device/denial-waits",
			File: "oauthworkflow.go",
			Old:  "case code == \"access_denied\" || code == \"authorization_declined\":",
			New:  "case code == \"authorization_declined\":",
			Run:  run,
			Why:  "a denial ends the sign-in and says so",
		},
		{
			Name: "device/expired-waits",
			File: "oauthworkflow.go",
			Old:  "\tcase code == \"expired_token\":\n",
			New:  "\tcase code == \"expired_token_\":\n",
			Run:  run,
			Why:  "expired_token ends the sign-in and says it expired",
		},
		{
			Name: "device/transient-ends",
			File: "oauthworkflow.go",
			Old:  "\tcase IsTransient(err):\n\t\td.Failures++\n",
			New:  "\tcase false:\n\t\td.Failures++\n",
			Run:  run,
			Why:  "a network failure, 5xx or 429 backs off and carries on",
		},
		{
			Name: "device/backoff-sooner-than-interval",
			File: "oauthworkflow.go",
			Old:  "interval = max(interval, deviceBackoff.after(d.Failures, tc.Run.ID))",
			New:  "interval = deviceBackoff.after(d.Failures, tc.Run.ID) / 10",
			Run:  run,
			Why:  "a backoff never polls sooner than the interval",
		},
		{
			Name: "device/expiry-unchecked",
			File: "oauthworkflow.go",
			Old:  "\tif now >= d.ExpiresAt {\n\t\treturn o.failFlow(ctx, tc, data.Provider, errDeviceExpired)\n\t}\n",
			New:  "",
			Run:  run,
			Why:  "a code past its lifetime is not polled: the sign-in says it expired",
		},
		{
			Name: "device/no-lapse",
			File: "oauthworkflow.go",
			Old:  "\tif err := o.work.Schedule(ctx, jobLapse, tc.Run.ID, time.UnixMilli(run.ExpiresAt)); err != nil {\n\t\treturn err\n\t}\n",
			New:  "",
			Run:  run,
			Why:  "the sign-in ends at the code's expiry even while no poll gets through",
		},
		{
			Name: "device/no-lifetime-is-none",
			File: "oauthworkflow.go",
			Old:  "life := o.signInTTL",
			New:  "life := time.Duration(0)",
			Run:  run,
			Why:  "a server that names no lifetime does not mean the code expired at once",
		},
		{
			Name: "device/code-plain",
			File: "oauthworkflow.go",
			Old:  "run := &deviceRun{Code: string(o.ring.Seal([]byte(a.DeviceCode), name)),",
			New:  "run := &deviceRun{Code: a.DeviceCode,",
			Run:  run,
			Why:  "the device code is sealed in the run when encryption is on",
		},
		{
			Name: "device/script-link-shown",
			File: "oauth.go",
			Old:  "(u.Scheme == \"https\" || u.Scheme == \"http\") && u.Host != \"\"",
			New:  "u != nil",
			Run:  run,
			Why:  "a verification URI that is not a web page is never shown as a link",
		},
		{
			Name: "device/spoofing-characters-shown",
			File: "oauth.go",
			Old:  "func unshowable(r rune) bool { return unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }",
			New:  "func unshowable(r rune) bool { return unicode.IsControl(r) && r < 0x80 }",
			Run:  run,
			Why:  "a user code or a link with a C1 control or a bidi override is refused, never shown",
		},
		{
			Name: "device/unproven-poll",
			File: "oauthworkflow.go",
			Old:  "\t\tctx = withProofs(ctx, key, &o.tokens.nonces)\n",
			New:  "\t\t_ = key\n",
			Run:  run,
			Why:  "a DPoP provider's device grant is bound to the key the polls prove",
		},
		{
			Name: "device/no-next-poll",
			File: "oauthworkflow.go",
			Old:  "\t\treturn false, err\n\t}\n\treturn true, nil\n",
			New:  "\t\treturn false, err\n\t}\n\treturn false, nil\n",
			Run:  run,
			Why:  "a pending sign-in is polled again: the job keeps its entry",
		},
		{
			Name: "device/unsupported-launched",
			File: "module.go",
			Old:  "\tif deviceAuthorizer(p) == nil {\n\t\treturn nil, nil, fmt.Errorf(",
			New:  "\tif _ = p; false {\n\t\treturn nil, nil, fmt.Errorf(",
			Run:  run,
			Why:  "a provider without the grant is refused before a run is made",
		},
		{
			Name: "device/redirect-less-builds",
			File: "providers/oauth2.go",
			Old:  "\tif p.token.RedirectURL == \"\" {\n\t\treturn \"\"\n\t}\n",
			New:  "",
			Run:  "^(TestDeviceOnlyProvider)$",
			Why:  "a provider made without a redirect URL offers no browser sign-in",
		},
	}
}

// connectionAccounts are the guards of what a sign-in keeps besides the
// tokens (issue 24): the account it is for, and the callback's fields.
func connectionAccounts() []mutant {
	const run = "^(TestSignIn.*|TestDeviceSignInBoundWithDPoP)$"
	return []mutant{
		{
			Name: "account/not-read",
			File: "signin.go",
			Old:  "\t\tsi.readAccount(ctx, p, ts, s.DPoPKey)\n",
			New:  "\t\t_ = p\n",
			Run:  run,
			Why:  "a sign-in asks the provider once which account it is for",
		},
		{
			Name: "account/unproven",
			File: "signin.go",
			Old:  "\tif isDPoP(ts.TokenType) {\n\t\ttok.key = key\n\t}\n",
			New:  "",
			Run:  run,
			Why:  "a DPoP-bound grant's account is read with a proof of its key",
		},
		{
			Name: "account/refresh-forgets",
			File: "refresh.go",
			Old:  "\t\tAccount: old.Account, Metadata: refreshedMetadata(old.Metadata, ts.Metadata)}",
			New:  "\t\tMetadata: refreshedMetadata(old.Metadata, ts.Metadata)}",
			Run:  run,
			Why:  "a refresh keeps the account the sign-in read",
		},
		{
			Name: "account/every-callback-field",
			File: "handlers.go",
			Old:  "\tfor _, name := range cf.CallbackFields() {\n\t\tv := p.Fields[name]\n",
			New:  "\tfor name := range p.query {\n\t\t_ = cf\n\t\tv := p.Fields[name]\n",
			Run:  "^(TestSignInKeepsCallbackFields|TestCallbackKeepsDeclaredFieldsAmongOthers|TestCompleteKeepsDeclaredFields)$",
			Why:  "only the callback parameters the provider names are kept",
		},
	}
}

// accountGuards are the guards of the account read: where the token goes
// and what is kept of the answer.
func accountGuards() []mutant {
	const run = "^(TestAccountReadIsGuarded)$"
	return []mutant{
		{
			Name: "account/follows-redirects",
			File: "signin.go",
			Old:  "CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}",
			New:  "CheckRedirect: nil}",
			Run:  run,
			Why:  "the account read's token never follows a redirect to another origin",
		},
		{
			Name: "account/unbounded",
			File: "tokenstore.go",
			Old:  "Account: showable(ts.Account, maxAccountLen),",
			New:  "Account: ts.Account,",
			Run:  run,
			Why:  "an account name is kept bounded and without characters that would not show as themselves",
		},
	}
}

// refreshAtScale are the guards of refresh ahead at scale (issue 25): the
// worker drains bulk work, and a provider's refreshes are bounded per
// instance and across the fleet.
func refreshAtScale() []mutant {
	const run = "^(TestRefreshAhead(Concurrency|Rate|429).*|TestWorker.*)$"
	return []mutant{
		{
			Name: "scale/one-claim-a-tick",
			File: "internal/worker/worker.go",
			Old:  "\t\tif err != nil || len(members) < want {\n",
			New:  "\t\tif _ = err; true {\n",
			Run:  run,
			Why:  "work due in bulk is claimed again as pieces end, not one claim a tick",
		},
		{
			Name: "scale/provider-unbounded-here",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tselect {\n\tcase slots <- struct{}{}:\n\tcase <-ctx.Done():\n\t\treturn nil, ctx.Err()\n\t}\n\trelease = func() { <-slots }\n",
			New:  "\trelease = func() { _ = slots }\n",
			Run:  run,
			Why:  "one instance refreshes at most Concurrency of a provider's tokens at once",
		},
		{
			Name: "scale/fleet-rate-unbounded",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tif lim.PerSecond > 0 {\n",
			New:  "\tif false {\n",
			Run:  run,
			Why:  "the fleet refreshes a provider's tokens at most PerSecond a second",
		},
		{
			Name: "scale/429-heard-alone",
			File: "refresh.go",
			Old:  "\t\trf.onRateLimited(ctx, providerID) // the provider says too many",
			New:  "\t\t_ = providerID // the provider says too many",
			Run:  run,
			Why:  "a provider's 429 slows the whole fleet's refreshes ahead of it",
		},
		{
			Name: "scale/slow-down-ignored",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed {",
			New:  "\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed && false {",
			Run:  run,
			Why:  "no instance refreshes ahead a provider the fleet is slowed down for",
		},
	}
}

// lastReads are the guards of refresh ahead's notes of the last read, kept
// in each user's connection index (issue 25's bytes).
func lastReads() []mutant {
	return []mutant{
		{
			Name: "seen/listed-as-a-connection",
			File: "connections.go",
			Old:  "\tmaps.DeleteFunc(indexed, func(member string, _ int64) bool { return strings.HasPrefix(member, seenPrefix) }) // refresh ahead's\n",
			New:  "",
			Run:  "^(TestConnectionsKeepTheLastRead)$",
			Why:  "a listing neither shows nor repairs away refresh ahead's note of the last read",
		},
	}
}

// endedSignIns are the guards of what an ended sign-in keeps (issue 25's
// bytes per sign-in, and secrets that outlive their use).
func endedSignIns() []mutant {
	return []mutant{
		{
			Name: "ended/keeps-own-state",
			File: "oauthworkflow.go",
			Old:  "func endData(tc *TransitionContext) { tc.Run.Data = nil }",
			New:  "func endData(tc *TransitionContext) { _ = tc }",
			Run:  "^(TestEndedSignInKeepsOnlyWhatIsShown)$",
			Why:  "an ended sign-in drops its own state: the expected state, the sealed device code",
		},
		{
			Name: "ended/keeps-spent-link",
			File: "oauthworkflow.go",
			Old:  "\t\tdoc.AuthURL, doc.Binding = \"\", \"\"\n",
			New:  "",
			Run:  "^(TestBoundSignIn)$",
			Why:  "a settled prompt keeps neither the spent link nor its binding secret",
		},
	}
}

// queuedBehind429 is the guard that the slow-down is asked once the slot is
// held, not before a refresh waits for it.
func queuedBehind429() []mutant {
	return []mutant{
		{
			Name: "scale/slow-down-asked-too-early",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tslots := l.slotsOf(key, lim.Concurrency)\n\tif l.OnQueue != nil {\n\t\tl.OnQueue()\n\t}\n\tselect {\n\tcase slots <- struct{}{}:\n\tcase <-ctx.Done():\n\t\treturn nil, ctx.Err()\n\t}\n\trelease = func() { <-slots }\n\t// Asked once the slot is held: work that waited for it while\n\t// another heard 429 does not go out after all.\n\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed {\n\t\trelease()\n\t\tif err == nil {\n\t\t\terr = &SlowedDownError{Until: until}\n\t\t}\n\t\treturn nil, err\n\t}\n",
			New:  "\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed {\n\t\tif err == nil {\n\t\t\terr = &SlowedDownError{Until: until}\n\t\t}\n\t\treturn nil, err\n\t}\n\tslots := l.slotsOf(key, lim.Concurrency)\n\tif l.OnQueue != nil {\n\t\tl.OnQueue()\n\t}\n\tselect {\n\tcase slots <- struct{}{}:\n\tcase <-ctx.Done():\n\t\treturn nil, ctx.Err()\n\t}\n\trelease = func() { <-slots }\n",
			Run:  "^(TestRefreshAheadQueuedBehind429)$",
			Why:  "a refresh that waited for a slot while another heard 429 does not go out after it",
		},
	}
}

// reencryptSideBySide are the guards of Reencrypt's side-by-side rewrites:
// side by side at all, and never more than Concurrency at once.
func reencryptSideBySide() []mutant {
	const run = "^(TestReencryptSideBySide)$"
	return []mutant{
		{
			Name: "crypt/reencrypt-one-at-a-time",
			File: "encryption.go",
			Old:  "for range min(workers, len(keys)) {",
			New:  "for range min(1, len(keys)) {",
			Run:  run,
			Why:  "Reencrypt rewrites a batch's records side by side, not one after another",
		},
		{
			Name: "crypt/reencrypt-unbounded",
			File: "encryption.go",
			Old:  "for range min(workers, len(keys)) {",
			New:  "for range len(keys) {",
			Run:  run,
			Why:  "Reencrypt holds itself to Concurrency records in flight",
		},
	}
}

// permitsFilledWhereMissing are the guards that filling a provider's bucket
// of permits never hands out again a permit another instance took.
func permitsFilledWhereMissing() []mutant {
	const run = "^(TestPermitsFilledOnlyWhereMissing)$"
	return []mutant{
		{
			Name: "scale/permits-refilled-memory",
			File: "internal/kv/index.go",
			Pkg:  "./internal/ratelimit",
			Old:  "\t\tif _, ok := m.idx[index][member]; !ok {\n",
			New:  "\t\tif true {\n",
			Run:  run,
			Why:  "MemoryKV adds a permit only where it is absent",
		},
		{
			Name: "scale/permits-refilled-redis",
			File: "internal/kv/index.go",
			Pkg:  "./internal/ratelimit",
			Old:  "r.c.ZAddNX(xcontext.OrBackground(ctx), index, zs...)",
			New:  "r.c.ZAdd(xcontext.OrBackground(ctx), index, zs...)",
			Run:  run,
			Why:  "RedisKV adds a permit only where it is absent (ZADD NX)",
		},
	}
}
