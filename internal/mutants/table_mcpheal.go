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
		{
			Name: "mcpheal/binding-kept-after-rotation",
			File: "mcpauth/migration.go",
			Pkg:  "./mcpauth",
			Old:  "\tif credential != refreshedWith {\n\t\tc.unbind(ctx, refreshedWith)\n\t}\n",
			New:  "",
			Run:  "TestOneGrantBindingPerConnection",
			Why:  "a rotated refresh token's binding replaces the one it was refreshed with: one binding per connection, not one per refresh",
		},
		{
			Name: "mcpheal/binding-dropped-when-kept",
			File: "mcpauth/migration.go",
			Pkg:  "./mcpauth",
			Old:  "\tif credential != refreshedWith {\n",
			New:  "\tif true {\n",
			Run:  "TestOneGrantBindingPerConnection",
			Why:  "a refresh token the server keeps (no rotation) keeps its binding",
		},
		{
			Name: "mcpheal/signin-binding-kept",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "\tif err == nil {\n\t\tp.c.signedIn(ctx, verifier)\n\t}\n",
			New:  "",
			Run:  "TestOneGrantBindingPerConnection",
			Why:  "a sign-in's binding (its PKCE challenge) goes once its code is exchanged",
		},
		{
			Name: "mcpheal/binding-kept-on-disconnect",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "\tp.c.unbind(ctx, token) // the store deletes the record either way\n",
			New:  "",
			Run:  "TestOneGrantBindingPerConnection|TestMovedServerLeavesNoGrantBinding",
			Why:  "a disconnect (the store revoking a record it deleted) deletes the grant's binding",
		},
		{
			Name: "mcpheal/binding-kept-on-dead-grant",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "\t\tp.c.unbind(ctx, refreshedWith) // a dead grant: the store deletes the record\n",
			New:  "",
			Run:  "TestOneGrantBindingPerConnection",
			Why:  "a refresh token the server refuses as a dead grant leaves no binding",
		},
		{
			Name: "mcpheal/binding-kept-on-issuer-change",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "\tp.c.unbind(ctx, refreshToken)\n\treturn &oauthflow.ProviderError{",
			New:  "\treturn &oauthflow.ProviderError{",
			Run:  "TestMovedServerLeavesNoGrantBinding",
			Why:  "a refresh token of another issuer, refused with no request made, leaves no binding",
		},
		{
			Name: "mcpheal/access-token-binding-90-days",
			File: "mcpauth/migration.go",
			Pkg:  "./mcpauth",
			Old:  "\t\t\tttl = time.Duration(ts.ExpiresIn)*time.Second + time.Minute\n",
			New:  "",
			Run:  "TestAccessTokenBindingLivesAsLongAsTheToken",
			Why:  "a grant bound by its access token alone is bound as long as the token lives",
		},
	}
}
