package main

// mcpauthAddrclassMutants guards the code of mcpauth/addrclass.go.
func mcpauthAddrclassMutants() []mutant {
	return []mutant{
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
		{
			Name: "mcp/outbound-nat64-unseen",
			File: "mcpauth/addrclass.go",
			Old:  "\tif nat64.Contains(ip) {",
			New:  "\tif false {",
			Pkg:  "./mcpauth",
			Why:  "a NAT64 address is classed as the IPv4 address inside it (64:ff9b::a9fe:a9fe is 169.254.169.254)",
			Run:  "TestClassify",
		},
		{
			Name: "mcp/outbound-cgnat-public",
			File: "mcpauth/addrclass.go",
			Old:  "{netip.MustParsePrefix(\"100.64.0.0/10\"), addrPrivate}",
			New:  "{netip.MustParsePrefix(\"100.64.0.0/10\"), addrPublic}",
			Pkg:  "./mcpauth",
			Why:  "the shared address space (100.64.0.0/10) is private",
			Run:  "TestClassify",
		},
	}
}

// mcpauthClientcredsMutants guards the code of mcpauth/clientcreds.go.
func mcpauthClientcredsMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/cross-app-user-forgotten",
			File: "mcpauth/clientcreds.go",
			Old:  "\t\tmark = crossAppRefreshMark + userID\n",
			New:  "\t\tmark = crossAppRefreshMark\n",
			Pkg:  "./mcpauth",
			Why:  "a cross-app token is refreshed with its own user's ID token, never another user's",
			Run:  "TestCrossAppAccessKeepsUsersApart",
		},
		{
			Name: "clip/workload-refusal-code-whole",
			File: "mcpauth/clientcreds.go",
			Pkg:  "./mcpauth",
			Old:  "clip.To(a.Error, clip.ErrorCode)",
			New:  "a.Error",
			Run:  "^TestWorkloadRefusalTextIsBounded$",
			Why:  "a grant's refusal keeps a bounded error code, for minutes and in the agent's error",
		},
		{
			Name: "mcp/discovery-claimed-issuer-selects-client",
			File: "mcpauth/clientcreds.go",
			Old:  "issuer := verifiedIssuer(&p.d)",
			New:  "issuer := p.d.AS.Issuer",
			Pkg:  "./mcpauth",
			Why:  "a 2025-03-26 server's claimed issuer never selects the app's client credentials (item 2)",
			Run:  "TestClaimedIssuerGetsNoSecret",
		},
		{
			Name: "mcp/discovery-claimed-issuer-audience",
			File: "mcpauth/clientcreds.go",
			Old:  "\tif d.issuerProven() {\n\t\treturn d.AS.Issuer",
			New:  "\tif true {\n\t\treturn d.AS.Issuer",
			Pkg:  "./mcpauth",
			Why:  "an assertion for a server whose issuer is only claimed names that server's origin, not the claim",
			Run:  "TestClaimedIssuerIsNotTheAssertionAudience|TestLegacyIssuerClaimIsUnproven",
		},
		{
			Name: "pkjwt/mcp-rsa-default-changed",
			File: "mcpauth/clientcreds.go",
			Pkg:  "./mcpauth",
			Old:  "isRSA && alg == \"\" {",
			New:  "false && isRSA && alg == \"\" {",
			Run:  "^TestClientAssertionAlgorithms$",
			Why:  "an mcpauth client's RSA key signs RS256 unless SigningAlg names another, as it always did",
		},
		{
			Name: "mcpgrant/nonce-not-retried",
			File: "mcpauth/clientcreds.go",
			Pkg:  "./mcpauth",
			Old:  "tokenURL, strings.NewReader(form.Encode()))",
			New:  "tokenURL, io.MultiReader(strings.NewReader(form.Encode())))",
			Run:  "^TestGrantsWithoutSignInAnswerTheNonceOnce$",
			Why:  "a grant's token request can be sent again, so a use_dpop_nonce answer gets its one retry with the nonce",
		},
	}
}

// mcpauthClientsMutants guards the code of mcpauth/clients.go.
func mcpauthClientsMutants() []mutant {
	return []mutant{
		{
			Name: "mcpout/any-issuer-secret-served",
			File: "mcpauth/clients.go",
			Pkg:  "./mcpauth",
			Old:  "if cl, ok := clients[anyIssuer]; ok && secretless(cl) {",
			New:  "if cl, ok := clients[anyIssuer]; ok {",
			Run:  "TestWildcardClientCarriesNoSecret",
			Why:  "a secret under Clients[\"*\"] given through SetClients is never sent (client credentials, workload grant)",
		},
	}
}

