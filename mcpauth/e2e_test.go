package mcpauth_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// provedKey is the context key of the thumbprint of the key a request's
// DPoP proof was signed with.
type provedKey struct{}

// dpopGate accepts a token sent as "Authorization: DPoP" only with a valid
// proof for the request (RFC 9449 §7), which it records for the token's
// check, and hands the SDK's bearer middleware the token as Bearer.
func dpopGate(base func() string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, _ := strings.Cut(r.Header.Get("Authorization"), " ")
		if strings.EqualFold(scheme, "DPoP") {
			jkt, err := dpop.Verify(r.Header.Get("DPoP"), r.Method, base()+r.URL.Path, time.Now(), time.Minute, tok, "")
			if err != nil {
				w.Header().Set("WWW-Authenticate", `DPoP error="invalid_dpop_proof", algs="ES256"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			r = r.Clone(context.WithValue(r.Context(), provedKey{}, jkt))
			r.Header.Set("Authorization", "Bearer "+tok)
		}
		next.ServeHTTP(w, r)
	})
}

// notesServer is an MCP server built with the official Go SDK: streamable
// HTTP behind its bearer-token middleware, tokens checked by introspection
// at the peer, its protected resource metadata served by the SDK's handler.
// A token the peer bound to a key (cnf.jkt, DPoP) is accepted only with a
// proof of that key. Its one tool, whoami, answers the user the token was
// issued to.
func notesServer(t *testing.T) (srv *httptest.Server, setPeer func(issuer string)) {
	var issuer atomic.Value
	mux := http.NewServeMux()
	srv = httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	resource := srv.URL + "/mcp"
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		form := url.Values{"token": {token}}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, issuer.Load().(string)+"/token/introspection", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.SetBasicAuth(oidcpeer.BasicClient, oidcpeer.BasicSecret)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		var in struct {
			Active bool   `json:"active"`
			Sub    string `json:"sub"`
			Scope  string `json:"scope"`
			Aud    any    `json:"aud"`
			Exp    int64  `json:"exp"`
			Cnf    struct {
				JKT string `json:"jkt"`
			} `json:"cnf"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&in); err != nil || !in.Active || fmt.Sprint(in.Aud) != resource {
			return nil, fmt.Errorf("%w: inactive, or not for %s", auth.ErrInvalidToken, resource)
		}
		if proved, _ := ctx.Value(provedKey{}).(string); in.Cnf.JKT != proved {
			return nil, fmt.Errorf("%w: bound to key %q, proved %q", auth.ErrInvalidToken, in.Cnf.JKT, proved)
		}
		return &auth.TokenInfo{Scopes: strings.Fields(in.Scope), Expiration: time.Unix(in.Exp, 0), UserID: in.Sub}, nil
	}
	server := mcp.NewServer(&mcp.Implementation{Name: "notes", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "whoami", Description: "The user the call is made for."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			info := req.Extra.TokenInfo
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: info.UserID}}}, nil, nil
		})
	prmURL := srv.URL + "/.well-known/oauth-protected-resource/mcp"
	handler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux.Handle("/mcp", dpopGate(func() string { return srv.URL },
		auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{ResourceMetadataURL: prmURL, Scopes: []string{"read"}})(handler)))
	setPeer = func(iss string) {
		issuer.Store(iss)
		mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
			Resource: resource, AuthorizationServers: []string{iss}, ScopesSupported: []string{"read"}}))
	}
	return srv, setPeer
}

// balancer sends each request to the next of its instances' handlers, as a
// load balancer in front of replicas would: the public callback URL.
type balancer struct {
	mu       sync.Mutex
	next     int
	handlers []http.Handler
}

func (b *balancer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b.mu.Lock()
	h := b.handlers[b.next%len(b.handlers)]
	b.next++
	b.mu.Unlock()
	h.ServeHTTP(w, r)
}

// whoamiTool calls the MCP server's whoami as the user, through the Go SDK
// and the Connector's transport; the store's ErrNoToken becomes the tool's
// "unauthorized".
func whoamiTool(c *mcpauth.Connector, server string) *oauthflow.Tool {
	return oauthflow.NewTool("whoami", "Who the MCP server sees.", oauthflow.Schema{Type: "object"},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1.0.0"}, nil)
			session, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: server, HTTPClient: c.Client(ctx, tc.UserID, server),
				DisableStandaloneSSE: true}, nil)
			if err != nil {
				return nil, err
			}
			defer session.Close()
			res, err := session.CallTool(ctx, &mcp.CallToolParams{Name: "whoami", Arguments: map[string]any{}})
			if err != nil {
				return nil, err
			}
			return map[string]string{"user": res.Content[0].(*mcp.TextContent).Text}, nil
		})
}

