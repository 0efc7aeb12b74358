package main

// mcpOutbound are the guards of the MCP client's outbound calls: what an
// https server may name, the SDK adapter's token on redirects, the
// wildcard client, the workload's refusal hold, and the address checks of
// an app's own dialers (issues 31 and 38).
func mcpOutbound() []mutant {
	return []mutant{
		{
			Name: "mcpout/https-server-plain-endpoint",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\tcase u.Scheme == \"http\" && lb && s.Scheme == \"http\":\n",
			New:  "\tcase u.Scheme == \"http\" && lb:\n",
			Run:  "TestHTTPSServerNamesNoPlainEndpoint",
			Why:  "an https MCP server on a loopback host never names a plain http authorization server or endpoint",
		},
		{
			Name: "mcpout/sdk-token-off-origin",
			File: "mcpauth/sdk.go",
			Pkg:  "./mcpauth",
			Old:  "\tif !t.toServer(req) {\n",
			New:  "\tif false {\n",
			Run:  "TestOAuthHandlerClientKeepsTheTokenOnTheServersOrigin",
			Why:  "the SDK adapter's client sends no token to another origin, a redirect's included (net/http copies Authorization to the same host)",
		},
		{
			Name: "mcpout/any-issuer-secret-accepted",
			File: "mcpauth/connector.go",
			Pkg:  "./mcpauth",
			Old:  "\tif err := checkAnyIssuer(cfg.Clients); err != nil {\n",
			New:  "\tif err := checkAnyIssuer(cfg.Clients); false && err != nil {\n",
			Run:  "TestWildcardClientCarriesNoSecret",
			Why:  "New refuses a client secret under Clients[\"*\"], which would go to every authorization server any server names",
		},
		{
			Name: "mcpout/any-issuer-secret-served",
			File: "mcpauth/clients.go",
			Pkg:  "./mcpauth",
			Old:  "if cl, ok := clients[anyIssuer]; ok && secretless(cl) {",
			New:  "if cl, ok := clients[anyIssuer]; ok {",
			Run:  "TestWildcardClientCarriesNoSecret",
			Why:  "a secret under Clients[\"*\"] given through SetClients is never sent (client credentials, workload grant)",
		},
		{
			Name: "mcpout/workload-transient-held",
			File: "mcpauth/workload.go",
			Pkg:  "./mcpauth",
			Old:  "pe.StatusCode >= 500 || comeBackLater(pe) {",
			New:  "pe.StatusCode >= 500 {",
			Run:  "TestWorkloadTransientAnswerIsNotARefusal",
			Why:  "a 429, a 408 or temporarily_unavailable is not kept as the workload's refusal for five minutes",
		},
		{
			Name: "mcpout/workload-429-held",
			File: "mcpauth/workload.go",
			Pkg:  "./mcpauth",
			Old:  "pe.StatusCode == http.StatusTooManyRequests ||",
			New:  "false ||",
			Run:  "TestWorkloadTransientAnswerIsNotARefusal",
			Why:  "a 429 without temporarily_unavailable is not kept as the workload's refusal",
		},
		{
			Name: "mcpout/workload-refusal-any-agent",
			File: "mcpauth/workload.go",
			Pkg:  "./mcpauth",
			Old:  "return issuerKey(\"wifrefused\", id+\" \"+userID)",
			New:  "return issuerKey(\"wifrefused\", id)",
			Run:  "TestWorkloadRefusalAnswersOnlyTheRefusedAgent",
			Why:  "a kept workload refusal answers only the refused agent, not every agent of the app at that server",
		},
		{
			Name: "mcpout/nat64-local-public",
			File: "mcpauth/addrclass.go",
			Pkg:  "./mcpauth",
			Old:  "{netip.MustParsePrefix(\"64:ff9b:1::/48\"), addrPrivate}",
			New:  "{netip.MustParsePrefix(\"64:ff9b:1::/48\"), addrPublic}",
			Run:  "TestClassify|TestOutboundLocalNAT64",
			Why:  "the local-use NAT64 prefix 64:ff9b:1::/48 (RFC 8215) is private: a site's translator reaches its 10.x",
		},
		{
			Name: "mcpout/nat64-local-carried-unseen",
			File: "mcpauth/addrclass.go",
			Pkg:  "./mcpauth",
			Old:  "\tif nat64Local.Contains(ip) {\n",
			New:  "\tif false {\n",
			Run:  "TestClassify|TestOutboundLocalNAT64",
			Why:  "a local-use NAT64 address carrying 169.254.169.254 stays refused under AllowPrivateNetworks",
		},
		{
			Name: "mcpout/nat64-local-public-carried",
			File: "mcpauth/addrclass.go",
			Pkg:  "./mcpauth",
			Old:  "return max(addrPrivate, classify(",
			New:  "return max(addrPublic, classify(",
			Run:  "TestClassify|TestOutboundLocalNAT64",
			Why:  "a local-use NAT64 address is private even when the IPv4 address it carries is public",
		},
	}
}
