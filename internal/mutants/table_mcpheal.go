package main

// mcphealGuards are the guards of issue 31 items 1, 5 and 11: a refusal the
// browser brings heals nothing the server did not refuse; one grant binding
// per connection; a registration no one signed in with expires with its
// server record.
func mcphealGuards() []mutant {
	return []mutant{
		{
			Name: "mcpheal/claimed-refusal-heals-unchecked",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "if err != nil || !p.refusalConfirmed(ctx, inner, from) {",
			New:  "if _ = from; err != nil {",
			Run:  "TestForgedRefusalEndsNoOnesGrant",
			Why:  "a refusal claimed at the authorization page replaces the client every grant was issued to only when the token endpoint confirms it",
		},
		{
			Name: "mcpheal/refusal-confirmed-by-any-error",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "return errors.As(err, &pe) && clientRefused(pe.Code)",
			New:  "return err != nil && pe == nil",
			Run:  "TestForgedRefusalEndsNoOnesGrant",
			Why:  "only the token endpoint's refusal of the client (invalid_client, unauthorized_client) confirms a claimed refusal, not invalid_grant for the unknown token",
		},
		{
			Name: "mcpheal/refusal-checked-for-the-apps-client",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "\tif _, preset := p.c.preset(&from.Discovery); preset {\n\t\treturn false\n\t}\n",
			New:  "",
			Run:  "TestClaimedRefusalOfTheAppsClientIsNotChecked",
			Why:  "a refusal claimed for the app's own client sends no request with its credentials: it is never healed",
		},
	}
}
