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
	}
}