// mcpauthConnectorMutants guards the code of mcpauth/connector.go.
func mcpauthConnectorMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/resource-not-sent",
			File: "mcpauth/connector.go",
			Old:  "TokenParams: map[string]string{\"resource\": d.Resource},",
			New:  "",
			Pkg:  "./mcpauth",
			Why:  "token requests name the MCP server as their resource (RFC 8707)",
			Run:  "TestConnectAcrossInstances",
		},
		{
			Name: "mcp/client-credentials-not-rebuilt",
			File: "mcpauth/connector.go",
			Old:  "\tif grantID(id) {\n\t\treturn c.clientProvider(id, s.Discovery, s.Scopes)",
			New:  "\tif false {\n\t\treturn c.clientProvider(id, s.Discovery, s.Scopes)",
			Pkg:  "./mcpauth",
			Why:  "an instance that meets an agent's client credentials provider first rebuilds it, and fetches its next token",
			Run:  "TestClientCredentialsAcrossInstances",
		},
		{
			Name: "mcp/iss-unchecked",
			File: "mcpauth/connector.go",
			Old:  "\tif d.AS.IssParameterSupported {\n",
			New:  "\tif false {\n",
			Pkg:  "./mcpauth",
			Why:  "a server that advertises RFC 9207 has its sign-ins' iss checked (mix-up defence)",
			Run:  "TestIssuerIsChecked",
		},
		{
			Name: "mcp/dpop-metadata-ignored",
			File: "mcpauth/connector.go",
			Old:  "cfg.DPoP = slices.Contains(d.AS.DPoPSigningAlgValuesSupported, \"ES256\")",
			New:  "cfg.DPoP = false",
			Pkg:  "./internal/cmd/mcpconformance",
			Run:  "TestConformanceSuite/auth/^dpop$",
			Why:  "an authorization server that lists ES256 for DPoP gets bound grants",
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
			Name: "mcp/record-id-48-bits",
			File: "mcpauth/connector.go",
			Pkg:  "./mcpauth",
			Old:  "hex.EncodeToString(sum[:16])",
			New:  "hex.EncodeToString(sum[:6])",
			Why:  "a provider ID carries 128 bits of the server URL's hash",
			Run:  "TestProviderIDHas128Bits",
		},
		{
			Name: "mix-up/mcp-issuer-only-when-advertised",
			File: "mcpauth/connector.go",
			Old:  "cfg.Issuer, cfg.IssOptional = d.AS.Issuer, true",
			New:  "cfg.Issuer, cfg.IssOptional = \"\", true",
			Pkg:  "./mcpauth",
			Why:  "an MCP server's sign-ins record its authorization server's issuer whether or not it advertises RFC 9207",
			Run:  "TestMixUpAcrossServersIsRefused",
		},
		{
			Name: "mcp/outbound-connector-unpoliced",
			File: "mcpauth/connector.go",
			Old:  "http: outboundClient(cfg)}",
			New:  "http: cfg.HTTPClient}",
			Pkg:  "./mcpauth",
			Why:  "the Connector's discovery, registration and token calls go through the outbound policy",
			Run:  "TestConnectorUsesTheOutboundPolicy",
		},
	}
}

