package mcpauth

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// fuzzDocs is what the fuzzed server says: its challenge, its resource
// metadata, its authorization server's metadata, its registration answer.
type fuzzDocs struct{ prm, as, reg string }

// fuzzServer serves the current docs ({base}: its own URL): the resource
// metadata at its well-known URLs and /prm, the authorization server
// metadata at every well-known URL of any issuer path, the registration
// answer at /register; an empty document is a 404.
func fuzzServer(f *testing.F) (*httptest.Server, *atomic.Pointer[fuzzDocs]) {
	var docs atomic.Pointer[fuzzDocs]
	docs.Store(&fuzzDocs{})
	var srv *httptest.Server
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, p := docs.Load(), r.URL.Path
		var doc string
		switch {
		case p == "/prm" || strings.HasPrefix(p, "/.well-known/oauth-protected-resource"):
			doc = d.prm
		case strings.Contains(p, "/.well-known/oauth-authorization-server") || strings.Contains(p, "/.well-known/openid-configuration"):
			doc = d.as
		case p == "/register":
			if doc = d.reg; doc != "" {
				w.WriteHeader(http.StatusCreated)
			}
		}
		if doc == "" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write([]byte(strings.ReplaceAll(doc, "{base}", srv.URL)))
	}))
	f.Cleanup(srv.Close)
	return srv, &docs
}

// onlyTo is a transport that connects to addr, also under the name
// localhost (another origin for the same server), and nowhere else:
// whatever the fuzzer names, nothing but the fuzzed server is reached.
func onlyTo(addr string) *http.Transport {
	_, port, _ := net.SplitHostPort(addr)
	return &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		if a != addr && a != "localhost:"+port {
			return nil, errors.New("fuzz: only the fuzzed server is reachable")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
}

// What an MCP server says in discovery is the network's to write: whatever
// its challenge, resource metadata, authorization server metadata and
// registration answer hold, discovery and registration never panic, fail
// only with ErrDiscovery or ErrRegistration, and accept nothing the rules
// refuse.
func FuzzDiscovery(f *testing.F) {
	const (
		prm = `{"resource":"{base}/mcp","authorization_servers":["{base}"],"scopes_supported":["a"]}`
		as  = `{"issuer":"{base}","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/token",
			"registration_endpoint":"{base}/register","code_challenge_methods_supported":["S256"]}`
		reg = `{"client_id":"c1","client_secret":"s","token_endpoint_auth_method":"client_secret_basic"}`
	)
	f.Add(``, prm, as, reg)
	f.Add(`Bearer resource_metadata="{base}/prm", scope="a b"`, prm, as, reg)
	f.Add(`Bearer resource_metadata="http://169.254.169.254/latest/meta-data/"`, prm, as, reg)
	f.Add(`Bearer resource_metadata="{other}/prm"`, prm, as, reg) // the same server on another origin
	f.Add(``, ``, strings.Replace(as, `"issuer":"{base}"`, `"issuer":"https://honest.example"`, 1), reg)
	f.Add(``, ``, ``, `{"client_id":""}`)
	f.Add(``, `{"resource":"{base}","authorization_servers":["{base}/tenant"]}`,
		strings.Replace(as, `"issuer":"{base}"`, `"issuer":"{base}/tenant"`, 1), `{}`)
	f.Add(``, strings.Replace(prm, `["{base}"]`, `["http://10.0.0.1"]`, 1), as, reg)
	f.Add(``, prm, strings.Replace(as, `"{base}/token"`, `"http://example.com/token"`, 1), reg)
	f.Add(`Bearer resource_metadata="{base}/prm"`, `{"resource":"{base}/mcp2","authorization_servers":[]}`, `[]`, `null`)
	f.Add(``, prm, as, `{"client_id":"c1","client_secret_expires_at":-1,"token_endpoint_auth_method":7}`)

	srv, docs := fuzzServer(f)
	addr := strings.TrimPrefix(srv.URL, "http://")
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = m.Close() })
	c, err := New(Config{Module: m, RedirectURL: "http://127.0.0.1:1/cb", HTTPClient: &http.Client{Transport: onlyTo(addr)}})
	if err != nil {
		f.Fatal(err)
	}
	server := srv.URL + "/mcp"
	_, port, _ := net.SplitHostPort(addr)
	other := "http://localhost:" + port
	f.Fuzz(func(t *testing.T, header, prm, as, reg string) {
		docs.Store(&fuzzDocs{prm: prm, as: as, reg: reg})
		h := http.Header{}
		h.Set("WWW-Authenticate", strings.NewReplacer("{base}", srv.URL, "{other}", other).Replace(header))
		ch, _ := ParseChallenge(h)
		d, err := discover(context.Background(), c.http, server, ch)
		if err != nil {
			if !errors.Is(err, ErrDiscovery) {
				t.Fatalf("discovery failed with %v, not ErrDiscovery", err)
			}
			return
		}
		checkDiscovered(t, d, server, ch)
		if d.AS.RegistrationEndpoint == "" {
			return
		}
		r, err := c.register(context.Background(), d)
		if err != nil && !errors.Is(err, ErrRegistration) {
			t.Fatalf("registration failed with %v, not ErrRegistration", err)
		}
		if err == nil && r.Client.ID == "" {
			t.Fatalf("registration accepted %+v without a client_id", r)
		}
	})
}

// checkDiscovered holds d, discovered for server (on a loopback host) after
// the challenge ch, to the rules.
func checkDiscovered(t *testing.T, d *Discovered, server string, ch Challenge) {
	t.Helper()
	if ch.ResourceMetadata != "" && originOf(ch.ResourceMetadata) != originOf(server) {
		t.Fatalf("resource metadata off the server's origin was used: %q", ch.ResourceMetadata)
	}
	if _, ok := covering(d.Resource, server); !ok {
		t.Fatalf("the resource %q is not %s or a parent of it", d.Resource, server)
	}
	if d.AS.AuthorizationEndpoint == "" || d.AS.TokenEndpoint == "" || !slices.Contains(d.AS.CodeChallengeMethodsSupported, "S256") {
		t.Fatalf("unusable metadata accepted: %+v", d.AS)
	}
	if err := d.AS.endpointsFit(server); err != nil {
		t.Fatalf("an endpoint the rules refuse was accepted: %v", err)
	}
	if d.PRM != nil && strings.TrimSuffix(d.AS.Issuer, "/") != strings.TrimSuffix(d.PRM.AuthorizationServers[0], "/") {
		t.Fatalf("metadata of %q accepted for the authorization server %q", d.AS.Issuer, d.PRM.AuthorizationServers[0])
	}
	if d.PRM == nil && (verifiedIssuer(d) != originOf(server) || d.issuerProven() != (strings.TrimSuffix(d.AS.Issuer, "/") == originOf(server))) {
		t.Fatalf("a 2025-03-26 claim of %q: verified %q, proven %v", d.AS.Issuer, verifiedIssuer(d), d.issuerProven())
	}
}