// Two users of one agent backend, on two Module instances sharing Redis,
// each sign in to an OAuth-protected MCP server (the Go SDK's server, the
// oidc-provider peer with dynamic registration and resource indicators)
// through the "oauth" workflow, and call its tool as themselves; the agent
// resumes. One client registration serves both instances; when the tokens
// expire, both instances read at once and the provider sees one refresh.
func TestMCPServerEndToEnd(t *testing.T) {
	t.Parallel()
	mcpSrv, setPeer := notesServer(t)
	server := mcpSrv.URL + "/mcp"
	peer := oidcpeer.Start(t, oidcpeer.Options{Registration: true, Resources: []string{server}, ATTTL: 10 * time.Minute, PKCE: oidcpeer.PKCERequired})
	setPeer(peer.Issuer())

	c := redistest.Real(t)
	kv := oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
	clock := fakeclock.New(time.Now())
	lb := &balancer{}
	front := httptest.NewServer(lb)
	t.Cleanup(front.Close)
	id, err := mcpauth.ProviderID(server)
	if err != nil {
		t.Fatal(err)
	}
	var mods []*oauthflow.Module
	for range 2 {
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Now: clock.Now, Logger: slog.New(slog.DiscardHandler),
			WorkerInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		conn, err := mcpauth.New(mcpauth.Config{Module: m, RedirectURL: front.URL + oauthflow.CallbackPath})
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Engine.Register(oauthflow.ToolWorkflow("agent", whoamiTool(conn, server), id)); err != nil {
			t.Fatal(err)
		}
		mux := http.NewServeMux()
		m.Mount(mux)
		lb.handlers = append(lb.handlers, mux)
		mods = append(mods, m)
	}

	for i, user := range []string{"alice", "bob"} {
		run, err := mods[i].Engine.Launch(context.Background(), user, "agent", nil, oauthflow.RunOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if run.State != oauthflow.StateAwaitingAuth || len(run.Children) != 1 {
			t.Fatalf("%s: the agent is %s/%s, want awaiting_auth with a sign-in: %s", user, run.State, run.Status, run.Result)
		}
		var doc oauthflow.OAuthPromptDocument
		if err := mods[i].Engine.Document(context.Background(), run.Children[0], oauthflow.PromptDocumentName, &doc); err != nil {
			t.Fatal(err)
		}
		cb := peer.Authorize(t, setParam(doc.AuthURL, "login_hint", user), front.URL+oauthflow.CallbackPath)
		resp, err := http.Get(cb.String()) // through the balancer: either instance
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: callback HTTP %d: %s\n%s", user, resp.StatusCode, body, peer.Output())
		}
		run, err = mods[1-i].Engine.Get(context.Background(), run.ID)
		if err != nil {
			t.Fatal(err)
		}
		if run.Status != oauthflow.RunCompleted || string(run.Result) != `{"user":"`+user+`"}` {
			t.Fatalf("%s: the agent ended %s with %s, want the MCP server to see %s", user, run.Status, run.Result, user)
		}
	}
	if n := strings.Count(peer.Output(), "registration.success"); n != 1 {
		t.Errorf("%d client registrations, want 1 for the issuer:\n%s", n, peer.Output())
	}
	// The peer takes DPoP (ES256): each grant is bound to a key of its own,
	// sealed nowhere in the clear; the token alone, as Bearer, is refused.
	stored, err := mods[0].Tokens.GetTokens(context.Background(), "alice", id)
	if err != nil || stored.TokenType != "DPoP" {
		t.Fatalf("alice's grant: %+v, %v; want a DPoP-bound token", stored, err)
	}
	bare, _ := http.NewRequest(http.MethodPost, server, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
	bare.Header.Set("Authorization", "Bearer "+stored.AccessToken)
	bare.Header.Set("Content-Type", "application/json")
	bare.Header.Set("Accept", "application/json, text/event-stream")
	if resp, err := http.DefaultClient.Do(bare); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the bound token sent without its proof: %v, %v; want 401", resp, err)
	} else {
		_ = resp.Body.Close()
	}

	// The tokens expire (for the store); both instances call at once.
	clock.Advance(11 * time.Minute)
	before := strings.Count(peer.Output(), "grant.success: refresh_token")
	var wg sync.WaitGroup
	for _, m := range mods {
		for _, user := range []string{"alice", "bob"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				run, err := m.Engine.Launch(context.Background(), user, "agent", nil, oauthflow.RunOptions{})
				if err != nil || run.Status != oauthflow.RunCompleted {
					t.Errorf("%s after expiry: %v %+v", user, err, run)
				}
			}()
		}
	}
	waitfor.Group(t, &wg, "the runs after expiry")
	if n := strings.Count(peer.Output(), "grant.success: refresh_token") - before; n != 2 {
		t.Errorf("%d refreshes, want one per user across both instances:\n%s", n, peer.Output())
	}
}

func setParam(raw, k, v string) string {
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set(k, v)
	u.RawQuery = q.Encode()
	return u.String()
}