// mcpauthDiscoveryMutants guards the code of mcpauth/discovery.go.
func mcpauthDiscoveryMutants() []mutant {
	return []mutant{
		// MCP servers: what discovery refuses.
		{
			Name: "mcp/issuer-unchecked",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\t\tif strings.TrimSuffix(md.Issuer, \"/\") != strings.TrimSuffix(issuer, \"/\") {\n",
			New:  "\t\tif false {\n",
			Why:  "authorization server metadata naming another issuer is refused (RFC 8414 §3.3)",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/pkce-unchecked",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\tif !slices.Contains(md.CodeChallengeMethodsSupported, \"S256\") {\n",
			New:  "\tif slices.Contains(md.CodeChallengeMethodsSupported, \"none of them\") {\n",
			Why:  "an authorization server that does not advertise PKCE S256 is refused",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/resource-unchecked",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\tif path != parent && !strings.HasPrefix(path, parent+\"/\") {\n",
			New:  "\tif _, _ = parent, path; false {\n",
			Why:  "resource metadata of another resource is refused (RFC 9728 §3.3)",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/challenge-ignored",
			File: "mcpauth/discovery.go",
			Pkg:  "./mcpauth",
			Old:  "\tif fromChallenge != \"\" {\n",
			New:  "\tif false {\n",
			Why:  "the resource_metadata URL of the server's challenge is asked before the well-known ones",
			Run:  "TestDiscover",
		},
		{
			Name: "mcp/dpop-challenge-unread",
			File: "mcpauth/discovery.go",
			Old:  "params, found = challengeParams(v, \"dpop\")",
			New:  "found = false",
			Pkg:  "./mcpauth",
			Run:  "TestParseChallenge",
			Why:  "a DPoP challenge (RFC 9449 §7.1) names the resource metadata and the error as a Bearer one does",
		},
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
			Name: "mcp/discovery-challenge-any-origin",
			File: "mcpauth/discovery.go",
			Old:  "\t\tif originOf(fromChallenge) != originOf(resource) {",
			New:  "\t\tif false {",
			Pkg:  "./mcpauth",
			Why:  "the challenge's resource_metadata is fetched only on the MCP server's own origin",
			Run:  "TestDiscoveryFetchesOnlyWhatTheRulesAllow",
		},
		{
			Name: "mcp/discovery-as-any-url",
			File: "mcpauth/discovery.go",
			Old:  "if err := namedURL(prm.AuthorizationServers[0], resource); err != nil {",
			New:  "if err := namedURL(prm.AuthorizationServers[0], resource); false && err != nil {",
			Pkg:  "./mcpauth",
			Why:  "the authorization server the resource metadata names is an https URL (loopback only for a loopback server)",
			Run:  "TestDiscoveryFetchesOnlyWhatTheRulesAllow",
		},
		{
			Name: "mcp/discovery-plain-server",
			File: "mcpauth/discovery.go",
			Old:  "if err := namedURL(resource, resource); err != nil {",
			New:  "if err := namedURL(resource, resource); false && err != nil {",
			Pkg:  "./mcpauth",
			Why:  "a plain http MCP server is discovered only on a loopback host",
			Run:  "TestDiscoveryFetchesOnlyWhatTheRulesAllow",
		},
		{
			Name: "mcp/discovery-loopback-from-public",
			File: "mcpauth/discovery.go",
			Old:  "\tcase lb && !local:\n",
			New:  "\tcase false && local:\n",
			Pkg:  "./mcpauth",
			Why:  "a public server's metadata cannot point this backend at a loopback host",
			Run:  "TestDiscoveryFetchesOnlyWhatTheRulesAllow|TestDiscoveryRefusesPlainEndpoints",
		},
		{
			Name: "mcp/discovery-endpoints-unchecked",
			File: "mcpauth/discovery.go",
			Old:  "\tif err := as.endpointsFit(resource); err != nil {",
			New:  "\tif err := as.endpointsFit(resource); false && err != nil {",
			Pkg:  "./mcpauth",
			Why:  "an https server's authorization server metadata naming an http endpoint is refused (item 7)",
			Run:  "TestDiscoveryRefusesPlainEndpoints",
		},
		{
			Name: "mcp/discovery-legacy-endpoints-unchecked",
			File: "mcpauth/discovery.go",
			Old:  "\t\tif err := md.endpointsFit(resource); err != nil {",
			New:  "\t\tif err := md.endpointsFit(resource); false && err != nil {",
			Pkg:  "./mcpauth",
			Why:  "a 2025-03-26 server's metadata naming an http endpoint is refused too (item 7)",
			Run:  "TestDiscoveryRefusesPlainEndpoints",
		},
	}
}

