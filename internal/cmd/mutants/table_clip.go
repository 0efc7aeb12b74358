package main

// clippedErrors are the bounds of the error text a token endpoint chooses,
// cut where its answer is parsed (review 3, hole 4).
func clippedErrors() []mutant {
	return []mutant{
		{
			Name: "clip/provider-error-code-whole",
			File: "providers/tokenresponse.go",
			Pkg:  "./providers",
			Old:  "clip.String(string(tr.Error), clip.ErrorCode)",
			New:  "string(tr.Error)",
			Run:  "^TestProviderErrorTextIsBoundedWhereParsed$",
			Why:  "a token endpoint's error code is bounded where its answer is parsed",
		},
		{
			Name: "clip/workload-refusal-code-whole",
			File: "mcpauth/clientcreds.go",
			Pkg:  "./mcpauth",
			Old:  "clip.String(a.Error, clip.ErrorCode)",
			New:  "a.Error",
			Run:  "^TestWorkloadRefusalTextIsBounded$",
			Why:  "a grant's refusal keeps a bounded error code, for minutes and in the agent's error",
		},
	}
}
