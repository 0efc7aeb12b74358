package main

// errsMutants guards the code of internal/errs/errs.go.
func errsMutants() []mutant {
	return []mutant{
		// Contexts: a caller's own cancellation is not a store outage.
		{
			Name: "ctx/cancel-is-store-unavailable",
			File: "internal/errs/errs.go",
			Old:  "if ctx != nil && ctx.Err() != nil {",
			New:  "if false {",
			Run:  "^(TestCancelledContextIsNotStoreUnavailable)$",
			Why:  "a caller's own context.Canceled is reported as such, never as ErrStoreUnavailable",
		},
	}
}

// flightMutants guards the code of internal/flight/flight.go.
func flightMutants() []mutant {
	return []mutant{
		// The refresh: in-process single flight, waiters, the shared context.
		{
			Name: "flight/no-single-flight",
			File: "internal/flight/flight.go",
			Old:  "f, running := g.calls[key]\n",
			New:  "f, running := g.calls[key]\n\trunning = false // mutant\n",
			Run:  "^(TestRefreshInProcessTakesTheLockOnce)$",
			Why:  "concurrent refreshes of one record in one process make one provider call",
		},
		{
			Name: "flight/waiter-ignores-own-ctx",
			File: "internal/flight/flight.go",
			Old: "\tselect {\n\tcase <-f.done:\n\t\treturn f.val, f.err\n" +
				"\tcase <-ctx.Done():\n\t\tvar zero V\n\t\treturn zero, ctx.Err()\n\t}\n",
			New: "\t<-f.done\n\treturn f.val, f.err\n",
			Run: "^(TestRefreshOutlivesTheCallerThatStartedIt)$",
			Why: "a caller waiting on a shared refresh returns when its own context ends",
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

// keyspaceMutants guards the code of internal/keyspace/keyspace.go.
func keyspaceMutants() []mutant {
	return []mutant{
		// The keyspace, the public endpoints' state check, the engine's run IDs.
		{
			Name: "keys/hostile-user-id-not-escaped",
			File: "internal/keyspace/keyspace.go",
			Old:  "\treturn !ReservedSegment(first) && !strings.HasPrefix(userID, escapeMark)\n",
			New:  "\treturn first != \"\" || true\n",
			Run:  "^(TestHostileUserIDsStayInTheirOwnKeys)$",
			Why:  "keys of different kinds and users are disjoint for every user ID (\"lock:alice\" reaches no lock of alice's)",
		},
	}
}

// kvBatchMutants guards the code of internal/kv/batch.go.
func kvBatchMutants() []mutant {
	return []mutant{
		{
			Name: "batch/order-lost",
			File: "internal/kv/batch.go",
			Pkg:  "./internal/kv",
			Old:  "\tc, single := r.c.(*redis.Client)\n\tif !single {\n\t\treturn false\n\t}\n",
			New:  "\tc := r.c\n",
			Run:  "^(TestBatchOnClusterRunsOneByOne)$",
			Why:  "a batch is pipelined only where one connection keeps its order, never across Cluster nodes",
		},
		{
			Name: "batch/cluster-said-one-trip",
			File: "internal/kv/batch.go",
			Pkg:  "./internal/kv",
			Old:  "\t_, single := r.c.(*redis.Client)\n\treturn single\n",
			New:  "\treturn true\n",
			Run:  "^(TestBatchOnClusterRunsOneByOne)$",
			Why:  "a Cluster is never taken to send a batch in one round trip: writes do not wait for a batch there",
		},
		{
			Name: "batch/swaps-not-compared",
			File: "internal/kv/batch.go",
			Pkg:  "./internal/kv",
			Old:  "  elseif got ~= ARGV[3*i-2] then\n",
			New:  "  elseif false then\n",
			Run:  "^(TestBatchOnOneNodeIsOneRoundTripInOrder)$",
			Why:  "the compare-and-swaps a batch sends as one script each compare before they set",
		},
		{
			Name: "batch/swap-keeps-no-ttl",
			File: "internal/kv/batch.go",
			Pkg:  "./internal/kv",
			Old:  "set = redis.pcall(\"SET\", key, ARGV[3*i-1], \"KEEPTTL\")",
			New:  "set = redis.pcall(\"SET\", key, ARGV[3*i-1])",
			Run:  "^(TestBatchOnOneNodeIsOneRoundTripInOrder)$",
			Why:  "a compare-and-swap that keeps the time to live keeps it",
		},
		{
			Name: "batch/swap-alone-keeps-no-ttl",
			File: "internal/kv/batch.go",
			Pkg:  "./internal/kv",
			Old:  "\tif ttl == KeepTTL {\n",
			New:  "\tif false {\n",
			Run:  "^(TestBatchElsewhereRunsOneByOne)$",
			Why:  "a compare-and-swap that keeps the time to live, run alone, reads it first",
		},
		{
			Name: "batch/swap-error-lost",
			File: "internal/kv/batch.go",
			Pkg:  "./internal/kv",
			Old:  "\t\tcase error:\n\t\t\top.Err = a\n",
			New:  "\t\tcase error:\n",
			Run:  "^(TestBatchOnOneNodeIsOneRoundTripInOrder)$",
			Why:  "a compare-and-swap of a batch that met an error answers it, as alone",
		},
	}
}

// kvIndexMutants guards the code of internal/kv/index.go.
func kvIndexMutants() []mutant {
	return []mutant{
		{
			Name: "scale/permits-refilled-memory",
			File: "internal/kv/index.go",
			Pkg:  "./internal/ratelimit",
			Old:  "\t\tif _, ok := m.idx[index][member]; !ok {\n",
			New:  "\t\tif true {\n",
			Run:  "^(TestPermitsFilledOnlyWhereMissing)$",
			Why:  "MemoryKV adds a permit only where it is absent",
		},
		{
			Name: "scale/permits-refilled-redis",
			File: "internal/kv/index.go",
			Pkg:  "./internal/ratelimit",
			Old:  "r.c.ZAddNX(xcontext.OrBackground(ctx), index, zs...)",
			New:  "r.c.ZAdd(xcontext.OrBackground(ctx), index, zs...)",
			Run:  "^(TestPermitsFilledOnlyWhereMissing)$",
			Why:  "RedisKV adds a permit only where it is absent (ZADD NX)",
		},
	}
}

// kvMemoryMutants guards the code of internal/kv/memory.go.
func kvMemoryMutants() []mutant {
	return []mutant{
		{
			Name: "kv/memory-compare-and-delete-no-compare",
			File: "internal/kv/memory.go",
			Pkg:  "./internal/kv",
			Old:  "\tif _, ok := m.holds(key, value); !ok {\n\t\treturn false, nil\n\t}\n\tdelete(m.m, key)\n",
			New:  "\tdelete(m.m, key)\n",
			Run:  "^(TestMemoryConformance)$",
			Why:  "CompareAndDelete deletes only while the key holds the given value (lock release)",
		},
	}
}

// kvRedisMutants guards the code of internal/kv/redis.go.
func kvRedisMutants() []mutant {
	return []mutant{
		{
			Name: "kv/redis-compare-and-delete-no-compare",
			File: "internal/kv/redis.go",
			Pkg:  "./internal/kv",
			Old:  "if redis.call(\"GET\", KEYS[1]) == ARGV[1] then return redis.call(\"DEL\", KEYS[1]) end\nreturn 0",
			New:  "return redis.call(\"DEL\", KEYS[1])",
			Run:  "^(TestMiniredisConformance|TestRedisConformance)$",
			Why:  "CompareAndDelete deletes only while the key holds the given value (lock release)",
		},
		{
			Name: "catalog/last-millisecond-never-expires",
			File: "internal/kv/redis.go",
			Old:  "\treturn max(d, time.Millisecond), nil\n",
			New:  "\treturn d, nil\n",
			Run:  "^(TestReencryptKeepsAnExpiryInTheLastMillisecond)$",
			Why:  "a key PTTL answers 0 (its last millisecond) has an expiry: Reencrypt never rewrites it without one",
		},
	}
}

// kvReplicasMutants guards the code of internal/kv/replicas.go.
func kvReplicasMutants() []mutant {
	return []mutant{
		{
			Name: "edges/failover-wait-stale-offset",
			File: "internal/kv/replicas.go",
			Old:  "\tpipe.Ping(ctx)\n",
			New:  "",
			Why:  "WAIT on a pooled connection waits for that connection's last offset: a PING first brings it up to the caller's write",
			Run:  "TestRotatedTokenAcrossAFailover",
		},
	}
}

// kvScanMutants guards the code of internal/kv/scan.go.
func kvScanMutants() []mutant {
	return []mutant{
		{
			Name: "crypt/reencrypt-one-cluster-master",
			File: "internal/kv/scan.go",
			Old:  "\tcase i+1 < len(masters):\n",
			New:  "\tcase false:\n",
			Why:  "a re-encryption on a Cluster walks every master, not the first one",
			Run:  "TestRedisClusterKV",
		},
	}
}

// kvShardsRedisMutants guards the code of internal/kv/shards_redis.go.
func kvShardsRedisMutants() []mutant {
	return []mutant{
		{
			Name: "shards/stale-level-written",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  "  if level ~= at then return {-1, at, from} end\n",
			New:  "",
			Run:  "^(TestShardedWriteCatchesUpWithTheLevel)$",
			Why:  "a write at a level behind the current one is refused and sent again at the current level, never left where writes no longer go",
		},
		{
			Name: "shards/head-late",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  `if redis.call("ZADD", head, first[2], id) == 1 then`,
			New:  `if redis.call("ZADD", head, "NX", first[2], id) == 1 then`,
			Run:  "^(TestShardedHeadStaysExact|TestShardsStayCompact)$",
			Why:  "the head names each shard at its earliest due time, never later: a later entry leaves a due member unclaimed",
		},
		{
			Name: "shards/claim-without-lease",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  `for _, member in ipairs(due) do redis.call("ZADD", shard, ARGV[5], member) end`,
			New:  "",
			Run:  "^(TestRedisConformance|TestMiniredisConformance)$",
			Why:  "a shard's claim leases what it takes in the same script: racing claimers take each due member exactly once",
		},
		{
			Name: "shards/level-never-rises",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  `if at < tonumber(ARGV[8]) and redis.call("ZCARD", shard) >= tonumber(ARGV[7]) then`,
			New:  "if false then",
			Run:  "^(TestShardsStayCompact)$",
			Why:  "a shard that reaches 96 members raises the level: shards stay in Redis's compact encoding as the index grows",
		},
		{
			Name: "shards/from-never-rises",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  `    while from < at and (tonumber(redis.call("HGET", levels, "n" .. from)) or 0) <= 0 do from = from + 1 end`,
			New:  "",
			Run:  "^(TestShardedSweepBringsEveryMemberUp|TestShardedIdlePassIsFlat)$",
			Why:  "once the levels below the current one hold nothing, passes sweep no more and an unschedule is one command",
		},
		{
			Name: "shards/unschedule-misses-lower-levels",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  `return x.unschedule(xcontext.OrBackground(ctx), member, x.levels.from.Load(), "")`,
			New:  `return x.unschedule(xcontext.OrBackground(ctx), member, x.levels.at.Load(), "")`,
			Run:  "^(TestShardedUnscheduleReachesLowerLevels)$",
			Why:  "an unschedule removes the member at every level that holds members, not only where writes go now",
		},
		{
			Name: "shards/batch-stale-level-dropped",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  "\tcase op.Kind == OpScheduleSharded && !current:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestShardedWriteCatchesUpWithTheLevel)$",
			Why:  "a batch's schedule that a risen level refused is sent again at the current level, not lost",
		},
		{
			Name: "shards/move-not-nx",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  "\tif reply[0] == 1 {\n\t\treturn level\n",
			New:  "\tif reply[0] >= 0 {\n\t\treturn level\n",
			Run:  "^(TestShardedLaterWriteWins)$",
			Why:  "a member moved up runs only if its shard at the current level did not hold it: the copy there runs, never both",
		},
		{
			Name: "shards/move-removes-a-newer-write",
			File: "internal/kv/shards_redis.go",
			Pkg:  "./internal/kv",
			Old:  "if tonumber(score) ~= tonumber(ARGV[2]) then return 2 end\n",
			New:  "",
			Run:  "^(TestShardedMoveKeepsANewerWrite)$",
			Why:  "a move removes the member where it was claimed only while that claim's lease is its due time there: a newer write stays",
		},
	}
}

// kvShardsClaimMutants guards the code of internal/kv/shards_claim.go.
func kvShardsClaimMutants() []mutant {
	return []mutant{
		{
			Name: "shards/old-index-not-claimed",
			File: "internal/kv/shards_claim.go",
			Pkg:  "./internal/kv",
			Old:  "earlier = pipedScript{claimDue}.queue(ctx, p, []string{x.index}, nowMs, n, untilMs)",
			New:  "earlier = pipedScript{claimDue}.queue(ctx, p, []string{x.index + \"-none\"}, nowMs, n, untilMs)",
			Run:  "^(TestShardedClaimMovesTheEarlierLayout)$",
			Why:  "what an earlier version wrote to the index as one sorted set is still claimed, and moved to the shards",
		},
		{
			Name: "shards/claim-unfair",
			File: "internal/kv/shards_claim.go",
			Pkg:  "./internal/kv",
			Old:  "\tk = min(k, budget)\n",
			New:  "\tk = min(k, budget, 1)\n",
			Run:  "^(TestShardedClaimIsFairAcrossShards)$",
			Why:  "a claim takes a share from every shard with due members: one full of due work holds back no other",
		},
		{
			Name: "shards/claim-rounds-blind",
			File: "internal/kv/shards_claim.go",
			Pkg:  "./internal/kv",
			Old:  "\t\tdue, share = more, fill(counts, left)\n",
			New:  "\t\tdue, share = more, shares(left, len(more)+0*len(counts))\n",
			Run:  "^(TestShardedClaimTakesAFullBatch)$",
			Why:  "a claim's later rounds share what is left by what each shard still holds due, so a claim takes a whole batch in a few rounds",
		},
		{
			Name: "shards/move-ignores-a-later-write",
			File: "internal/kv/shards_claim.go",
			Pkg:  "./internal/kv",
			Old:  "\t\t\theld[m] = above\n",
			New:  "\t\t\theld[m] = above && false\n",
			Run:  "^(TestShardedLaterWriteWins)$",
			Why:  "a member a shard above where it was found holds is that later write's: the earlier copy is dropped, not run",
		},
		{
			Name: "shards/unscheduled-member-moved-back",
			File: "internal/kv/shards_claim.go",
			Pkg:  "./internal/kv",
			Old:  "\t\tcase was == 0: // unscheduled since it was claimed: the copy added goes too\n",
			New:  "\t\tcase was == 0 && false:\n",
			Run:  "^(TestShardedUnscheduleDuringAMoveHolds)$",
			Why:  "a claimed member unscheduled before its move completes is neither run nor left in its new shard",
		},
		{
			Name: "shards/sweep-takes-leased",
			File: "internal/kv/shards_claim.go",
			Pkg:  "./internal/kv",
			Old:  "ok && int64(z.Score) > afterMs",
			New:  "ok",
			Run:  "^(TestShardedSweepLeavesLeasedMembers)$",
			Why:  "a sweep leaves a member leased in its shard to the claim that is moving it",
		},
		{
			Name: "shards/idle-pass-sweeps",
			File: "internal/kv/shards_claim.go",
			Pkg:  "./internal/kv",
			Old:  "\tif from >= at {\n\t\treturn\n\t}\n",
			New:  "\t_ = at\n",
			Run:  "^(TestShardedIdlePassIsFlat)$",
			Why:  "a pass sweeps only while levels below the current one hold members: an idle pass is two commands in one round trip",
		},
	}
}

// layoutWaitsMutants guards the code of internal/layout/waits_test.go.
func layoutWaitsMutants() []mutant {
	return []mutant{
		{
			Name: "waits/any-wait-flagged",
			File: "internal/layout/waits_test.go",
			Pkg:  "./internal/layout",
			Old:  "\t\t\t\tif !isSynctestWait(n) {",
			New:  "\t\t\t\tif true {",
			Run:  "TestWaitCheckFlagsBlockingWaits",
			Why:  "synctest.Wait returns once its bubble is blocked: the wait check does not flag it",
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

// leaseMutants guards the code of internal/lease/lease.go.
func leaseMutants() []mutant {
	return []mutant{
		// Leases: the cross-process refresh lock and the run lock.
		{
			Name: "lease/release-without-owner-check",
			File: "internal/lease/lease.go",
			Pkg:  "./internal/lease",
			Old:  "_, _ = l.kv.CompareAndDelete(context.WithoutCancel(ctx), l.key, l.owner)",
			New:  "_ = l.kv.Del(context.WithoutCancel(ctx), l.key)",
			Run:  "^(TestLeaseIsOnlyItsOwners)$",
			Why:  "a holder whose lease expired does not free the lock its successor now holds",
		},
		{
			Name: "lease/renewal-removed",
			File: "internal/lease/lease.go",
			Old:  "case <-tick.C:",
			New:  "case <-make(chan time.Time): // mutant: never renews",
			Run:  "^(TestTokenStoreLeaseRenewedDuringSlowRefresh)$",
			Why:  "a refresh slower than the lease keeps its lock, so no other instance refreshes at the same time",
		},
		{
			Name: "engine/run-lock-removed",
			File: "internal/lease/lease.go",
			Old:  "\tif take.OK {\n",
			New:  "\tif true {\n",
			Run:  "^(TestEngineFireHoldsTheRunLock|TestEngineFireSerialisedAcrossInstances)$",
			Why:  "fires of one run are serialised (across instances): a transition never runs twice",
		},
		{
			Name: "engine/trust-a-stale-proof",
			File: "internal/lease/lease.go",
			Old:  "\treturn p != 0 && l.now().UnixNano()-p < int64(l.trustedFor())\n",
			New:  "\treturn p != 0\n",
			Run:  "^(TestCompletionAbandonedByItsInstanceIsFailedByAnother|TestRunLockFreedOnlyByItsHolder)$",
			Why:  "a run lock proven long ago is asked about again before a write: the holder may have hung past its lease",
		},
		{
			Name: "runlock/release-plain-del",
			File: "internal/lease/lease.go",
			Old:  "\treturn &kv.Op{Kind: kv.OpCompareAndDelete, Key: l.key, Value: l.owner}\n",
			New:  "\t_ = l.kv.Del(context.Background(), l.key) // mutant: a plain DEL\n\treturn &kv.Op{Kind: kv.OpGet, Key: l.key}\n",
			Run:  "TestRunLockFreedOnlyByItsHolder",
			Why:  "a run hold's release frees the run's lock only while it holds it: a holder that outlived its lease leaves the next holder's lock alone",
		},
	}
}

// outboundRedirectsMutants guards the code of internal/outbound/redirects.go.
func outboundRedirectsMutants() []mutant {
	return []mutant{
		{
			Name: "redirect/chain-not-followed",
			File: "internal/outbound/redirects.go",
			Old:  "\tfor req.Response != nil && req.Response.Request != nil {\n",
			New:  "\tfor false {\n",
			Why:  "the origin a redirected hop is checked against is the caller's first request's",
			Run:  "TestClientKeepsTheTokenOff|TestTransportKeepsTheTokenOff",
		},
		{
			Name: "redirect/downgrade-same-origin",
			File: "internal/outbound/redirects.go",
			Old:  "return a.Scheme == b.Scheme && strings.EqualFold",
			New:  "return strings.EqualFold",
			Why:  "https to http on the same host and port is another origin: no token in the clear",
			Run:  "TestTransportKeepsTheTokenOffADowngrade",
		},
		{
			Name: "redirect/port-ignored",
			File: "internal/outbound/redirects.go",
			Old:  "strings.EqualFold(a.Hostname(), b.Hostname()) && port(a) == port(b)",
			New:  "strings.EqualFold(a.Hostname(), b.Hostname())",
			Why:  "another port on the same host is another origin",
			Run:  "TestClientKeepsTheTokenOffRedirectsToAnotherOrigin",
		},
		{
			Name: "redirect/proof-header-kept",
			File: "internal/outbound/redirects.go",
			Old:  "var credentialHeaders = []string{\"Authorization\", \"DPoP\"}",
			New:  "var credentialHeaders = []string{\"Authorization\"}",
			Why:  "a hop to another origin does not get the caller's DPoP proof either",
			Run:  "TestClientKeepsTheTokenOffRedirectsToAnotherOrigin",
		},
	}
}

// ratelimitMutants guards the code of internal/ratelimit/ratelimit.go.
func ratelimitMutants() []mutant {
	return []mutant{
		{
			Name: "scale/provider-unbounded-here",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tselect {\n\tcase slots <- struct{}{}:\n\tcase <-ctx.Done():\n\t\treturn nil, ctx.Err()\n\t}\n\trelease = func() { <-slots }\n",
			New:  "\trelease = func() { _ = slots }\n",
			Run:  "^(TestRefreshAhead(Concurrency|Rate|429).*|TestWorker.*)$",
			Why:  "one instance refreshes at most Concurrency of a provider's tokens at once",
		},
		{
			Name: "scale/fleet-rate-unbounded",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tif lim.PerSecond > 0 {\n",
			New:  "\tif false {\n",
			Run:  "^(TestRefreshAhead(Concurrency|Rate|429).*|TestWorker.*)$",
			Why:  "the fleet refreshes a provider's tokens at most PerSecond a second",
		},
		{
			Name: "scale/slow-down-ignored",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed {",
			New:  "\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed && false {",
			Run:  "^(TestRefreshAhead(Concurrency|Rate|429).*|TestWorker.*)$",
			Why:  "no instance refreshes ahead a provider the fleet is slowed down for",
		},
		{
			Name: "scale/slow-down-asked-too-early",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tslots := l.slotsOf(key, lim.Concurrency)\n\tif l.OnQueue != nil {\n\t\tl.OnQueue()\n\t}\n\tselect {\n\tcase slots <- struct{}{}:\n\tcase <-ctx.Done():\n\t\treturn nil, ctx.Err()\n\t}\n\trelease = func() { <-slots }\n\t// Asked once the slot is held: work that waited for it while\n\t// another heard 429 does not go out after all.\n\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed {\n\t\trelease()\n\t\tif err == nil {\n\t\t\terr = &SlowedDownError{Until: until}\n\t\t}\n\t\treturn nil, err\n\t}\n",
			New:  "\tif until, slowed, err := l.slowedUntil(ctx, key); err != nil || slowed {\n\t\tif err == nil {\n\t\t\terr = &SlowedDownError{Until: until}\n\t\t}\n\t\treturn nil, err\n\t}\n\tslots := l.slotsOf(key, lim.Concurrency)\n\tif l.OnQueue != nil {\n\t\tl.OnQueue()\n\t}\n\tselect {\n\tcase slots <- struct{}{}:\n\tcase <-ctx.Done():\n\t\treturn nil, ctx.Err()\n\t}\n\trelease = func() { <-slots }\n",
			Run:  "^(TestRefreshAheadQueuedBehind429)$",
			Why:  "a refresh that waited for a slot while another heard 429 does not go out after it",
		},
		{
			Name: "worker/stale-permit-used",
			File: "internal/ratelimit/ratelimit.go",
			Pkg:  "./internal/ratelimit",
			Old:  "err == nil && k < perSecond && strconv.Itoa(k) == got[0]",
			New:  "err == nil && k < 1<<30 && strconv.Itoa(k) == got[0]",
			Run:  "^(TestPermits.*)$",
			Why:  "a permit a higher, older limit put in the bucket is removed, not used: a lowered PerSecond lowers the rate",
		},
		{
			Name: "worker/lost-bucket-not-refilled",
			File: "internal/ratelimit/ratelimit.go",
			Pkg:  "./internal/ratelimit",
			Old:  "\tif !missing {\n\t\treturn mended, nil\n\t}\n",
			New:  "\tif true {\n\t\treturn mended, nil\n\t}\n",
			Run:  "^(TestPermitsRefilledAfterTheBucketIsLost)$",
			Why:  "a bucket of permits the store lost is filled again, so refresh ahead does not stop",
		},
		{
			Name: "worker/fast-clock-lease-kept",
			File: "internal/ratelimit/ratelimit.go",
			Pkg:  "./internal/ratelimit",
			Old:  "\t\tif ok && due > farthest {\n",
			New:  "\t\tif false && ok && due > farthest {\n",
			Run:  "^(TestPermits.*)$",
			Why:  "a permit leased into the future by a clock running ahead is freed for the rest of the fleet",
		},
		{
			Name: "worker/limiter-unbounded",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\tif len(l.slots) < bound && len(l.buckets) < bound {\n",
			New:  "\tif bound > 0 {\n",
			Run:  "^(TestRefreshLimiterBoundedWithTheRegistry)$",
			Why:  "the refresh limiter lets go of what it kept for providers the registry let go",
		},
		{
			Name: "worker/limiter-drops-busy-slots",
			File: "internal/ratelimit/ratelimit.go",
			Old:  "\t\tif len(c) == 0 && !has(id) {\n",
			New:  "\t\tif len(c) >= 0 && !has(id) {\n",
			Run:  "^(TestRefreshLimiterBoundedWithTheRegistry)$",
			Why:  "a provider's slots are kept while a refresh holds one, so its Concurrency still bounds it",
		},
	}
}

// runstoreMutants guards the code of internal/runstore/runstore.go.
func runstoreMutants() []mutant {
	return []mutant{
		{
			Name: "engine/released-before-saved",
			File: "internal/runstore/runstore.go",
			Old:  "\tops := slices.Concat(h.first, h.save, h.tidy, []*kv.Op{h.lease.ReleaseOp()})\n",
			New:  "\tops := slices.Concat([]*kv.Op{h.lease.ReleaseOp()}, h.first, h.save, h.tidy)\n",
			Run:  "^(TestEngineRunSavedBeforeItsLockIsFree)$",
			Why:  "a run's last save lands before its lock is free: the next holder reads what this one wrote",
		},
		{
			Name: "engine/take-write-unchecked",
			File: "internal/runstore/runstore.go",
			Old:  "\t\t\tif op.Err != nil {\n\t\t\t\treturn errs.Store(ctx, \"write with the run's lock\", op.Err)\n\t\t\t}\n",
			New:  "\t\t\tif false && op.Err != nil {\n\t\t\t\treturn errs.Store(ctx, \"write with the run's lock\", op.Err)\n\t\t\t}\n",
			Run:  "^(TestTakeWriteFailedRunsNothing)$",
			Why:  "a write sent with a run lock's take (a completion's watch) lands before the run's transition runs",
		},
		{
			Name: "engine/save-without-holding",
			File: "internal/runstore/runstore.go",
			Old:  "\tif !held {\n\t\treturn fmt.Errorf(\"run %s: %w\", id, lease.ErrLost)\n\t}\n",
			New:  "\tif false && !held {\n\t\treturn fmt.Errorf(\"run %s: %w\", id, lease.ErrLost)\n\t}\n",
			Run:  "^(TestCompletionAbandonedByItsInstanceIsFailedByAnother|TestRunLockFreedOnlyByItsHolder)$",
			Why:  "an instance that hung past its run lock's lease rewrites neither the run nor its documents",
		},
		{
			Name: "edges/unsaved-run-tidied",
			File: "internal/runstore/runstore.go",
			Old:  "\tif h.saveFailed { // a record not saved keeps its due work\n",
			New:  "\tif false {\n",
			Why:  "a run whose last save failed keeps its due work (its sign-in's lapse)",
			Run:  "TestUnsavedEndKeepsItsDueWork",
		},
		{
			Name: "engine/failed-last-save-sent",
			File: "internal/runstore/runstore.go",
			Old:  "\tif err != nil {\n\t\th.save, h.saveFailed = nil, true\n\t\treturn err\n\t}\n",
			New:  "\tif err != nil {\n\t\th.save = ops\n\t\treturn err\n\t}\n",
			Run:  "TestUnsavedEndKeepsItsDueWork|TestReleaseSavesBeforeTheLockIsFree",
			Why:  "a last save that could not be made is not sent with the release, and the run keeps its due work",
		},
		{
			Name: "runstore/own-writes-after-the-save",
			File: "internal/runstore/runstore.go",
			Pkg:  "./internal/runstore",
			Old:  "\tops := slices.Concat(h.first, h.save, h.tidy, []*kv.Op{h.lease.ReleaseOp()})\n",
			New:  "\tops := slices.Concat(h.save, h.first, h.tidy, []*kv.Op{h.lease.ReleaseOp()})\n",
			Run:  "^(TestReleaseSendsItsOwnWritesFirst)$",
			Why:  "a call's own writes (a sign-in's tokens) go before the run's save in the release's batch: the end is not saved without them",
		},
		{
			Name: "runstore/own-writes-dropped-with-the-save",
			File: "internal/runstore/runstore.go",
			Old:  "\t\th.tidy = nil\n\t}\n\tops := slices.Concat(",
			New:  "\t\th.tidy, h.first = nil, nil\n\t}\n\tops := slices.Concat(",
			Run:  "^(TestCompletionAbandonedByItsInstanceIsFailedByAnother)$",
			Why:  "a completion that lost its run's lock still keeps the grant its code bought",
		},
		{
			Name: "runstore/own-writes-unread",
			File: "internal/runstore/runstore.go",
			Pkg:  "./internal/runstore",
			Old:  "\tfor _, landed := range h.landed {\n\t\terr = errors.Join(err, landed(ctx))\n\t}\n",
			New:  "\t_ = errors.Join\n",
			Run:  "^(TestReleaseSendsItsOwnWritesFirst)$",
			Why:  "the writes sent with a release are read once the batch has run, and their failure is the release's",
		},
		{
			Name: "runstore/with-save-kept-twice",
			File: "internal/runstore/runstore.go",
			Pkg:  "./internal/runstore",
			Old:  "\th.withSave = slices.DeleteFunc(h.withSave, func(o *kv.Op) bool { return o.Key == op.Key })\n",
			New:  "",
			Run:  "^(TestWithSaveGoesWithTheNextSave)$",
			Why:  "a later write of a document to go with the save replaces the earlier one",
		},
	}
}

// sealMutants guards the code of internal/seal/seal.go.
func sealMutants() []mutant {
	return []mutant{
		// Encryption at rest and re-encryption.
		{
			Name: "crypt/record-not-bound-to-its-name",
			File: "internal/seal/seal.go",
			Old:  "func boundTo(name string) []byte { return unsafe.Slice(unsafe.StringData(name), len(name)) }",
			New:  "func boundTo(name string) []byte { return unsafe.Slice(unsafe.StringData(name), 0) }",
			Why:  "a sealed record copied under another user's key does not open there",
			Run:  "TestSealedRecordMovedToAnotherKeyDoesNotOpen",
		},
		{
			Name: "crypt/unknown-key-is-corrupt",
			File: "internal/seal/seal.go",
			Old:  "return nil, fmt.Errorf(\"%w: key ID %q\", ErrUnknownKey, id)",
			New:  "return nil, fmt.Errorf(\"%w: %w: key ID %q\", errs.CorruptRecord, ErrUnknownKey, id)",
			Why:  "a record under a key the ring lacks is never deleted, by a read or a disconnect",
			Run:  "TestEncryptionKeyRotation",
		},
		{
			Name: "seal/raw-form-length-unchecked",
			File: "internal/seal/seal.go",
			Pkg:  "./internal/seal",
			Old:  "\tif len(raw) < k.aead.NonceSize()+k.aead.Overhead() {\n",
			New:  "\tif own && len(raw) < k.aead.NonceSize()+k.aead.Overhead() {\n",
			Run:  "^(FuzzOpenRecord|TestRawFormWithAColonInItsBytes)$",
			Why:  "a raw-form record too short for a nonce and a tag is corrupt, never a panic",
		},
		{
			Name: "seal/text-form-not-sealed",
			File: "internal/seal/seal.go",
			Old:  "return bytes.HasPrefix(b, []byte(RawMark)) || bytes.HasPrefix(b, []byte(TextMark))",
			New:  "return bytes.HasPrefix(b, []byte(RawMark))",
			Run:  "^(TestReencryptRewritesTheTextForm)$",
			Why:  "a record sealed in the text form (enc1), as every record was before the raw form, still opens",
		},
		{
			Name: "seal/text-form-read-as-raw",
			File: "internal/seal/seal.go",
			Pkg:  "./internal/seal",
			Old:  "\tif !bytes.HasPrefix(b, []byte(TextMark)) {\n\t\treturn body, false\n",
			New:  "\tif true {\n\t\treturn body, false\n",
			Run:  "^(TestOpenReadsBothForms)$",
			Why:  "the text form's body is base64 and is decoded before it opens",
		},
		{
			Name: "seal/records-stored-plain",
			File: "internal/seal/seal.go",
			Old:  "\tif r == nil {\n\t\treturn plain\n\t}\n\tk := r.current\n\thead, nonceLen",
			New:  "\tif true {\n\t\treturn plain\n\t}\n\tk := r.current\n\thead, nonceLen",
			Run:  "^(TestEncryptedKeyspaceHoldsNoSecrets|TestDPoPBindsASignInToAKeyEveryInstanceHolds|TestReconnectLinkSealed|TestInteropDPoP)$",
			Why:  "the at-rest scans fail on a record whose tokens are stored in the clear",
		},
		{
			Name: "mcp/records-stored-plain",
			File: "internal/seal/seal.go",
			Pkg:  "./mcpauth",
			Old:  "\tif r == nil {\n\t\treturn plain\n\t}\n\tk := r.current\n\thead, nonceLen",
			New:  "\tif true {\n\t\treturn plain\n\t}\n\tk := r.current\n\thead, nonceLen",
			Run:  "^(TestDynamicRegistrationIsSealedAtRest|TestGrantKeyIsSealedAtRest)$",
			Why:  "the at-rest scans fail on a registration or a token stored in the clear",
		},
	}
}

// webAnswerMutants guards the code of internal/web/answer.go.
func webAnswerMutants() []mutant {
	return []mutant{
		// A sign-in completes without JavaScript (the frontend page's no-script form).
		{
			Name: "nojs/form-reflects-any-field",
			File: "internal/web/answer.go",
			Pkg:  "./internal/web",
			Old:  "\tfor _, name := range answerFields {\n",
			New:  "\tfor name := range q {\n",
			Why:  "the callback page's form reflects the provider's answer only, never another parameter of the address",
			Run:  "TestCallbackPageFormCarriesTheAnswerWithoutScript",
		},
		{
			Name: "nojs/form-fields-unbounded",
			File: "internal/web/answer.go",
			Pkg:  "./internal/web",
			Old:  "\t\tif len(v) > maxFieldLen {\n",
			New:  "\t\tif false {\n",
			Why:  "a field longer than any real answer's gets no form and is not reflected",
			Run:  "TestCallbackPageWithoutAWholeAnswerHasNoForm",
		},
		{
			Name: "nojs/form-without-a-whole-answer",
			File: "internal/web/answer.go",
			Pkg:  "./internal/web",
			Old:  `if err != nil || q.Get("state") == "" || q.Get("code") == "" && q.Get("error") == "" {`,
			New:  `if err != nil {`,
			Why:  "an address without a state, and a code or an error, gets no form",
			Run:  "TestCallbackPageWithoutAWholeAnswerHasNoForm",
		},
		{
			Name: "pages/form-forwards-undeclared",
			File: "internal/web/answer.go",
			Pkg:  "./internal/web",
			Old:  "if isFieldName(n) && !IsAnswerField(n) && !slices.Contains(out, n) {",
			New:  "if !slices.Contains(out, n) {",
			Run:  "^(TestCallbackPageCarriesDeclaredFields)$",
			Why:  "the callback page names only parameter names, never one of the answer's own",
		},
		{
			Name: "pages/form-extra-unbounded",
			File: "internal/web/answer.go",
			Pkg:  "./internal/web",
			Old:  "len(v) <= maxFieldLen && kept < maxExtraFields {",
			New:  "true {",
			Run:  "^(TestCallbackPageCarriesDeclaredFields)$",
			Why:  "the no-script form carries at most eight extra fields, none longer than a real one",
		},
	}
}

// webPageMutants guards the code of internal/web/page.go.
func webPageMutants() []mutant {
	return []mutant{
		{
			Name: "nojs/form-values-unescaped",
			File: "internal/web/page.go",
			Pkg:  "./internal/web",
			Old:  "\t\"html/template\"\n",
			New:  "\t\"text/template\"\n",
			Why:  "the answer reaches the page escaped for its context, never as markup",
			Run:  "TestCallbackPageFormCarriesTheAnswerWithoutScript|TestCallbackPageReflectsTheAnswerOnlyInItsForm",
		},
	}
}

// webMutants guards the code of internal/web/web.go.
func webMutants() []mutant {
	return []mutant{
		{
			Name: "nojs/form-action-anywhere",
			File: "internal/web/web.go",
			Pkg:  "./internal/web",
			Old:  `"; base-uri 'none'; form-action " + sources + "; frame-ancestors 'none'"`,
			New:  `"; base-uri 'none'; form-action *; frame-ancestors 'none'"`,
			Why:  "the callback page's forms may go to its own origin and the API's only",
			Run:  "TestCallbackPageFormActionIsTheAPIOnly",
		},
	}
}

// webAssetsCallbackMutants guards the code of internal/web/assets/callback.js.
func webAssetsCallbackMutants() []mutant {
	return []mutant{
		{
			Name: "pages/script-drops-fields",
			File: "internal/web/assets/callback.js",
			Old:  "      fields.fields = extra;\n",
			New:  "",
			Run:  "^(TestBrowserCrossOriginDirectCallbackKeepsDeclaredFields)$",
			Why:  "the callback page's script forwards the declared fields it read",
		},
	}
}

// webAssetsOauthPromptMutants guards the code of internal/web/assets/oauth-prompt.js.
func webAssetsOauthPromptMutants() []mutant {
	return []mutant{
		{
			Name: "pages/widget-drops-fields",
			File: "internal/web/assets/oauth-prompt.js",
			Old:  "        body.fields = extra;\n",
			New:  "",
			Run:  "^(TestBrowserCrossOriginDirectCallbackKeepsDeclaredFields)$",
			Why:  "POST /complete carries the callback's declared fields",
		},
		{
			Name: "pages/widget-text-unfiltered",
			File: "internal/web/assets/oauth-prompt.js",
			Pkg:  "./internal/web",
			Old:  "return String(s || \"\").replace(UNSHOWN, \"\").trim();",
			New:  "return String(s || \"\").trim();",
			Run:  "^TestJavaScript$",
			Why:  "the widget shows a server's error text without control, format or bidi characters",
		},
		{
			Name: "pages/widget-complete-link-any-origin",
			File: "internal/web/assets/oauth-prompt.js",
			Pkg:  "./internal/web",
			Old:  "if (c.origin === u.origin && !c.username",
			New:  "if (!c.username",
			Run:  "^TestJavaScript$",
			Why:  "the widget draws a QR code of the complete URI only on the verification URI's origin",
		},
		{
			Name: "pages/widget-complete-link-plain-http",
			File: "internal/web/assets/oauth-prompt.js",
			Pkg:  "./internal/web",
			Old:  "(c.protocol === \"https:\" || c.protocol === \"http:\" && loopback)",
			New:  "(c.protocol === \"https:\" || c.protocol === \"http:\")",
			Run:  "^TestJavaScript$",
			Why:  "the widget draws a plain-http complete URI only on a loopback host",
		},
	}
}

// workerMutants guards the code of internal/worker/worker.go.
func workerMutants() []mutant {
	return []mutant{
		{
			Name: "worker/one-piece-at-a-time",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\t\tgo w.run(ctx, p)\n",
			New:  "\t\tw.run(ctx, p)\n",
			Why:  "a pass does its pieces side by side, so refreshes ahead that wait on providers do not queue behind each other",
			Run:  "TestWorkerPassRunsPiecesSideBySide",
		},
		{
			Name: "scale/one-claim-a-tick",
			File: "internal/worker/worker.go",
			Old:  "\t\tif err != nil || len(members) < want {\n",
			New:  "\t\tif _ = err; true {\n",
			Run:  "^(TestRefreshAhead(Concurrency|Rate|429).*|TestWorker.*)$",
			Why:  "work due in bulk is claimed again as pieces end, not one claim a tick",
		},
		{
			Name: "worker/claim-without-lease",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "kv.ClaimSharded(ctx, w.kv, Index, w.now(), Lease, n)",
			New:  "kv.ClaimSharded(ctx, w.kv, Index, w.now(), 0, n)",
			Run:  "TestWorkerClaimLeasesTheWork",
			Why:  "a claimed piece of work is leased: no other pass takes it again, and a failing job waits out its lease",
		},
		{
			Name: "worker/claims-the-old-index",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "kv.ClaimSharded(ctx, w.kv, Index, w.now(), Lease, n)",
			New:  "w.kv.Claim(ctx, Index, w.now(), Lease, n)",
			Run:  "^(TestWorkersRacingRunEachPieceOnce)$",
			Why:  "the worker claims from the sharded index, where its work is written, and from the earlier layout through it",
		},
		{
			Name: "worker/provider-takes-the-worker",
			File: "internal/worker/worker.go",
			Old:  "\tcase p.group != \"\" && w.busy[p.group] >= sh.GroupMost:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestWorkerNotStarvedByAHangingProvider)$",
			Why:  "one provider's refreshes ahead hold at most their share of the worker: a hanging endpoint leaves room for others",
		},
		{
			Name: "worker/kind-takes-the-worker",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\tcase w.busy[p.kind] >= sh.Most:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "one kind of work holds at most its share of the worker: a hanging kind leaves room for the others",
		},
		{
			Name: "worker/held-never-started",
			File: "internal/worker/worker.go",
			Old:  "\t\t\t\tw.count(p, 1)\n\t\t\t\treturn p, true\n",
			New:  "\t\t\t\treturn piece{}, false\n",
			Run:  "^(TestWorkerNotStarvedByAHangingProvider)$",
			Why:  "a piece held back for its share starts when a piece of that share ends",
		},
		{
			Name: "worker/looks-past-a-backlog-unbounded",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\t\tif w.backSpent(w.now()) {\n",
			New:  "\t\tif false {\n",
			Run:  "^(TestWorkerLooksPastABacklogABoundedWayEachSecond)$",
			Why:  "a drain puts back at most maxBack claimed pieces a second: a backlog no share has room for is not claimed and put back whole every pass",
		},
		{
			Name: "worker/look-ahead-never-renewed",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\t\tw.backFrom, w.nBack = now, 0\n",
			New:  "\t\tw.backFrom = now\n",
			Run:  "^(TestWorkerLooksPastABacklogABoundedWayEachSecond)$",
			Why:  "each second brings a new allowance of pieces to put back, so what is due behind a backlog is reached",
		},
		{
			Name: "worker/held-unbounded",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\tcase w.nHeld < maxHeld:\n",
			New:  "\tcase w.nHeld >= 0:\n",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "the worker holds back at most maxHeld claimed pieces; the rest go back to the index for a second",
		},
		{
			Name: "worker/put-back-a-lease-away",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\t\tkv.RunBatch(ctx, w.kv, again...)",
			New:  "\t\t_ = again",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "a piece with no room is due again in a second, not left leased for a minute",
		},
		{
			Name: "worker/held-started-late",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\t\t\tif now.Sub(p.claimed) >= Lease/2 {\n",
			New:  "\t\t\tif now.IsZero() {\n",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "a piece held for half a lease is let go, not started where it could outlive its lease",
		},
		{
			Name: "worker/held-started-after-stop",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\tif ctx.Err() != nil {\n\t\treturn piece{}, false // the worker stops: what is held waits out its lease\n\t}\n",
			New:  "",
			Run:  "^(TestWorkerStartsNoHeldPieceOnceStopped)$",
			Why:  "once the worker stops, the pieces it holds back are not started (Close would wait on them)",
		},
		{
			Name: "worker/rescheduled-entry-removed",
			File: "internal/worker/worker.go",
			Pkg:  "./internal/worker",
			Old:  "\tif rescheduled {\n\t\treturn // the job placed its entry itself\n\t}\n",
			New:  "\t_ = rescheduled\n",
			Run:  "^(TestWorkerKeepsTheEntryAJobRescheduled)$",
			Why:  "a job that placed its own entry keeps it: the worker removes only the entries of work that is done",
		},
	}
}

// clientauthAssertionMutants guards the code of internal/clientauth/assertion.go.
func clientauthAssertionMutants() []mutant {
	return []mutant{
		{
			Name: "pkjwt/assertion-audience",
			File: "internal/clientauth/assertion.go",
			Pkg:  "./internal/clientauth",
			Old:  "Aud: s.cfg.Audience,",
			New:  "Aud: s.cfg.ClientID,",
			Run:  "^(TestAssertionClaims)$",
			Why:  "a client assertion's aud is the authorization server's issuer",
		},
		{
			Name: "pkjwt/assertion-lifetime-long",
			File: "internal/clientauth/assertion.go",
			Pkg:  "./internal/clientauth",
			Old:  "const Lifetime = time.Minute",
			New:  "const Lifetime = 10 * time.Minute",
			Run:  "^(TestAssertionClaims)$",
			Why:  "a client assertion is good for a minute (FAPI 2.0 asks for short-lived ones)",
		},
		{
			Name: "pkjwt/assertion-jti-reused",
			File: "internal/clientauth/assertion.go",
			Pkg:  "./internal/clientauth",
			Old:  "Jti: rand.Text()",
			New:  "Jti: rand.Text()[:0] + s.cfg.ClientID",
			Run:  "^(TestAssertionJTIsFresh|TestAuthenticate)$",
			Why:  "every client assertion has a random jti of its own",
		},
	}
}

// clientauthKeyMutants guards the code of internal/clientauth/key.go.
func clientauthKeyMutants() []mutant {
	return []mutant{
		{
			Name: "pkjwt/rsa-signs-rs256-unnamed",
			File: "internal/clientauth/key.go",
			Pkg:  "./internal/clientauth",
			Old:  "algs = []string{PS256, RS256}",
			New:  "algs = []string{RS256, PS256}",
			Run:  "^(TestAlgorithm|TestAssertionSignatures)$",
			Why:  "an RSA key signs PS256 unless RS256 is named (FAPI 2.0 does not allow RS256)",
		},
		{
			Name: "pkjwt/ecdsa-any-curve",
			File: "internal/clientauth/key.go",
			Pkg:  "./internal/clientauth",
			Old:  "\t\tif k.Curve != elliptic.P256() {\n",
			New:  "\t\tif k.Curve != elliptic.P256() && false {\n",
			Run:  "^(TestAlgorithm)$",
			Why:  "an ECDSA key signs ES256 only on P-256",
		},
	}
}

// authserverAssertionMutants guards the code of internal/testkit/authserver/assertion.go.
func authserverAssertionMutants() []mutant {
	return []mutant{
		{
			Name: "authserver/assertion-jti-reusable",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tif !s.assertions.spend(client.ID+\" \"+a.claims.Jti, exp, s.now()) {\n",
			New:  "\tif _ = exp; false {\n",
			Run:  "^(TestClientAssertionIsSingleUse)$",
			Why:  "the fake provider takes a client assertion's jti once, as the tests' oracle of fresh assertions",
		},
		{
			Name: "authserver/assertion-any-audience",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tcase aud != issuer:\n",
			New:  "\tcase false && aud != issuer:\n",
			Run:  "^(TestClientAssertionChecks)$",
			Why:  "the fake provider takes a client assertion only for its issuer, as a single string",
		},
		{
			Name: "authserver/assertion-long-lived",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tcase exp.Sub(iat) > MaxAssertionLifetime:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestClientAssertionChecks)$",
			Why:  "the fake provider refuses a client assertion good for more than five minutes",
		},
		{
			Name: "authserver/assertion-expired",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tcase !now.Before(exp):\n",
			New:  "\tcase false:\n",
			Run:  "^(TestClientAssertionChecks)$",
			Why:  "the fake provider refuses an expired client assertion",
		},
		{
			Name: "authserver/assertion-issued-in-the-future",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tcase iat.After(now.Add(assertionSkew)):\n",
			New:  "\tcase false:\n",
			Run:  "^(TestClientAssertionChecks)$",
			Why:  "an assertion issued in the future would outlive the lifetime bound",
		},
		{
			Name: "authserver/assertion-signature-unchecked",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tcase !a.verify(client.PublicKey):\n",
			New:  "\tcase false:\n",
			Run:  "^(TestClientAssertionChecks)$",
			Why:  "the fake provider takes a client assertion only signed by the client's key, with an algorithm of that key",
		},
		{
			Name: "authserver/assertion-sub-unchecked",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tcase c.Iss != clientID || c.Sub != clientID:\n",
			New:  "\tcase c.Iss != clientID:\n",
			Run:  "^(TestClientAssertionChecks)$",
			Why:  "a client assertion is issued by and about the client: iss and sub are both its ID",
		},
		{
			Name: "authserver/assertion-other-client-id",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tcase form.Has(\"client_id\") && form.Get(\"client_id\") != client.ID:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestClientAssertionChecks)$",
			Why:  "a request's client_id names the client its assertion authenticates",
		},
		{
			Name: "authserver/assertion-beside-a-secret",
			File: "internal/testkit/authserver/assertion.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tif r.Header.Get(\"Authorization\") != \"\" || form.Has(\"client_secret\") {\n",
			New:  "\tif false {\n",
			Run:  "^(TestClientAssertionIsTheOnlyMethod)$",
			Why:  "a request authenticates its client one way: an assertion beside a secret or a Basic header is refused",
		},
	}
}

// authserverClientauthMutants guards the code of internal/testkit/authserver/clientauth.go.
func authserverClientauthMutants() []mutant {
	return []mutant{
		{
			Name: "authserver/key-client-without-assertion",
			File: "internal/testkit/authserver/clientauth.go",
			Pkg:  "./internal/testkit/authserver",
			Old:  "\tif client == nil || client.PublicKey != nil { // a client with a key authenticates with it alone\n",
			New:  "\tif client == nil {\n",
			Run:  "^(TestClientAssertionIsTheOnlyMethod)$",
			Why:  "a client with a public key authenticates with private_key_jwt alone, never a secret or its client_id",
		},
	}
}

// webAssetsOauthConnectionsMutants guards the code of internal/web/assets/oauth-connections.js.
func webAssetsOauthConnectionsMutants() []mutant {
	const file, pkg, run = "internal/web/assets/oauth-connections.js", "./internal/web", "^TestJavaScript$"
	return []mutant{
		{
			Name: "pages/connections-text-unfiltered",
			File: file, Pkg: pkg, Run: run,
			Old: `var t = typeof s === "string" ? s.replace(UNSHOWN, "").trim() : "";`,
			New: `var t = typeof s === "string" ? s.trim() : "";`,
			Why: "the connections widget shows a provider's text without control, format or bidi characters",
		},
		{
			Name: "pages/connections-health-as-given",
			File: file, Pkg: pkg, Run: run,
			Old: `var health = Object.prototype.hasOwnProperty.call(STATES, c.health) && c.health !== "none" ? c.health : "unknown";`,
			New: `var health = c.health;`,
			Why: "the connections widget shows only the states it knows, any other as unknown",
		},
		{
			Name: "pages/connections-no-write-header",
			File: file, Pkg: pkg, Run: run,
			Old: "      init.headers[WRITE_HEADER] = WRITE_HEADER_VALUE;\n",
			New: "",
			Why: "the connections widget's writes carry the header a cross-site form cannot send",
		},
		{
			Name: "pages/connections-cookies-same-origin-only",
			File: file, Pkg: pkg, Run: run,
			Old: `var init = { method: method, credentials: "include",`,
			New: `var init = { method: method, credentials: "same-origin",`,
			Why: "the connections widget sends the app's cookies to an API on another origin, which names the user by them",
		},
		{
			Name: "pages/connections-disconnect-unasked",
			File: file, Pkg: pkg, Run: run,
			Old: "        this._askDisconnect(row, button);",
			New: "        this._confirming = { row: row, button: button };\n        this._disconnect();",
			Why: "the connections widget disconnects only once the user confirms",
		},
		{
			Name: "pages/connections-path-unescaped",
			File: file, Pkg: pkg, Run: run,
			Old: `"/" + encodeURIComponent(row.id)`,
			New: `"/" + row.id`,
			Why: "the connections widget names the provider to disconnect as one path segment",
		},
		{
			Name: "pages/connections-reconnect-unoffered",
			File: file, Pkg: pkg, Run: run,
			Old: `if (row.offered && c && c.health !== "healthy") {`,
			New: `if (c && c.health !== "healthy") {`,
			Why: "the connections widget offers Reconnect only for a provider the app offers",
		},
		{
			Name: "pages/connections-stale-listing",
			File: file, Pkg: pkg, Run: run,
			Old: "        if (load !== self._loads) {\n          return;\n        }\n        self.removeAttribute",
			New: "        self.removeAttribute",
			Why: "the connections widget shows only its latest listing",
		},
		{
			Name: "pages/connections-follows-any-link",
			File: file, Pkg: pkg, Run: run,
			Old: "      if (!isHTTPURL(a.doc.authUrl)) {",
			New: "      if (false) {",
			Why: "a full-page sign-in goes only to an http(s) link",
		},
		{
			Name: "pages/connections-announces-unlisted",
			File: file, Pkg: pkg, Run: run,
			Old: "      var row = r && this._rowOf(r.provider);",
			New: "      var row = r && (this._rowOf(r.provider) || { id: r.provider, name: r.provider, connection: null });",
			Why: "the address's outcome is announced only for a provider the listing names, in the widget's words",
		},
	}
}