// mcpauthDpopgrantsMutants guards the code of mcpauth/dpopgrants.go.
func mcpauthDpopgrantsMutants() []mutant {
	return []mutant{
		{
			Name: "mcpgrant/proof-omitted",
			File: "mcpauth/dpopgrants.go",
			Pkg:  "./mcpauth",
			Old:  "\tif takesDPoP(&p.d) {\n\t\tvar err error\n",
			New:  "\tif false {\n\t\tvar err error\n",
			Run:  "^TestGrantsWithoutSignInProveTheirKey$",
			Why:  "a grant without a sign-in proves a key of the connection's own where the authorization server takes DPoP",
		},
		{
			Name: "mcpgrant/proof-unasked",
			File: "mcpauth/dpopgrants.go",
			Pkg:  "./mcpauth",
			Old:  "\tif takesDPoP(&p.d) {\n\t\tvar err error\n",
			New:  "\tif true {\n\t\tvar err error\n",
			Run:  "^TestGrantsWithoutSignInStayBearerWithoutDPoP$",
			Why:  "an authorization server that does not advertise DPoP gets no proof, and its tokens stay bearer tokens",
		},
		{
			Name: "mcpgrant/refresh-unproven",
			File: "mcpauth/dpopgrants.go",
			Pkg:  "./mcpauth",
			Old:  "\tcase takesDPoP(&p.d):\n",
			New:  "\tcase false:\n",
			Run:  "^TestGrantsWithoutSignInRefreshWithTheirKey$",
			Why:  "a bound grant fetched again on expiry proves the key its record keeps",
		},
		{
			Name: "mcpgrant/nonces-forgotten",
			File: "mcpauth/dpopgrants.go",
			Pkg:  "./mcpauth",
			Old:  "Nonces: &p.conn.nonces,",
			New:  "Nonces: nil,",
			Run:  "^TestGrantsWithoutSignInAnswerTheNonceOnce$",
			Why:  "the Connector remembers each authorization server's nonce, so the next connection's grant carries it at once",
		},
		{
			Name: "mcpgrant/dpop-unproven-accepted",
			File: "mcpauth/dpopgrants.go",
			Pkg:  "./mcpauth",
			Old:  "\tif !proved {\n",
			New:  "\tif false {\n",
			Run:  "^TestDPoPTokenForAnUnprovedGrantIsRefused$",
			Why:  "a token_type DPoP answer to a token request that proved no key is refused: nothing could use the token",
		},
		{
			Name: "mcpgrant/assertion-above-retry",
			File: "mcpauth/dpopgrants.go",
			Pkg:  "./mcpauth",
			Old:  "\trt, err := p.proving(ctx, asserting(watch, s), key)\n",
			New:  "\trt, err := p.proving(ctx, watch, key)\n\trt = asserting(rt, s)\n",
			Run:  "^TestGrantRetrySignsANewAssertion$",
			Why:  "a private_key_jwt client signs a new assertion for each token request sent, so the retry after use_dpop_nonce carries a jti of its own",
		},
	}
}

