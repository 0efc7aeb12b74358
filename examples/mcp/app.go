package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

// app is the example on one origin: the demo authorization server under
// /demo, an MCP server it protects at /mcp, and the agent backend (a Module,
// its Connector, the "agent" workflow) mounted beside them.
type app struct {
	http.Handler
	mod    *oauthflow.Module
	server string // the MCP server's URL
}

// newApp builds the example for a host reachable at base.
func newApp(ctx context.Context, base string, log *slog.Logger) (*app, error) {
	mux := http.NewServeMux()
	// The demo authorization server is the test kit's, which also serves its
	// metadata where RFC 8414 puts it for an issuer with a path:
	// /.well-known/oauth-authorization-server/demo.
	as := oauthflowtest.Mount(mux, base+"/demo", oauthflowtest.Options{ConsentPage: true, RotateRefreshTokens: true})
	// The demo server has no dynamic registration: the app's own client.
	client := as.Credentials(base + oauthflow.CallbackPath)
	server := base + "/mcp"
	mountMCPServer(mux, server, as.URL, as.IntrospectURL(), client)

	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: log})
	if err != nil {
		return nil, err
	}
	m.Mount(mux)
	conn, err := mcpauth.New(mcpauth.Config{Module: m, RedirectURL: client.RedirectURL,
		Clients: map[string]mcpauth.Client{as.URL: {ID: client.ClientID, Secret: client.ClientSecret}}})
	if err != nil {
		_ = m.Close()
		return nil, err
	}
	id, err := mcpauth.ProviderID(server)
	if err != nil {
		_ = m.Close()
		return nil, err
	}
	if err := m.Engine.Register(oauthflow.ToolWorkflow("agent", whoamiTool(conn, server), id)); err != nil {
		_ = m.Close()
		return nil, err
	}
	return &app{Handler: mux, mod: m, server: server}, nil
}

func (a *app) Close() error { return a.mod.Close() }

// mountMCPServer serves an MCP server at server (this origin's /mcp),
// built with the official Go SDK and protected by issuer: its bearer-token
// middleware checks each token at the issuer's introspection endpoint as
// client, and its resource metadata names the issuer. Its one tool, whoami,
// answers who the token is for.
func mountMCPServer(mux *http.ServeMux, server, issuer, introspection string, client providers.Credentials) {
	s := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "whoami", Description: "Who the call is made for."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: req.Extra.TokenInfo.UserID}}}, nil, nil
		})
	u, _ := url.Parse(server)
	prm := u.Scheme + "://" + u.Host + "/.well-known/oauth-protected-resource" + u.Path
	mux.Handle("GET "+strings.TrimPrefix(prm, u.Scheme+"://"+u.Host), auth.ProtectedResourceMetadataHandler(
		&oauthex.ProtectedResourceMetadata{Resource: server, AuthorizationServers: []string{issuer}, ScopesSupported: []string{"read"}}))
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		return introspect(ctx, introspection, client, token)
	}
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux.Handle(u.Path, auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prm, Scopes: []string{"read"}})(handler))
}

// introspect asks the demo authorization server's introspection endpoint
// about token (RFC 7662), as client.
func introspect(ctx context.Context, endpoint string, client providers.Credentials, token string) (*auth.TokenInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint,
		strings.NewReader(url.Values{"token": {token}}.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(url.QueryEscape(client.ClientID), url.QueryEscape(client.ClientSecret))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var in struct {
		Active bool   `json:"active"`
		Sub    string `json:"sub"`
		Scope  string `json:"scope"`
		Exp    int64  `json:"exp"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&in); err != nil || !in.Active {
		return nil, fmt.Errorf("%w: not active", auth.ErrInvalidToken)
	}
	return &auth.TokenInfo{UserID: in.Sub, Scopes: strings.Fields(in.Scope), Expiration: time.Unix(in.Exp, 0)}, nil
}

// whoamiTool calls the MCP server's whoami as the user, through the Go SDK's
// client and the Connector's transport. Without a token for the server the
// transport answers ErrNoToken, which the tool reports as "unauthorized".
func whoamiTool(c *mcpauth.Connector, server string) *oauthflow.Tool {
	return oauthflow.NewTool("whoami", "Asks the MCP server who the user is.", oauthflow.Schema{Type: "object"},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
			session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: server,
				HTTPClient: c.Client(ctx, tc.UserID, server), DisableStandaloneSSE: true}, nil)
			if err != nil {
				return nil, err
			}
			defer session.Close()
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
			if err != nil {
				return nil, err
			}
			text, _ := res.Content[0].(*mcp.TextContent)
			if text == nil {
				return nil, errors.New("whoami answered no text")
			}
			return map[string]string{"user": text.Text}, nil
		})
}

// signInURL is the link that the agent's run, waiting for a sign-in, shows.
func (a *app) signInURL(ctx context.Context, run *oauthflow.Run) (string, error) {
	if run.State != oauthflow.StateAwaitingAuth || len(run.Children) == 0 {
		return "", fmt.Errorf("the agent is %s, not waiting for a sign-in", run.State)
	}
	var doc oauthflow.OAuthPromptDocument
	if err := a.mod.Engine.Document(ctx, run.Children[len(run.Children)-1], oauthflow.PromptDocumentName, &doc); err != nil {
		return "", err
	}
	return doc.AuthURL, nil
}
