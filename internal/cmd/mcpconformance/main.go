// Command mcpconformance is the client the official MCP conformance suite
// runs for its client auth scenarios: the suite starts an MCP server and its
// authorization server for a scenario, then runs this program with the
// server's URL as its one argument, the scenario's name in
// MCP_CONFORMANCE_SCENARIO, the spec revision whose wire the server speaks in
// MCP_CONFORMANCE_PROTOCOL_VERSION (2026-07-28: stateless, server/discover
// and per-request _meta, no initialize; earlier revisions: the initialize
// handshake) and its settings (pre-registered credentials, ...) as JSON in
// MCP_CONFORMANCE_CONTEXT. It is built on mcpauth and the MCP Go
// SDK, as an app of ours would be: a Module on a memory store, a Connector,
// and one user whose sign-in consents at once (the suite's authorization
// server redirects without asking anyone).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
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
	suite := suiteRun{scenario: os.Getenv("MCP_CONFORMANCE_SCENARIO"), protocol: os.Getenv("MCP_CONFORMANCE_PROTOCOL_VERSION"),
		settings: os.Getenv("MCP_CONFORMANCE_CONTEXT")}
	if err := run(ctx, os.Args[1], suite); err != nil {
		fmt.Fprintln(os.Stderr, "mcpconformance:", err)
		os.Exit(1)
	}
}

// suiteRun is what the suite tells the client of the scenario it runs.
type suiteRun struct {
	scenario string // MCP_CONFORMANCE_SCENARIO
	protocol string // MCP_CONFORMANCE_PROTOCOL_VERSION; empty: the SDK's latest
	settings string // MCP_CONFORMANCE_CONTEXT, JSON; empty: none
}

// settings is what MCP_CONFORMANCE_CONTEXT may carry.
type settings struct {
	ClientID      string `json:"client_id"`
	ClientSecret  string `json:"client_secret"`
	Issuer        string `json:"issuer"` // the pre-registered client's authorization server, when the scenario names it
	PrivateKeyPEM string `json:"private_key_pem"`
	SigningAlg    string `json:"signing_algorithm"`
	// cross-app access
	IdPClientID      string `json:"idp_client_id"`
	IdPIDToken       string `json:"idp_id_token"`
	IdPTokenEndpoint string `json:"idp_token_endpoint"`
	// workload identity federation: the workload's own JWT, for the JWT
	// bearer grant (the wrong-audience and expired ones are for the suite's
	// negative runs)
	WorkloadJWT string `json:"valid_jwt"`
}

func run(ctx context.Context, serverURL string, suite suiteRun) error {
	var set settings
	if suite.settings != "" {
		if err := json.Unmarshal([]byte(suite.settings), &set); err != nil {
			return fmt.Errorf("MCP_CONFORMANCE_CONTEXT: %w", err)
		}
	}
	if !strings.HasPrefix(suite.scenario, "auth/") {
		return fmt.Errorf("scenario %q: only the auth scenarios are served", suite.scenario)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: log})
	if err != nil {
		return err
	}
	defer m.Close()
	cfg := mcpauth.Config{Module: m, RedirectURL: redirectURL, ClientName: "oauthflow conformance client",
		ClientMetadataURL: "https://conformance-test.local/client-metadata.json"}
	asClient := strings.HasPrefix(suite.scenario, "auth/client-credentials-")
	if set.ClientID != "" {
		cl := mcpauth.Client{ID: set.ClientID, Secret: set.ClientSecret, PrivateKeyPEM: set.PrivateKeyPEM, SigningAlg: set.SigningAlg}
		if set.PrivateKeyPEM != "" {
			cl.AuthMethod = "private_key_jwt"
		}
		issuer := "*" // a client without a secret may serve every issuer
		if set.ClientSecret != "" {
			if issuer, err = clientIssuer(ctx, serverURL, set.Issuer); err != nil {
				return err
			}
		}
		cfg.Clients = map[string]mcpauth.Client{issuer: cl}
	}
	if set.IdPIDToken != "" {
		cfg.CrossApp = &mcpauth.CrossApp{TokenURL: set.IdPTokenEndpoint, ClientID: set.IdPClientID,
			IDToken: func(context.Context, string) (string, error) { return set.IdPIDToken, nil }}
	}
	if set.WorkloadJWT != "" {
		// The scenario's workload JWT, for the JWT bearer grant, the only
		// one its authorization server takes; the context's client_id goes
		// with it (token_endpoint_auth_method none).
		cfg.Workload = &mcpauth.Workload{
			Assertion: func(context.Context, string) (string, error) { return set.WorkloadJWT, nil }}
	}
	conn, err := mcpauth.New(cfg)
	if err != nil {
		return err
	}
	h := &mcpauth.OAuthHandler{Connector: conn, UserID: user, ServerURL: serverURL, SignIn: consent, AsClient: asClient,
		CrossApp: set.IdPIDToken != "", Workload: set.WorkloadJWT != ""}
	return callTool(ctx, serverURL, suite.protocol, h)
}

// clientIssuer is the issuer of the authorization server the scenario's
// pre-registered client belongs to, as an app that registered it there
// knows it: the one the scenario names, else the first that the MCP
// server's resource metadata (RFC 9728, at its well-known URLs) names. A
// client with a secret is configured for that issuer alone: mcpauth takes
// no secret under "*", which any server could have sent to a server of
// its own.
func clientIssuer(ctx context.Context, serverURL, named string) (string, error) {
	if named != "" {
		return named, nil
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	origin, path := u.Scheme+"://"+u.Host, strings.TrimSuffix(u.EscapedPath(), "/")
	for _, wk := range []string{origin + "/.well-known/oauth-protected-resource" + path, origin + "/.well-known/oauth-protected-resource"} {
		var prm struct {
			AuthorizationServers []string `json:"authorization_servers"`
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, wk, nil)
		if err != nil {
			return "", err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&prm)
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK && err == nil && len(prm.AuthorizationServers) > 0 {
			return prm.AuthorizationServers[0], nil
		}
	}
	return "", fmt.Errorf("the pre-registered client's issuer: %s names no authorization server", serverURL)
}

// callTool connects to the server as the user, at the wire of the protocol
// revision (the SDK's latest when empty), lists its tools and calls the
// suite's test tool.
func callTool(ctx context.Context, serverURL, protocol string, h *mcpauth.OAuthHandler) error {
	client := mcp.NewClient(&mcp.Implementation{Name: "oauthflow-conformance", Version: "1.0.0"}, nil)
	session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: serverURL, OAuthHandler: h, HTTPClient: h.HTTPClient(nil)},
		&mcp.ClientSessionOptions{ProtocolVersion: protocol})
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
