package main

// untrustedServers are the guards of issue 20: what an MCP server, its metadata or a redirect says is input.
func untrustedServers() []mutant {
	return []mutant{}
}
