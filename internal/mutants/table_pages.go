package main

// pagesGuards are the guards of the callback, POST /start, the prompt's
// error paths and the frontend callback page (issue 31): what a provider or
// an authorization server says is bounded and filtered before it is kept,
// logged or shown, and a sign-in asks for the same thing however it opens.
func pagesGuards() []mutant {
	return []mutant{
		{
			Name: "pages/start-drops-dpop-jkt",
			File: "binding.go",
			Old:  "\treturn m.authURLOf(p, s, state)\n",
			New:  "\tunbound := *s\n\tunbound.DPoPKey = \"\"\n\treturn m.authURLOf(p, &unbound, state)\n",
			Run:  "^(TestBoundSignInStartKeepsDPoPKeyThumbprint)$",
			Why:  "a sign-in opened through POST /start names its key's thumbprint as dpop_jkt, like build_oauth_url (RFC 9449 §10)",
		},
	}
}