// mcpauthMigrationMutants guards the code of mcpauth/migration.go.
func mcpauthMigrationMutants() []mutant {
	return []mutant{
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

// mcpauthOutboundMutants guards the code of mcpauth/outbound.go.
func mcpauthOutboundMutants() []mutant {
	return []mutant{
		{
			Name: "mcpout/outbound-tls-dialer-unchecked",
			File: "mcpauth/outbound.go",
			Pkg:  "./mcpauth",
			Old:  "\t\tt.DialTLSContext = p.checkedAfter(t.DialTLSContext)\n",
			New:  "",
			Run:  "TestOutboundChecksAnAppsTLSDialer",
			Why:  "an app transport's own DialTLSContext is kept and the address it reached is checked before an https request is sent",
		},
		{
			Name: "mcpout/outbound-legacy-tls-dialer-unchecked",
			File: "mcpauth/outbound.go",
			Pkg:  "./mcpauth",
			Old:  "\t\tt.DialTLSContext = p.checkedAfter(func(_ context.Context, network, addr string) (net.Conn, error) { return old(network, addr) })\n\t\tt.DialTLS = nil\n",
			New:  "\t\t_ = old\n",
			Run:  "TestOutboundChecksAnAppsTLSDialer",
			Why:  "an app transport's legacy DialTLS is checked like DialTLSContext",
		},
		{
			Name: "mcp/outbound-no-dial-check",
			File: "mcpauth/outbound.go",
			Old:  "\t\td.ControlContext = func(",
			New:  "\t\t_ = func(",
			Pkg:  "./mcpauth",
			Why:  "the address a name resolves to is checked when it is dialed (DNS rebinding cannot get round it)",
			Run:  "TestOutboundChecksTheDialedAddress",
		},
		{
			Name: "mcp/outbound-app-dialer-unchecked",
			File: "mcpauth/outbound.go",
			Old:  "if err := p.checkConn(addr, conn); err != nil {",
			New:  "if err := p.checkConn(addr, conn); false && err != nil {",
			Pkg:  "./mcpauth",
			Why:  "an app's own dialer is kept, and the address it reached is checked before anything is sent",
			Run:  "TestOutboundChecksAnAppsDialer|TestConnectorUsesTheOutboundPolicy",
		},
		{
			Name: "mcp/outbound-loopback-under-any-name",
			File: "mcpauth/outbound.go",
			Old:  "if loopbackHost(host) || p.allowPrivate {",
			New:  "if true {",
			Pkg:  "./mcpauth",
			Why:  "a public name that resolves to a loopback address is refused; loopback is for loopback URL hosts",
			Run:  "TestOutboundChecksTheDialedAddress|TestDiscoveryIsUnderTheOutboundPolicy",
		},
		{
			Name: "mcp/outbound-private-allowed",
			File: "mcpauth/outbound.go",
			Old:  "\tcase addrPrivate:\n\t\tif p.allowPrivate {",
			New:  "\tcase addrPrivate:\n\t\tif true {",
			Pkg:  "./mcpauth",
			Why:  "private addresses are refused unless Config.AllowPrivateNetworks",
			Run:  "TestOutboundOtherRoundTripper",
		},
		{
			Name: "mcp/outbound-literal-unchecked",
			File: "mcpauth/outbound.go",
			Old:  "\t\treturn p.allowed(host, ip)\n",
			New:  "\t\t_ = ip\n\t\treturn nil\n",
			Pkg:  "./mcpauth",
			Why:  "a URL naming a refused address literally is refused before any transport sends it",
			Run:  "TestOutboundOtherRoundTripper|TestOutboundURLRules|TestDiscoveryIsUnderTheOutboundPolicy",
		},
		{
			Name: "mcp/outbound-plain-http",
			File: "mcpauth/outbound.go",
			Old:  "u.Scheme != \"https\" && !(u.Scheme == \"http\" && loopbackHost(host))",
			New:  "u.Scheme != \"https\" && u.Scheme != \"http\"",
			Pkg:  "./mcpauth",
			Why:  "plain http only to loopback hosts",
			Run:  "TestOutboundOtherRoundTripper|TestOutboundURLRules",
		},
		{
			Name: "mcp/outbound-redirect-followed",
			File: "mcpauth/outbound.go",
			Old:  "\tc.CheckRedirect = refuseRedirect\n",
			New:  "",
			Pkg:  "./mcpauth",
			Why:  "no redirect is followed by discovery or by a call carrying a credential",
			Run:  "TestOutboundFollowsNoRedirect",
		},
		{
			Name: "mcp/outbound-proxy-refused",
			File: "mcpauth/outbound.go",
			Old:  "if _, proxy := p.proxies.Load(addr); !proxy {",
			New:  "if true {",
			Pkg:  "./mcpauth",
			Why:  "the proxy the app's transport chooses is dialed whatever its address",
			Run:  "TestOutboundKeepsTheAppsProxy",
		},
		{
			Name: "mcp/outbound-private-opt-in-ignored",
			File: "mcpauth/outbound.go",
			Old:  "&outboundPolicy{allowPrivate: cfg.AllowPrivateNetworks}",
			New:  "&outboundPolicy{}",
			Pkg:  "./mcpauth",
			Why:  "Config.AllowPrivateNetworks opens private and loopback addresses for internal deployments",
			Run:  "TestConnectorUsesTheOutboundPolicy",
		},
	}
}

// mcpauthProviderMutants guards the code of mcpauth/provider.go.
func mcpauthProviderMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/invalid-client-kept",
			File: "mcpauth/provider.go",
			Old:  "\tif !clientRefused(pe.Code) {\n",
			New:  "\tif true {\n",
			Pkg:  "./mcpauth",
			Why:  "a client the server answers invalid_client to is registered anew",
			Run:  "TestReregistersAfterInvalidClient",
		},
		{
			Name: "mcp/preset-client-kills-grants",
			File: "mcpauth/provider.go",
			Old:  "\tif p.dynamic() {\n\t\treturn []string{\"invalid_client\"}",
			New:  "\tif true {\n\t\treturn []string{\"invalid_client\"}",
			Pkg:  "./mcpauth",
			Why:  "the app's own client answering invalid_client (a rotated secret) keeps its users' tokens",
			Run:  "TestDroppedRegistrationEndsItsGrants",
		},
		{
			Name: "mcp/dropped-client-grants-kept",
			File: "mcpauth/provider.go",
			Old:  "\tif p.dynamic() {\n\t\treturn []string{\"invalid_client\"}",
			New:  "\tif false {\n\t\treturn []string{\"invalid_client\"}",
			Pkg:  "./mcpauth",
			Why:  "a dropped dynamic registration ends its users' grants, so they sign in again with the new client",
			Run:  "TestDroppedRegistrationEndsItsGrants",
		},
		{
			Name: "mcp/dpop-not-passed-on",
			File: "mcpauth/provider.go",
			Old:  "func (p *serverProvider) UsesDPoP() bool          { return p.lastInner().UsesDPoP() }",
			New:  "func (p *serverProvider) UsesDPoP() bool          { return false }",
			Pkg:  "./internal/cmd/mcpconformance",
			Run:  "TestConformanceSuite/auth/^dpop$",
			Why:  "an MCP server's provider binds its grants when its authorization server takes DPoP",
		},
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
			Name: "mcp/register-authorize-refusal-ignored",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "if e == nil || !refusedAtAuthorize(e.Code, e.Description) {",
			New:  "if true {",
			Why:  "a sign-in refused at the authorization page for the client re-registers",
			Run:  "TestSignInRefusedAtAuthorizePageReregisters",
		},
		{
			Name: "mcp/register-claimed-refusals-unrationed",
			File: "mcpauth/provider.go",
			Old:  "if err != nil || !took {\n\t\treturn false\n\t}\n\t_, err = inner.RefreshToken(",
			New:  "if _ = took; err != nil {\n\t\treturn false\n\t}\n\t_, err = inner.RefreshToken(",
			Pkg:  "./mcpauth",
			Why:  "a refusal the browser brings is checked at the token endpoint once per authorization server per interval, so a user cannot have our client send it requests at will",
			Run:  "TestClaimedRefusalsAreCheckedOncePerInterval",
		},
		{
			Name: "mcp/register-unauthorized-client-ignored",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "return code == \"invalid_client\" || code == \"unauthorized_client\"\n",
			New:  "return code == \"invalid_client\"\n",
			Why:  "unauthorized_client from the token endpoint refuses the client and heals it",
			Run:  "TestRefusalsThatHeal",
		},
		{
			Name: "mcp/record-client-copied",
			File: "mcpauth/provider.go",
			Pkg:  "./mcpauth",
			Old:  "if p.inner == nil || cl != p.client {",
			New:  "if p.inner == nil {",
			Why:  "the app's client is read at each use: a rotated secret is sent on the next request",
			Run:  "TestRotatedClientSecretIsUsedAtOnce",
		},
		{
			Name: "mix-up/mcp-provider-hides-issuer",
			File: "mcpauth/provider.go",
			Old:  "func (p *serverProvider) AuthorizationIssuer() (string, bool) {",
			New:  "func (p *serverProvider) authorizationIssuer() (string, bool) {",
			Pkg:  "./mcpauth",
			Why:  "an MCP server's provider tells the module its issuer even when it does not advertise RFC 9207",
			Run:  "TestMixUpAcrossServersIsRefused",
		},
	}
}

