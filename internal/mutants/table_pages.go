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
		{
			Name: "pages/prompt-code-unbounded",
			File: "oauthworkflow.go",
			Old:  "func shownCode(err error) string { return serverText(providerCode(err), maxErrorCodeLen) }",
			New:  "func shownCode(err error) string { return providerCode(err) }",
			Run:  "^(TestHostileTokenErrorIsBounded|TestProviderErrorTextIsFiltered)$",
			Why:  "a token endpoint's error code reaches the prompt, the run's error and the page bounded and filtered",
		},
		{
			Name: "pages/logged-code-unbounded",
			File: "events.go",
			Old:  "pe.ProviderID, pe.StatusCode, serverText(pe.Code, maxErrorCodeLen))",
			New:  "pe.ProviderID, pe.StatusCode, pe.Code)",
			Run:  "^(TestHostileTokenErrorIsBounded)$",
			Why:  "a provider's error code reaches the log lines and the health record's LastError bounded",
		},
		{
			Name: "pages/provider-error-cause-unbounded",
			File: "oauth.go",
			Old:  "msg += \": \" + boundedError(e.Err)",
			New:  "msg += \": \" + e.Err.Error()",
			Run:  "^(TestHostileTokenErrorIsBounded)$",
			Why:  "a ProviderError's text is bounded, though its cause holds the provider's whole answer",
		},
		{
			Name: "pages/server-text-unfiltered",
			File: "flowerror.go",
			Old:  "\treturn showable(s, max)\n",
			New:  "\treturn strings.ToValidUTF8(s[:min(len(s), max)], \"\")\n",
			Run:  "^(TestHostileTokenErrorIsBounded|TestProviderErrorTextIsFiltered)$",
			Why:  "a server's error text loses the controls and bidi overrides a terminal or a page would act on",
		},
		{
			Name: "pages/redirect-description-unfiltered",
			File: "oauthworkflow.go",
			Old:  "\tcode, description = serverText(code, maxErrorCodeLen), serverText(description, maxErrorDescriptionLen)\n",
			New:  "",
			Run:  "^(TestProviderErrorTextIsFiltered)$",
			Why:  "a provider's error redirect reaches the prompt and the page filtered (error_description, error)",
		},
	}
}
