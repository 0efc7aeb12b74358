package mcpauth_test

import (
	"context"
	"fmt"
	"log"
	"net/http"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// An agent backend makes its users' MCP servers providers of its module: one
// Connector per Module, whose callback URL the authorization servers see.
func ExampleNew() {
	ctx := context.Background()
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV()})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	conn, err := mcpauth.New(mcpauth.Config{Module: m, RedirectURL: "https://api.example.com" + oauthflow.CallbackPath})
	if err != nil {
		log.Fatal(err)
	}
	// A tool's MCP client sends its requests through the user's transport:
	// the user's token, and on the server's first 401 an error that the
	// "oauth" workflow turns into a sign-in.
	client := conn.Client(ctx, "alice", "https://mcp.example.com/mcp")
	_ = client
	fmt.Println("connector ready")
	// Output: connector ready
}

// Every MCP server is a provider whose ID comes from its URL, so any
// instance names it alike.
func ExampleProviderID() {
	id, err := mcpauth.ProviderID("https://MCP.example.com/mcp")
	if err != nil {
		log.Fatal(err)
	}
	same, _ := mcpauth.ProviderID("https://mcp.example.com/mcp#tools")
	fmt.Println(id == same, len(id) > len("mcp-mcp.example.com-"))
	// Output: true true
}

// ParseChallenge reads what a 401 or 403 asks for: where the server's
// resource metadata is, and the scopes it needs.
func ExampleParseChallenge() {
	h := http.Header{}
	h.Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="files:read files:write", resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"`)
	ch, ok := mcpauth.ParseChallenge(h)
	fmt.Println(ok, ch.Error, ch.Scopes)
	fmt.Println(ch.ResourceMetadata)
	// Output:
	// true insufficient_scope [files:read files:write]
	// https://mcp.example.com/.well-known/oauth-protected-resource/mcp
}
