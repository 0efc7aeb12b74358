package main

// catalogGuards are the guards of the catalog's parameters (issue 31), of a
// new grant's account and kept fields, of the parsed DPoP keys and of
// Reencrypt's expiry (issue 38).
func catalogGuards() []mutant {
	return []mutant{
		{
			Name: "catalog/account-read-under-callers-ctx",
			File: "signin.go",
			Old:  "context.WithTimeout(context.WithoutCancel(ctx), accountTimeout)",
			New:  "context.WithTimeout(ctx, accountTimeout)",
			Run:  "^(TestSignInAccountOutlivesTheCaller)$",
			Why:  "a sign-in whose caller leaves during the user-info call is stored with its account",
		},
		{
			Name: "catalog/grant-write-under-callers-ctx",
			File: "tokenstore.go",
			Old:  "context.WithTimeout(xcontext.ValuesOnly(ctx), grantWriteTimeout+s.ackTimeout)",
			New:  "context.WithTimeout(ctx, grantWriteTimeout+s.ackTimeout)",
			Run:  "^(TestSignInAccountOutlivesTheCaller)$",
			Why:  "a new grant, its code spent, is written though the caller left while its account was read",
		},
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
			Name: "catalog/dpop-key-cache-unbounded",
			File: "dpop.go",
			Old:  "\t\tif len(c.seq) >= keyCacheSize {\n",
			New:  "\t\tif false {\n",
			Run:  "^(TestKeyCacheIsBounded)$",
			Why:  "the parsed DPoP keys a store keeps are bounded, not one for every bound connection ever read",
		},
		{
			Name: "catalog/metadata-unbounded",
			File: "records.go",
			Old:  "\t\tif len(out) == maxMetadata {\n\t\t\tbreak\n\t\t}\n",
			New:  "",
			Run:  "^(TestMetadataIsBounded)$",
			Why:  "at most 16 metadata fields of a provider's or an app's answer are kept with the tokens",
		},
		{
			Name: "catalog/metadata-grows-on-refresh",
			File: "records.go",
			Old:  "\t\tif len(kept) >= maxMetadata {\n\t\t\tbreak\n\t\t}\n",
			New:  "",
			Run:  "^(TestMetadataIsBounded)$",
			Why:  "refreshes that each name new metadata fields do not grow the record past 16",
		},
		{
			Name: "catalog/last-millisecond-never-expires",
			File: "internal/kv/redis.go",
			Old:  "\treturn max(d, time.Millisecond), nil\n",
			New:  "\treturn d, nil\n",
			Run:  "^(TestReencryptKeepsAnExpiryInTheLastMillisecond)$",
			Why:  "a key PTTL answers 0 (its last millisecond) has an expiry: Reencrypt never rewrites it without one",
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
	}
}
