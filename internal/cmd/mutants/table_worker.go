package main

// workerGuards are the guards of the worker's shares and of the fleet's
// bucket of refresh permits (issue 31).
func workerGuards() []mutant {
	const permits = "^(TestRefreshPermits.*)$"
	return []mutant{
		{
			Name: "worker/stale-permit-used",
			File: "limits.go",
			Old:  "err == nil && k < perSecond && strconv.Itoa(k) == got[0]",
			New:  "err == nil && k < 1<<30 && strconv.Itoa(k) == got[0]",
			Run:  permits,
			Why:  "a permit a higher, older limit put in the bucket is removed, not used: a lowered PerSecond lowers the rate",
		},
		{
			Name: "worker/lost-bucket-not-refilled",
			File: "limits.go",
			Old:  "\tif !missing {\n\t\treturn mended, nil\n\t}\n",
			New:  "\tif true {\n\t\treturn mended, nil\n\t}\n",
			Run:  "^(TestRefreshPermitsRefilledAfterTheBucketIsLost)$",
			Why:  "a bucket of permits the store lost is filled again, so refresh ahead does not stop",
		},
		{
			Name: "worker/fast-clock-lease-kept",
			File: "limits.go",
			Old:  "\t\tif ok && due > farthest {\n",
			New:  "\t\tif false && ok && due > farthest {\n",
			Run:  permits,
			Why:  "a permit leased into the future by a clock running ahead is freed for the rest of the fleet",
		},
		{
			Name: "worker/success-pages-unbounded",
			File: "handlers.go",
			Old:  "\tif c.n >= bound {\n",
			New:  "\tif c.n >= bound+1<<30 {\n",
			Run:  "^(TestSuccessPagesBoundedWithTheRegistry)$",
			Why:  "the success page cache keeps no more pages than the registry holds providers",
		},
		{
			Name: "worker/limiter-unbounded",
			File: "limits.go",
			Old:  "\tif bound := reg.bound(); len(l.slots) < bound && len(l.buckets) < bound {\n",
			New:  "\tif bound := reg.bound(); bound > 0 {\n",
			Run:  "^(TestRefreshLimiterBoundedWithTheRegistry)$",
			Why:  "the refresh limiter lets go of what it kept for providers the registry let go",
		},
		{
			Name: "worker/limiter-drops-busy-slots",
			File: "limits.go",
			Old:  "\t\tif len(c) == 0 && !reg.Has(id) {\n",
			New:  "\t\tif len(c) >= 0 && !reg.Has(id) {\n",
			Run:  "^(TestRefreshLimiterBoundedWithTheRegistry)$",
			Why:  "a provider's slots are kept while a refresh holds one, so its Concurrency still bounds it",
		},
		{
			Name: "worker/provider-takes-the-worker",
			File: "worker.go",
			Old:  "\tcase p.group != \"\" && w.busy[p.group] >= sh.groupMost:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestWorkerNotStarvedByAHangingProvider)$",
			Why:  "one provider's refreshes ahead hold at most their share of the worker: a hanging endpoint leaves room for others",
		},
		{
			Name: "worker/kind-takes-the-worker",
			File: "worker.go",
			Old:  "\tcase w.busy[p.kind] >= sh.most:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "one kind of work holds at most its share of the worker: a hanging kind leaves room for the others",
		},
		{
			Name: "worker/held-never-started",
			File: "worker.go",
			Old:  "\t\t\t\tw.count(p, 1)\n\t\t\t\treturn p, true\n",
			New:  "\t\t\t\treturn piece{}, false\n",
			Run:  "^(TestWorkerNotStarvedByAHangingProvider)$",
			Why:  "a piece held back for its share starts when a piece of that share ends",
		},
		{
			Name: "worker/held-unbounded",
			File: "worker.go",
			Old:  "\tcase w.nHeld < maxHeld:\n",
			New:  "\tcase w.nHeld >= 0:\n",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "the worker holds back at most maxHeld claimed pieces; the rest go back to the index for a second",
		},
		{
			Name: "worker/put-back-a-lease-away",
			File: "worker.go",
			Old:  "\t\tkv.RunBatch(ctx, w.kv, again...)",
			New:  "\t\t_ = again",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "a piece with no room is due again in a second, not left leased for a minute",
		},
		{
			Name: "worker/held-started-late",
			File: "worker.go",
			Old:  "\t\t\tif now.Sub(p.claimed) >= workLease/2 {\n",
			New:  "\t\t\tif now.IsZero() {\n",
			Run:  "^(TestWorkerHoldsBackWhatItsShareHasNoRoomFor)$",
			Why:  "a piece held for half a lease is let go, not started where it could outlive its lease",
		},
		{
			Name: "worker/held-started-after-stop",
			File: "worker.go",
			Old:  "\tif ctx.Err() != nil {\n\t\treturn piece{}, false // the worker stops: what is held waits out its lease\n\t}\n",
			New:  "",
			Run:  "^(TestWorkerStartsNoHeldPieceOnceStopped)$",
			Why:  "once the worker stops, the pieces it holds back are not started (Close would wait on them)",
		},
	}
}