// mcpauthRecordsMutants guards the code of mcpauth/records.go.
func mcpauthRecordsMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/record-no-ttl",
			File: "mcpauth/records.go",
			Pkg:  "./mcpauth",
			Old:  "c.kv.Set(ctx, serverKey(id), b, serverTTL)",
			New:  "c.kv.Set(ctx, serverKey(id), b, 0)",
			Why:  "an MCP server record expires when unused",
			Run:  "TestServerRecordsExpireWhenUnused",
		},
		{
			Name: "mcp/record-gone-not-rediscovered",
			File: "mcpauth/records.go",
			Pkg:  "./mcpauth",
			Old:  "\t\treturn c.rediscoverByName(ctx, id)\n",
			New:  "\t\treturn nil, false, nil\n",
			Why:  "a server record gone while a user's tokens live is rebuilt by discovery, not an unknown provider",
			Run:  "TestServerRecordGoneIsRediscovered",
		},
		{
			Name: "mcp/record-stale-kept",
			File: "mcpauth/records.go",
			Pkg:  "./mcpauth",
			Old:  "if time.Since(s.Saved) > rediscoverAfter {",
			New:  "if false {",
			Why:  "a server's discovery older than a day is done again",
			Run:  "TestStaleDiscoveryIsRedone",
		},
	}
}

