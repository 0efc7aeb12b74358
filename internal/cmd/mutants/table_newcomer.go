package main

// newcomerGuards are the checks a new user's first hour needs (issue 33).
func newcomerGuards() []mutant {
	return []mutant{
		{
			Name: "config/malformed-kv-env-falls-back",
			File: "kv.go",
			Old:  "if errors.Is(err, errs.InvalidArgument) {\n\t\treturn nil, err\n\t}",
			New:  "if false && errors.Is(err, errs.InvalidArgument) {\n\t\treturn nil, err\n\t}",
			Run:  "^TestKVFromEnvRefusesAMalformedValue$",
			Why:  "a malformed KVSTORE_* value is a configuration error, not a fallback to memory",
		},
		{
			Name: "config/kv-port-range-unchecked",
			File: "kv.go",
			Old:  "err != nil || n < 1 || n > 65535",
			New:  "err != nil || n < 0 || n > 65536",
			Run:  "^TestKVFromEnvRefusesAMalformedValue$",
			Why:  "KVSTORE_PORT is a port number from 1 to 65535",
		},
		{
			Name: "config/kv-host-unchecked",
			File: "kv.go",
			Old:  "if !validHostName(host) {",
			New:  "if false && !validHostName(host) {",
			Run:  "^TestKVFromEnvRefusesAMalformedValue$",
			Why:  "KVSTORE_HOST is a host name or an IP address, not a URL or a host with its port",
		},
		{
			Name: "config/key-prefix-separator-unchecked",
			File: "kv.go",
			Old:  "if !strings.ContainsAny(prefix[len(prefix)-1:], keyPrefixSeparators) {",
			New:  "if false {",
			Run:  "^TestConfigKeyPrefixNeedsItsSeparator$",
			Why:  "a Config.KeyPrefix ends in its separator, so its keys do not run into the next",
		},
		{
			Name: "typos/registry-no-suggestion",
			File: "registry.go",
			Old:  "id, suggest.Hint(id, r.IDs()))",
			New:  "id, suggest.Hint(\"\", r.IDs()))",
			Run:  "^TestRegistryGetSuggestsTheNearestID$",
			Why:  "an unknown provider's error names the nearest registered ID",
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
			Name: "errtext/unreached-provider-as-http-0",
			File: "events.go",
			Old:  "case errors.As(err, &pe) && pe.StatusCode == 0:",
			New:  "case false:",
			Run:  "^TestEventLogSaysAProviderWasNotReached$",
			Why:  "a provider that was not reached is logged as such, with the network's reason, not as HTTP 0",
		},
		{
			Name: "errtext/grant-dead-on-every-failure",
			File: "events.go",
			Old:  "if e.GrantDead {\n\t\tattrs = append(attrs, slog.Bool(\"grant_dead\", true))",
			New:  "if e.Err != nil {\n\t\tattrs = append(attrs, slog.Bool(\"grant_dead\", e.GrantDead))",
			Run:  "^TestEventLogSaysAProviderWasNotReached$",
			Why:  "grant_dead is logged only where a refresh heard the grant is gone",
		},
		{
			Name: "errtext/code-exchange-a-dead-grant",
			File: "handlers.go",
			Old:  "ProviderID: s.Provider, Err: err})",
			New:  "ProviderID: s.Provider, Err: err, GrantDead: IsGrantDead(err)})",
			Run:  "^TestFailedCodeExchangeIsNoDeadGrant$",
			Why:  "a refused code exchange is no dead grant: none existed",
		},
		{
			Name: "errtext/flow-error-joins-prose",
			File: "oauth.go",
			Old:  "\treturn e.Err.Error()\n}",
			New:  "\treturn e.Message + \": \" + e.Err.Error()\n}",
			Run:  "^TestFlowErrorKeepsItsPageSentenceOut$",
			Why:  "a flow error's Error is its cause: the user's sentence stays out of logs and wrapped errors",
		},
	}
}
