package main

// providersAccountMutants guards the code of providers/account.go.
func providersAccountMutants() []mutant {
	return []mutant{
		{
			Name: "catalog/userinfo-status-unchecked",
			File: "providers/account.go",
			Pkg:  "./providers",
			Old:  "\tif resp.StatusCode < 200 || resp.StatusCode > 299 {\n",
			New:  "\tif false {\n",
			Run:  "^(TestReadAccountRefusal)$",
			Why:  "a 401/403/429/5xx user-info answer whose JSON holds the account field is a refusal, not the account",
		},
		{
			Name: "catalog/reads-account-without-endpoint",
			File: "providers/account.go",
			Pkg:  "./providers",
			Old:  "func (p *OAuth2) ReadsAccount() bool { return p.cfg.UserinfoURL != \"\" }",
			New:  "func (p *OAuth2) ReadsAccount() bool { return true }",
			Run:  "^(TestReadAccount)$",
			Why:  "a provider without a user-info endpoint says so, and a sign-in builds no account read for it",
		},
	}
}

// providersCatalogMutants guards the code of providers/catalog.go.
func providersCatalogMutants() []mutant {
	return []mutant{
		{
			Name: "catalog/refresh-limit-without-page",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tcase !namesPage(l.Doc):\n",
			New:  "\tcase false:\n",
			Run:  "^(TestCatalogDocClaims)$",
			Why:  "a catalog entry's refresh limit names the https page of the provider's documentation that states it",
		},
		{
			Name: "catalog/refresh-limit-bounding-nothing",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tcase l.Concurrency < 0 || l.PerSecond < 0 || l.Concurrency == 0 && l.PerSecond == 0:\n",
			New:  "\tcase l.Concurrency < 0 || l.PerSecond < 0:\n",
			Run:  "^(TestCatalogDocClaims)$",
			Why:  "a catalog entry's refresh limit bounds the requests at once or a second",
		},
		{
			Name: "catalog/negative-refresh-limit-accepted",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tcase l.Concurrency < 0 || l.PerSecond < 0 || l.Concurrency == 0 && l.PerSecond == 0:\n",
			New:  "\tcase l.Concurrency == 0 && l.PerSecond == 0:\n",
			Run:  "^(TestCatalogDocClaims)$",
			Why:  "a catalog entry's refresh limit has no negative figure",
		},
		{
			Name: "catalog/refresh-limit-not-carried",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\t\tcfg.RefreshLimit = oauthflow.RefreshLimit{Concurrency: l.Concurrency, PerSecond: l.PerSecond}\n",
			New:  "\t\t_ = l\n",
			Run:  "^(TestCatalogRefreshLimits)$",
			Why:  "a provider built from a catalog entry carries the refresh limit its provider documents",
		},
		{
			Name: "catalog/param-any-value",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\treturn \"\", invalid(\"%s parameter %q: %q is not %s\", id, name, v, p.shape())\n}\n\n// shape",
			New:  "\treturn v, nil\n}\n\n// shape",
			Run:  "^(TestCatalogHostParams)$",
			Why:  "a parameter limited to the provider's values or hosts refuses another host (Zoho's accounts_server, Datadog's site)",
		},
		{
			Name: "catalog/host-suffix-only",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "if labelRE.MatchString(label) && matchesHost(rest, h) {",
			New:  "if _, _ = label, rest; strings.HasSuffix(host, h) {",
			Run:  "^(TestCatalogHostParams)$",
			Why:  "a tenant host is one DNS label under the provider's domain, not any string ending in it (attacker.example#.okta.com)",
		},
		{
			Name: "catalog/label-any-name",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tcase p.Kind == \"label\" && !labelRE.MatchString(strings.ToLower(v)),\n",
			New:  "\tcase p.Kind == \"label\" && false,\n",
			Run:  "^(TestCatalogHostParams)$",
			Why:  "a tenant's subdomain (a Shopify shop) is a single DNS label",
		},
		{
			Name: "catalog/url-values-unchecked",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tcase len(p.Values) > 0 || len(p.Hosts) > 0:\n\t\treturn p.allowed(id, name, v)\n\tcase p.Kind == \"url\":\n",
			New:  "\tcase p.Kind == \"url\":\n\t\treturn v, nil\n\tcase len(p.Values) > 0 || len(p.Hosts) > 0:\n\t\treturn p.allowed(id, name, v)\n",
			Run:  "^(TestCatalogHostParams)$",
			Why:  "a base URL parameter with values (Zoho's accounts_server) takes only them",
		},
		{
			Name: "typos/catalog-no-suggestion",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "id, suggest.Hint(id, Known()))",
			New:  "id, suggest.Hint(\"\", Known()))",
			Run:  "^TestCatalogSuggestsTheNearestID$",
			Why:  "an ID the catalog lacks gets the nearest catalog ID in its error",
		},
		{
			Name: "catalog/par-without-doc",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tif (e.PushedAuthURL != \"\") != (e.PARDoc != \"\") {\n",
			New:  "\tif false {\n",
			Run:  "^TestCatalogDocClaims$",
			Why:  "a catalog PAR endpoint comes with the documentation page that names it, and a PAR page with its endpoint",
		},
		{
			Name: "catalog/fapi-without-par",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tif e.FAPIDoc != \"\" && e.PushedAuthURL == \"\" {\n",
			New:  "\tif false {\n",
			Run:  "^TestCatalogDocClaims$",
			Why:  "an entry that says its provider documents FAPI 2.0 has the PAR endpoint the profile requires",
		},
		{
			Name: "catalog/doc-page-anywhere",
			File: "providers/catalog.go",
			Pkg:  "./providers",
			Old:  "\tpage, _, _ := strings.Cut(doc, \": \")\n",
			New:  "\tpage := doc[max(strings.Index(doc, \"https://\"), 0):]\n",
			Run:  "^TestCatalogDocClaims$",
			Why:  "a catalog doc names its https page first, not somewhere in its prose",
		},
	}
}

// providersConfigMutants guards the code of providers/config.go.
func providersConfigMutants() []mutant {
	return []mutant{
		{
			Name: "catalog/negative-refresh-limit-built",
			File: "providers/config.go",
			Pkg:  "./providers",
			Old:  "\tif c.RefreshLimit.Concurrency < 0 || c.RefreshLimit.PerSecond < 0 {\n",
			New:  "\tif false {\n",
			Run:  "^(TestConfigRefreshLimit)$",
			Why:  "a provider with a negative refresh limit is refused when built",
		},
		{
			Name: "par/required-without-endpoint-built",
			File: "providers/config.go",
			Old:  "\tif c.RequirePAR && c.PushedAuthURL == \"\" {\n",
			New:  "\tif false && c.RequirePAR && c.PushedAuthURL == \"\" {\n",
			Pkg:  "./providers",
			Run:  "^(TestRequirePARNeedsAnEndpoint|TestDiscoverPAR)$",
			Why:  "a provider whose server requires PAR and that has no PAR endpoint is refused when built",
		},
		{
			Name: "pkjwt/signing-key-serialized",
			File: "providers/config.go",
			Pkg:  "./providers",
			Old:  "\tSigningKey crypto.Signer `json:\"-\"`\n",
			New:  "\tSigningKey crypto.Signer\n",
			Run:  "^(TestPrivateKeyJWTKeyNeverSerialized)$",
			Why:  "the credentials never serialize the private key",
		},
		{
			Name: "dpop/any-provider-takes-dpop",
			File: "providers/config.go",
			Old:  "|| c.DPoP && strings.EqualFold(t, \"DPoP\")",
			New:  "|| strings.EqualFold(t, \"DPoP\")",
			Pkg:  "./providers",
			Run:  "TestDPoPTokenType",
			Why:  "a provider that sent no proof refuses a DPoP token",
		},
	}
}

// providersDiscoverMutants guards the code of providers/discover.go.
func providersDiscoverMutants() []mutant {
	return []mutant{
		{
			Name: "par/discover-ignores-endpoint",
			File: "providers/discover.go",
			Old:  "\tif md.RequirePAR || profile == ProfileFAPI2 {\n\t\tcfg.PushedAuthURL = md.PAREndpoint\n\t}\n",
			New:  "\tcfg.PushedAuthURL = md.PAREndpoint\n",
			Pkg:  "./providers",
			Run:  "^TestDiscoverPAR$",
			Why:  "Discover pushes to the PAR endpoint of a server that requires it, and leaves an optional one unused, whose short-lived requests would outlive few links",
		},
		{
			Name: "dpop/discover-any-alg",
			File: "providers/discover.go",
			Old:  "slices.Contains(md.DPoPSigningAlgs, \"ES256\")",
			New:  "len(md.DPoPSigningAlgs) > 0",
			Pkg:  "./providers",
			Run:  "TestDiscoverCapabilities",
			Why:  "Discover turns DPoP on only for a server that takes ES256 proofs, the only ones we sign",
		},
		{
			Name: "iss/discover-unrecorded",
			File: "providers/discover.go",
			Old:  "cfg.Issuer, cfg.IssOptional = issuer, !md.IssParameterSupported",
			New:  "if md.IssParameterSupported {\n\t\tcfg.Issuer = issuer\n\t}",
			Pkg:  "./providers",
			Run:  "TestDiscoverCapabilities",
			Why:  "a discovered provider records its issuer even when the server does not send iss (SEP-2468)",
		},
	}
}

// providersParMutants guards the code of providers/par.go.
func providersParMutants() []mutant {
	return []mutant{
		{
			Name: "par/browser-url-carries-the-request",
			File: "providers/par.go",
			Old:  "\treturn p.pushedURL(uri), nil\n",
			New:  "\treturn p.BuildAuthURL(scopes, state, opts...) + \"&request_uri=\" + url.QueryEscape(uri), nil\n",
			Pkg:  "./providers",
			Run:  "^TestPushAuthorizationRequest$",
			Why:  "the URL the browser is sent to carries client_id and request_uri only (RFC 9126 §4)",
		},
		{
			Name: "par/browser-url-carries-the-request-root",
			File: "providers/par.go",
			Old:  "\tq.Set(\"request_uri\", requestURI)\n",
			New:  "\tq.Set(\"request_uri\", requestURI)\n\tq.Set(\"scope\", strings.Join(p.cfg.Scopes, \" \"))\n",
			Run:  "^(TestPARSignInOnTwoInstances)$",
			Why:  "the URL the browser is sent to carries client_id and request_uri only, through the library (RFC 9126 §4)",
		},
		{
			Name: "par/push-without-client-auth",
			File: "providers/par.go",
			Old:  "req, err := p.clientRequest(ctx, p.cfg.PushedAuthURL, form, p.knownStyle())",
			New:  "req, err := p.clientRequest(ctx, p.cfg.PushedAuthURL, form, oauth2.AuthStyleInParams)",
			Pkg:  "./providers",
			Run:  "^TestPushAuthorizationRequest$",
			Why:  "the client authenticates at the PAR endpoint as at the token endpoint (RFC 9126 §2)",
		},
		{
			Name: "par/answer-unchecked",
			File: "providers/par.go",
			Old:  "if pa.RequestURI == \"\" || len(pa.RequestURI) > maxRequestURILen ||",
			New:  "if false && pa.RequestURI == \"\" || len(pa.RequestURI) > maxRequestURILen ||",
			Pkg:  "./providers",
			Run:  "^TestPushAuthorizationFailures$",
			Why:  "a PAR answer without a request_uri fails the push",
		},
	}
}

// providersOauth2Mutants guards the code of providers/oauth2.go.
func providersOauth2Mutants() []mutant {
	return []mutant{
		{
			Name: "catalog/no-refresh-limit-reported-as-one",
			File: "providers/oauth2.go",
			Pkg:  "./providers",
			Old:  "\treturn p.cfg.RefreshLimit, p.cfg.RefreshLimit != oauthflow.RefreshLimit{}\n",
			New:  "\treturn p.cfg.RefreshLimit, true\n",
			Run:  "^(TestConfigRefreshLimit|TestCatalogRefreshLimits)$",
			Why:  "a provider that documents no refresh limit says so, and refresh ahead keeps the default for it",
		},
		{
			Name: "device/redirect-less-builds",
			File: "providers/oauth2.go",
			Old:  "\tif p.token.RedirectURL == \"\" {\n\t\treturn \"\"\n\t}\n",
			New:  "",
			Run:  "^(TestDeviceOnlyProvider)$",
			Why:  "a provider made without a redirect URL offers no browser sign-in",
		},
		{
			Name: "pkjwt/nonce-retry-reuses-assertion",
			File: "providers/oauth2.go",
			Pkg:  "./providers",
			Old:  "oauthflow.DPoPTransport(ctx, p.clientTransport())",
			New:  "p.asserting(oauthflow.DPoPTransport(ctx, transport(p.client)))",
			Run:  "^(TestPrivateKeyJWTSignInWithDPoPNonces)$",
			Why:  "the client assertion goes on under the DPoP proof, so a nonce challenge's retry carries a new jti",
		},
		{
			Name: "pkjwt/exchange-unsigned",
			File: "providers/oauth2.go",
			Pkg:  "./providers",
			Old:  "return p.wireTo(ctx, p.clientTransport())",
			New:  "return p.wireTo(ctx, transport(p.client))",
			Run:  "^(TestPrivateKeyJWTAtEveryEndpoint)$",
			Why:  "a code exchange of a client with a key (the x/oauth2 path) carries an assertion",
		},
		{
			Name: "pkjwt/refresh-unsigned",
			File: "providers/oauth2.go",
			Pkg:  "./providers",
			Old:  "p.recordingWith(ctx, p.clientTransport(), p.cfg.refreshParams())",
			New:  "p.recordingWith(ctx, transport(p.client), p.cfg.refreshParams())",
			Run:  "^(TestPrivateKeyJWTAtEveryEndpoint)$",
			Why:  "a refresh of a client with a key carries an assertion",
		},
	}
}

// providersTokenresponseMutants guards the code of providers/tokenresponse.go.
func providersTokenresponseMutants() []mutant {
	return []mutant{
		{
			Name: "clip/provider-error-code-whole",
			File: "providers/tokenresponse.go",
			Pkg:  "./providers",
			Old:  "clip.To(string(tr.Error), clip.ErrorCode)",
			New:  "string(tr.Error)",
			Run:  "^TestProviderErrorTextIsBoundedWhereParsed$",
			Why:  "a token endpoint's error code is bounded where its answer is parsed",
		},
		{
			Name: "rar/token-answer-details-dropped",
			File: "providers/tokenresponse.go",
			Pkg:  "./providers",
			Old:  "\tts.AuthorizationDetails = grantedDetails(tok, tr)\n",
			New:  "",
			Run:  "^(TestTokenAnswerAuthorizationDetails)$",
			Why:  "a token answer's authorization_details (RFC 9396 §7) are the TokenSet's",
		},
		{
			Name: "rar/nested-answer-details-ignored",
			File: "providers/tokenresponse.go",
			Pkg:  "./providers",
			Old:  "tok.AuthorizationDetails, tr.AuthorizationDetails}",
			New:  "tok.AuthorizationDetails}",
			Run:  "^(TestTokenAnswerAuthorizationDetails)$",
			Why:  "the authorization details beside a nested token object are read too",
		},
	}
}

// providersFapiMutants guards the code of providers/fapi.go.
func providersFapiMutants() []mutant {
	rule := func(name, old, new, why string) mutant {
		return mutant{Name: "profile/" + name, File: "providers/fapi.go", Pkg: "./providers", Old: old, New: new,
			Run: "^(TestProfileFAPI2Refusals|TestProfileFAPI2Builds|TestWithProfile|TestDiscoverFAPI2)$", Why: why}
	}
	return []mutant{
		rule("fapi2-unchecked", "\tcase ProfileFAPI2:\n\t\trules = fapi2Rules\n", "\tcase ProfileFAPI2:\n",
			"a provider under the FAPI 2.0 profile is checked against its rules when built"),
		rule("par-rule", "\t\tif c.PushedAuthURL == \"\" {\n", "\t\tif false {\n",
			"a FAPI 2.0 provider without a PAR endpoint is refused, naming the rule"),
		rule("pkce-rule", "\t\tif c.PKCE == PKCEUnsupported {\n", "\t\tif false {\n",
			"a FAPI 2.0 provider without PKCE is refused, naming the rule"),
		rule("iss-rule", "\t\tif c.Issuer == \"\" || c.IssOptional {\n", "\t\tif c.Issuer == \"\" {\n",
			"a FAPI 2.0 provider whose callbacks may lack iss is refused, naming the rule"),
		rule("dpop-rule", "\t\tif !c.DPoP {\n", "\t\tif false {\n",
			"a FAPI 2.0 provider with bearer tokens is refused, naming the rule"),
		rule("response-type-rule", "\t\t\t\tif v != \"code\" {\n", "\t\t\t\tif false {\n",
			"a FAPI 2.0 provider whose authorization requests ask for another response type is refused"),
		rule("redirect-any-http", "\tcase u.Scheme == \"http\" && loopbackHost(u.Hostname()):\n", "\tcase u.Scheme == \"http\":\n",
			"a FAPI 2.0 provider redirects over http only to a loopback address"),
		rule("pkce-not-required", "\tif cfg.Profile == ProfileFAPI2 && (cfg.PKCE == PKCEDefault || cfg.PKCE == PKCESupported) {\n", "\tif false {\n",
			"a FAPI 2.0 provider requires PKCE on every sign-in"),
		rule("private-key-jwt-rule", "\t\tif cr.SigningKey == nil || cr.ClientSecret != \"\" {\n", "\t\tif cr.SigningKey == nil && false {\n",
			"a FAPI 2.0 provider whose client authenticates with a secret, or not at all, is refused, naming the rule"),
		rule("rs256-accepted", "\t\tif alg == clientauth.RS256 {\n", "\t\tif alg == clientauth.RS256 && false {\n",
			"a FAPI 2.0 provider's assertions are never signed RS256"),
		rule("short-rsa-key", "ok && k.N.BitLen() < 2048 {\n", "ok && k.N.BitLen() < 1024 {\n",
			"a FAPI 2.0 provider's RSA key has 2048 bits at least"),
		rule("metadata-any-auth-method", "\t\tif !slices.Contains(fapiAuthMethods, m) {\n", "\t\tif !slices.Contains(fapiAuthMethods, m) && false {\n",
			"metadata that also takes client secrets does not describe a FAPI 2.0 server"),
		rule("metadata-without-par", "\tif !md.RequirePAR || !md.IssParameterSupported", "\tif !md.IssParameterSupported",
			"metadata that does not require PAR does not describe a FAPI 2.0 server"),
	}
}

// providersClientauthMutants guards the code of providers/clientauth.go.
func providersClientauthMutants() []mutant {
	return []mutant{
		{
			Name: "pkjwt/provider-audience-token-url",
			File: "providers/clientauth.go",
			Pkg:  "./providers",
			Old:  "Audience: cfg.Issuer,",
			New:  "Audience: cfg.TokenURL,",
			Run:  "^(TestPrivateKeyJWTAtEveryEndpoint|TestPrivateKeyJWTSignInWithDPoPNonces)$",
			Why:  "a provider's client assertions are for its issuer, not an endpoint",
		},
		{
			Name: "pkjwt/key-and-secret-built",
			File: "providers/clientauth.go",
			Pkg:  "./providers",
			Old:  "\tcase c.ClientSecret != \"\":\n",
			New:  "\tcase false:\n",
			Run:  "^(TestPrivateKeyJWTRefusedAtBuild)$",
			Why:  "a provider with a SigningKey and a ClientSecret is refused when built",
		},
		{
			Name: "pkjwt/key-without-issuer-built",
			File: "providers/clientauth.go",
			Pkg:  "./providers",
			Old:  "\tcase cfg.Issuer == \"\":\n",
			New:  "\tcase false:\n",
			Run:  "^(TestPrivateKeyJWTRefusedAtBuild)$",
			Why:  "a provider with a SigningKey and no Issuer (the assertions' audience) is refused when built, saying so",
		},
		{
			Name: "pkjwt/key-with-json-requests-built",
			File: "providers/clientauth.go",
			Pkg:  "./providers",
			Old:  "\tcase cfg.JSONTokenRequest:\n",
			New:  "\tcase false:\n",
			Run:  "^(TestPrivateKeyJWTRefusedAtBuild)$",
			Why:  "an assertion goes in a form: a provider with a SigningKey and JSON token requests is refused when built",
		},
		{
			Name: "pkjwt/key-id-without-key-built",
			File: "providers/clientauth.go",
			Pkg:  "./providers",
			Old:  "\tcase c.SigningKey == nil && (c.KeyID != \"\" || c.SigningAlg != \"\"):\n",
			New:  "\tcase false:\n",
			Run:  "^(TestPrivateKeyJWTRefusedAtBuild)$",
			Why:  "a KeyID or SigningAlg without a SigningKey is a mistake, refused when built",
		},
	}
}

// providersDeviceMutants guards the code of providers/device.go.
func providersDeviceMutants() []mutant {
	return []mutant{
		{
			Name: "pkjwt/device-token-unsigned",
			File: "providers/device.go",
			Pkg:  "./providers",
			Old:  "c, w := p.recording(ctx, p.clientTransport())",
			New:  "c, w := p.recording(ctx, transport(p.client))",
			Run:  "^(TestPrivateKeyJWTAtEveryEndpoint)$",
			Why:  "a device token request of a client with a key carries an assertion",
		},
	}
}

// providersWireMutants guards the code of providers/wire.go.
func providersWireMutants() []mutant {
	return []mutant{
		{
			Name: "pkjwt/revocation-unsigned",
			File: "providers/wire.go",
			Pkg:  "./providers",
			Old:  "return p.sendWith(p.authenticating(), req)",
			New:  "return p.sendWith(p.client, req)",
			Run:  "^(TestPrivateKeyJWTAtEveryEndpoint)$",
			Why:  "a revocation and a device authorization of a client with a key carry an assertion",
		},
	}
}