// mcpauthRegisterMutants guards the code of mcpauth/register.go.
func mcpauthRegisterMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/registration-unlocked",
			File: "mcpauth/register.go",
			Old:  "\t\tif took {\n",
			New:  "\t\tif took || !took {\n",
			Pkg:  "./mcpauth",
			Why:  "instances that meet an authorization server at once register one client between them",
			Run:  "TestConnectAcrossInstances",
		},
		{
			Name: "mcp/application-type-native-only",
			File: "mcpauth/register.go",
			Old:  "\t\t\"application_type\": \"web\",\n",
			New:  "",
			Pkg:  "./mcpauth",
			Run:  "TestRegistrationNamesItsApplicationType",
			Why:  "a registration always names its application_type (SEP-837)",
		},
		{
			Name: "mcp/reglock-plain-del",
			File: "mcpauth/register.go",
			Pkg:  "./mcpauth",
			Old:  "_, _ = c.kv.CompareAndDelete(ctx, lock, owner)",
			New:  "_ = c.kv.Del(ctx, lock)",
			Why:  "an instance whose registration outlived its lock frees only its own lock, not the next holder's",
			Run:  "TestRegistrationLockIsFreedOnlyByItsOwner",
		},
		// Registrations keyed by the verified issuer, with provenance, healed; records that expire (issue 20 items 3, 5, 6, 10).
		{
			Name: "mcp/register-claimed-issuer",
			File: "mcpauth/register.go",
			Pkg:  "./mcpauth",
			Old:  "\tif d.PRM != nil {\n\t\treturn strings.TrimSuffix(d.AS.Issuer, \"/\")\n",
			New:  "\tif true {\n\t\treturn strings.TrimSuffix(d.AS.Issuer, \"/\")\n",
			Why:  "a 2025-03-26 server's registration is stored under its origin, not under the issuer its metadata claims",
			Run:  "TestClaimedIssuerDoesNotPoisonRegistrations|TestVerifiedIssuer",
		},
	}
}

// mcpauthRegistrationMutants guards the code of mcpauth/registration.go.
func mcpauthRegistrationMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/reregistered-twice",
			File: "mcpauth/registration.go",
			Old:  "\tif err != nil || !ok || reg.Client.ID != refused {\n",
			New:  "\tif _ = reg; err != nil || !ok {\n",
			Pkg:  "./mcpauth",
			Why:  "an instance whose client was replaced by another instance's new registration takes it, without registering again",
			Run:  "TestReregistersAfterInvalidClient",
		},
		{
			Name: "mcpheal/registration-90-days-unused",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  "return c.kv.Set(ctx, key, sealed, serverTTL)",
			New:  "return c.kv.Set(ctx, key, sealed, nameTTL)",
			Run:  "TestUnusedRegistrationExpiresWithTheServerRecord",
			Why:  "a registration no grant was issued to lives no longer than its unused server record",
		},
		{
			Name: "mcpheal/registration-not-kept-by-grant",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  "_, _ = c.kv.CompareAndExpire(ctx, key, raw, nameTTL)",
			New:  "_ = raw",
			Run:  "TestUnusedRegistrationExpiresWithTheServerRecord",
			Why:  "a grant issued to a registration keeps it as long as the server's name, past the unused record's 7 days",
		},
		{
			Name: "mcpheal/expired-registration-not-restored",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  "\t\t_, _ = c.kv.SetNX(ctx, key, sealed, nameTTL)\n",
			New:  "\t\t_ = sealed\n",
			Run:  "TestExpiredRegistrationIsKeptByItsFirstGrant",
			Why:  "a registration that expired unused while an instance held it is stored again by the first grant issued to it, so no instance refreshes that grant with another client",
		},
		{
			Name: "mcp/register-provenance-issuer",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  "reg.Client.ID != \"\" && reg.Issuer == verifiedIssuer(d) &&",
			New:  "reg.Client.ID != \"\" &&",
			Why:  "a stored registration serves only the verified issuer it was made at",
			Run:  "TestRegistrationServesOnlyWhatItFits",
		},
		{
			Name: "mcp/register-provenance-endpoint",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  " && reg.Endpoint == d.AS.RegistrationEndpoint &&",
			New:  " &&",
			Why:  "a registration made through another registration endpoint than discovery names now is replaced",
			Run:  "TestRegistrationServesOnlyWhatItFits",
		},
		{
			Name: "mcp/register-expiry-ignored",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  "(reg.Expires.IsZero() || now.Before(reg.Expires.Add(-expiryMargin)))",
			New:  "true",
			Why:  "a registration whose secret is about to expire (client_secret_expires_at) is replaced",
			Run:  "TestRegistrationServesOnlyWhatItFits",
		},
		{
			Name: "mcp/register-forget-any",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  "if err != nil || !ok || reg.Client.ID != refused {",
			New:  "if err != nil || !ok || reg.Client.ID == \"\" {",
			Why:  "healing forgets the stored registration only while it is the refused client, not another instance's new one",
			Run:  "TestSignInRefusedAtAuthorizePageReregisters|TestReregistersAfterInvalidClient",
		},
		{
			Name: "mcp/record-registration-plain",
			File: "mcpauth/registration.go",
			Pkg:  "./mcpauth",
			Old:  "c.ring.Seal(b, key)",
			New:  "b",
			Why:  "a dynamic registration's secret is sealed at rest with the key ring",
			Run:  "TestDynamicRegistrationIsSealedAtRest",
		},
	}
}

