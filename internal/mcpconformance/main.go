// Command mcpconformance is the client the official MCP conformance suite
// runs for its client auth scenarios: the suite starts an MCP server and its
// authorization server for a scenario, then runs this program with the
// server's URL as its one argument, the scenario's name in
// MCP_CONFORMANCE_SCENARIO and its settings (pre-registered credentials, ...)
// as JSON in MCP_CONFORMANCE_CONTEXT. It is built on mcpauth and the MCP Go
// SDK, as an app of ours would be: a Module on a memory store, a Connector,
// and one user whose sign-in consents at once (the suite's authorization
// server redirects without asking anyone).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

const (
	user        = "conformance-user"
	redirectURL = "http://localhost:3000" + oauthflow.CallbackPath
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: mcpconformance <server-url>  (scenario in MCP_CONFORMANCE_SCENARIO)")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := run(ctx, os.Args[1], os.Getenv("MCP_CONFORMANCE_SCENARIO"), os.Getenv("MCP_CONFORMANCE_CONTEXT")); err != nil {
		fmt.Fprintln(os.Stderr, "mcpconformance:", err)
		os.Exit(1)
	}
}

// settings is what MCP_CONFORMANCE_CONTEXT may carry.
type settings struct {
	ClientID      string `json:"client_id"`
	ClientSecret  string `json:"client_secret"`
	PrivateKeyPEM string `json:"private_key_pem"`
	SigningAlg    string `json:"signing_algorithm"`
	// cross-app access
	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
}

func run(ctx context.Context, serverURL, scenario, rawSettings string) error {
	var set settings
	if rawSettings != "" {
		if err := json.Unmarshal([]byte(rawSettings), &set); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	if !strings.HasPrefix(scenario, "auth/") {
		return fmt.Errorf("scenario %q: only the auth scenarios are served", scenario)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: log})
	if err != nil {
		return err
	}
	defer m.Close()
	cfg := mcpauth.Config{Module: m, RedirectURL: redirectURL, ClientName: "oauthflow conformance client",
		ClientMetadataURL: "https://conformance-test.local/client-metadata.json"}
	asClient := strings.HasPrefix(scenario, "auth/client-credentials-")
	if set.ClientID != "" {
		cl := mcpauth.Client{ID: set.ClientID, Secret: set.ClientSecret, PrivateKeyPEM: set.PrivateKeyPEM, SigningAlg: set.SigningAlg}
		if set.PrivateKeyPEM != "" {
			cl.AuthMethod = "private_key_jwt"
		}
		cfg.Clients = map[string]mcpauth.Client{"*": cl}
	}
	if set.IdPIDToken != "" {
		cfg.CrossApp = &mcpauth.CrossApp{TokenURL: set.IdPTokenEndpoint, ClientID: set.IdPClientID,
			IDToken: func(context.Context, string) (string, error) { return set.IdPIDToken, nil }}
	}
	conn, err := mcpauth.New(cfg)
	if err != nil {
		return err
	}
	h := &mcpauth.OAuthHandler{Connector: conn, UserID: user, ServerURL: serverURL, SignIn: consent, AsClient: asClient,
		CrossApp: set.IdPIDToken != ""}
	return callTool(ctx, serverURL, h)
}

// callTool connects to the server as the user, lists its tools and calls
// the suite's test tool.
func callTool(ctx context.Context, serverURL string, h *mcpauth.OAuthHandler) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "oauthflow-conformance", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: serverURL, OAuthHandler: h}, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer session.Close()
	if _, err := session.ListTools(ctx, nil); err != nil {
		return fmt.Errorf("tools/list: %w", err)
	}
	if _, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "test-tool", Arguments: map[string]any{}}); err != nil {
		return fmt.Errorf("tools/call: %w", err)
	}
	return nil
}

// consent opens authURL as a browser would and returns the query of the
// redirect to the callback: the suite's authorization server consents at once.
func consent(ctx context.Context, authURL string) (url.Values, error) {
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, authURL, nil)
	if err != nil {
		return nil, err
	}
	resp, err := noFollow.Do(req)
	if err != nil {
		return nil, err
	}
	_ = resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.RawQuery == "" {
		return nil, errors.Join(fmt.Errorf("the authorization endpoint answered HTTP %d without a redirect", resp.StatusCode), err)
	}
	return loc.Query(), nil
}
