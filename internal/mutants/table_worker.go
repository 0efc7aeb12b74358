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
	}
}