// mcpauthSdkMutants guards the code of mcpauth/sdk.go.
func mcpauthSdkMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/sdk-token-as-bearer",
			File: "mcpauth/sdk.go",
			Old:  "\tif !carriesToken(req, t.h.ServerURL) {\n",
			New:  "\tif true {\n",
			Pkg:  "./internal/cmd/mcpconformance",
			Run:  "TestConformanceSuite/auth/^dpop$",
			Why:  "the SDK's requests carry a bound token with the DPoP scheme and a proof, not as the SDK's Bearer",
		},
		{
			Name: "mcp/sdk-401-swallowed",
			File: "mcpauth/sdk.go",
			Old:  "\tif errors.Is(err, oauthflow.ErrNoToken) && req.GetBody != nil {\n",
			New:  "\tif false {\n",
			Pkg:  "./internal/cmd/mcpconformance",
			Run:  "TestConformanceSuite/auth/^authorization-server-migration$",
			Why:  "a 401 the store's refresh does not cure reaches the SDK as the server's 401, so Authorize runs (and follows a moved server)",
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
	}
}

// mcpauthTransportMutants guards the code of mcpauth/transport.go.
func mcpauthTransportMutants() []mutant {
	return []mutant{
		{
			Name: "mcp/step-up-without-limit",
			File: "mcpauth/transport.go",
			Old:  "\tif len(missing) == 0 {\n",
			New:  "\tif len(missing) == 0 && false {\n",
			Pkg:  "./mcpauth",
			Why:  "a 403 for scopes the grant already holds is the server's refusal, never one more sign-in",
			Run:  "TestTransport",
		},
		{
			Name: "mcp/any-403-asks-sign-in",
			File: "mcpauth/transport.go",
			Pkg:  "./mcpauth",
			Old:  "case resp.StatusCode == http.StatusForbidden && ch.Error == \"insufficient_scope\":",
			New:  "case resp.StatusCode == http.StatusForbidden:",
			Run:  "TestTransportHandsBackTheServersOwnRefusal",
			Why:  "only a 403 insufficient_scope asks for a sign-in: the server's own refusal reaches the caller, not ErrNoToken",
		},
		{
			Name: "mcp/transport-any-origin",
			File: "mcpauth/transport.go",
			Old:  "\tif !t.serversOrigin(req.URL) {\n",
			New:  "\tif false {\n",
			Pkg:  "./mcpauth",
			Why:  "the MCP transport authorises its server's origin only (an SSE endpoint event may name any URL)",
			Run:  "TestTransportAuthorisesOnlyTheServersOrigin",
		},
		{
			Name: "mcp/transport-default-transport",
			File: "mcpauth/transport.go",
			Old:  "resp, err := a.t.baseRT().RoundTrip(req)",
			New:  "resp, err := http.DefaultTransport.RoundTrip(req)",
			Pkg:  "./mcpauth",
			Why:  "connected MCP calls go through Config.HTTPClient's transport, not http.DefaultTransport",
			Run:  "TestConnectedCallsUseTheAppsTransport",
		},
	}
}

// mcpauthWorkloadMutants guards the code of mcpauth/workload.go.
func mcpauthWorkloadMutants() []mutant {
	return []mutant{
		{
			Name: "mcpout/workload-transient-held",
			File: "mcpauth/workload.go",
			Pkg:  "./mcpauth",
			Old:  "pe.StatusCode == 0 || oauthflow.IsTransient(err) {",
			New:  "pe.StatusCode == 0 || pe.StatusCode >= 500 {",
			Run:  "TestWorkloadTransientAnswerIsNotARefusal",
			Why:  "a 429, a 408 or temporarily_unavailable is not kept as the workload's refusal for five minutes",
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
	}
}
