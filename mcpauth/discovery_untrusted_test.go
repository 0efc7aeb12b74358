package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// hermetic sends requests for example.com and its subdomains to the test
// server (its client's dialer does) and refuses every other host without
// a connection, keeping each URL asked for.
type hermetic struct {
	base http.RoundTripper
	mu   sync.Mutex
	urls []string
}

func (h *hermetic) RoundTrip(r *http.Request) (*http.Response, error) {
	h.mu.Lock()
	h.urls = append(h.urls, r.URL.String())
	h.mu.Unlock()
	if host := r.URL.Hostname(); host != "example.com" && !strings.HasSuffix(host, ".example.com") {
		return nil, errors.New("test: only example.com is reachable")
	}
	return h.base.RoundTrip(r)
}

func (h *hermetic) asked() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.urls...)
}

// publicServer is an https MCP server as https://example.com (a public
// host, as far as discovery can tell) serving docs, with {base} replaced by
// https://example.com; its client reaches nothing else.
func publicServer(t *testing.T, docs map[string]string) (*http.Client, *hermetic) {
	srv := publicTLSServer(t, docs)
	h := &hermetic{base: srv.Client().Transport}
	return &http.Client{Transport: h}, h
}

// publicTLSServer serves docs, with {base} replaced by https://example.com,
// whatever the method; its client's dialer sends example.com to it.
func publicTLSServer(t *testing.T, docs map[string]string) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		doc, ok := docs[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(strings.ReplaceAll(doc, "{base}", "https://example.com")))
	}))
	t.Cleanup(srv.Close)
	return srv
}

const publicPRM = `{"resource":"{base}/mcp","authorization_servers":["{base}"]}`

// Item 7: an https server's metadata naming an http endpoint (or one on
// this machine) is refused at discovery, with resource metadata and
// without: codes, verifiers and secrets would go in the clear.
func TestDiscoveryRefusesPlainEndpoints(t *testing.T) {
	t.Parallel()
	for _, field := range []string{"token_endpoint", "authorization_endpoint", "registration_endpoint", "revocation_endpoint"} {
		for _, bad := range []string{"http://example.com/x", "http://127.0.0.1:9/x", "https://localhost/x"} {
			for _, legacy := range []bool{false, true} {
				md := map[string]any{"issuer": "{base}", "authorization_endpoint": "{base}/authorize", "token_endpoint": "{base}/token",
					"registration_endpoint": "{base}/register", "revocation_endpoint": "{base}/revoke",
					"code_challenge_methods_supported": []string{"S256"}}
				md[field] = bad
				as, _ := json.Marshal(md)
				docs := map[string]string{"/.well-known/oauth-authorization-server": string(as)}
				if !legacy {
					docs["/.well-known/oauth-protected-resource/mcp"] = publicPRM
				}
				client, _ := publicServer(t, docs)
				d, err := discover(context.Background(), client, "https://example.com/mcp", Challenge{})
				if !errors.Is(err, ErrDiscovery) {
					t.Errorf("%s %s (legacy %v): discovered %+v, %v; want ErrDiscovery", field, bad, legacy, d, err)
				}
			}
		}
	}
	client, _ := publicServer(t, map[string]string{"/.well-known/oauth-protected-resource/mcp": publicPRM,
		"/.well-known/oauth-authorization-server": `{"issuer":"{base}","authorization_endpoint":"{base}/authorize",
			"token_endpoint":"{base}/token","revocation_endpoint":"{base}/revoke","code_challenge_methods_supported":["S256"]}`})
	if _, err := discover(context.Background(), client, "https://example.com/mcp", Challenge{}); err != nil {
		t.Fatalf("https endpoints throughout: %v", err)
	}
}

// Item 8: what a server names is fetched only within the rules: the
// challenge's resource metadata on the server's own origin, an https
// authorization server, no loopback host for a public server, and a plain
// http server only on a loopback host. Nothing refused is even asked for.
func TestDiscoveryFetchesOnlyWhatTheRulesAllow(t *testing.T) {
	t.Parallel()
	as := `{"issuer":"{base}","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/token","code_challenge_methods_supported":["S256"]}`
	tests := []struct {
		name, server, challenge, prm, forbidden string
	}{
		{name: "resource metadata off the server's origin", challenge: "https://other.example.com/prm", forbidden: "other.example.com"},
		{name: "resource metadata at the cloud metadata address", challenge: "http://169.254.169.254/latest/meta-data/", forbidden: "169.254.169.254"},
		{name: "resource metadata over http", challenge: "http://example.com/.well-known/oauth-protected-resource/mcp", forbidden: "http://"},
		{name: "an http authorization server", prm: `{"resource":"{base}/mcp","authorization_servers":["http://as.example.com"]}`, forbidden: "as.example.com"},
		{name: "a loopback authorization server", prm: `{"resource":"{base}/mcp","authorization_servers":["https://localhost:6379"]}`, forbidden: "localhost"},
		{name: "an internal authorization server over http", prm: `{"resource":"{base}/mcp","authorization_servers":["http://10.0.0.7"]}`, forbidden: "10.0.0.7"},
		{name: "a plain http server off loopback", server: "http://example.com/mcp", forbidden: "http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			prm := publicPRM
			if tt.prm != "" {
				prm = tt.prm
			}
			client, h := publicServer(t, map[string]string{"/.well-known/oauth-protected-resource/mcp": prm, "/prm": prm,
				"/.well-known/oauth-authorization-server": as})
			server := "https://example.com/mcp"
			if tt.server != "" {
				server = tt.server
			}
			_, err := discover(context.Background(), client, server, Challenge{ResourceMetadata: tt.challenge})
			if !errors.Is(err, ErrDiscovery) {
				t.Errorf("err = %v, want ErrDiscovery", err)
			}
			for _, u := range h.asked() {
				if strings.Contains(u, tt.forbidden) {
					t.Errorf("asked for %s", u)
				}
			}
		})
	}
}

// Item 8 at dial time: an authorization server named by a public name that
// resolves to an address the policy refuses, or at the cloud metadata
// address itself, is not connected to, by the Connector's own client.
func TestDiscoveryIsUnderTheOutboundPolicy(t *testing.T) {
	t.Parallel()
	for _, as := range []string{"https://rebound.example", "https://169.254.169.254"} {
		m := newMetadataServer(t, map[string]string{
			"/.well-known/oauth-protected-resource/mcp": `{"resource":"{base}/mcp","authorization_servers":["` + as + `"]}`})
		dns := &fakeDNS{names: map[string]string{"rebound.example": "127.0.0.1"}}
		client := policyClient(nil, &outboundPolicy{resolver: dns.resolver()})
		_, err := discover(context.Background(), client, m.srv.URL+"/mcp", Challenge{})
		if !errors.Is(err, ErrDiscovery) || !errors.Is(err, ErrOutbound) {
			t.Errorf("authorization server %s: %v, want ErrDiscovery from ErrOutbound", as, err)
		}
	}
}

// Item 2 in discovery: a 2025-03-26 server's claimed issuer is kept as it
// said, but is not proven unless it is the server's origin; the identity
// credentials are chosen by is that origin.
func TestLegacyIssuerClaimIsUnproven(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		issuer string
		proven bool
	}{{"{base}", true}, {"{base}/", true}, {"https://honest.example", false}, {"{base}/oauth", false}} {
		m := newMetadataServer(t, map[string]string{"/.well-known/oauth-authorization-server": strings.Replace(asDoc,
			`"issuer":"{base}"`, `"issuer":"`+tt.issuer+`"`, 1)})
		d, err := discover(context.Background(), m.srv.Client(), m.srv.URL+"/mcp", Challenge{})
		if err != nil {
			t.Fatalf("issuer %s: %v (a claim is not refused)", tt.issuer, err)
		}
		if d.issuerProven() != tt.proven || verifiedIssuer(d) != m.srv.URL {
			t.Errorf("issuer %s: proven %v, verified %q; want %v, the origin %s", tt.issuer, d.issuerProven(), verifiedIssuer(d), tt.proven, m.srv.URL)
		}
		if want := map[bool]string{true: d.AS.Issuer, false: m.srv.URL}[tt.proven]; audience(d) != want {
			t.Errorf("issuer %s: an assertion's audience %q, want %q", tt.issuer, audience(d), want)
		}
	}
}

// An https MCP server never downgrades: though it runs on a loopback host,
// where plain http is allowed for a server that is itself plain http (local
// development), neither it nor its metadata may name a plain http
// authorization server or endpoint, which would take codes, verifiers and
// secrets off TLS. Nothing refused is asked for. Its https endpoints, and a
// plain http loopback server's http ones, are taken.
func TestHTTPSServerNamesNoPlainEndpoint(t *testing.T) {
	t.Parallel()
	type site struct {
		srv  *httptest.Server
		mu   sync.Mutex
		seen []string
	}
	serve := func(tls bool, docs func(base string) map[string]string) *site {
		s := &site{}
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			s.seen = append(s.seen, r.URL.String())
			s.mu.Unlock()
			doc, ok := docs(s.srv.URL)[r.URL.Path]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(doc))
		})
		if tls {
			s.srv = httptest.NewTLSServer(h)
		} else {
			s.srv = httptest.NewServer(h)
		}
		t.Cleanup(s.srv.Close)
		return s
	}
	// plain is a plain http loopback server, which a downgrade would name.
	plain := serve(false, func(string) map[string]string { return nil })
	plainURL := plain.srv.URL                                           // http://127.0.0.1:port
	plainName := strings.Replace(plainURL, "127.0.0.1", "localhost", 1) // http://localhost:port
	as := func(base string, field, value string) string {
		md := map[string]any{"issuer": base, "authorization_endpoint": base + "/authorize", "token_endpoint": base + "/token",
			"registration_endpoint": base + "/register", "revocation_endpoint": base + "/revoke",
			"code_challenge_methods_supported": []string{"S256"}}
		if field != "" {
			md[field] = value
		}
		b, _ := json.Marshal(md)
		return string(b)
	}
	prm := func(base, server string) string {
		return `{"resource":"` + base + `/mcp","authorization_servers":["` + server + `"]}`
	}
	for _, field := range []string{"authorization_endpoint", "token_endpoint", "registration_endpoint", "revocation_endpoint"} {
		for _, bad := range []string{plainURL + "/x", plainName + "/x"} {
			for _, legacy := range []bool{false, true} {
				s := serve(true, func(base string) map[string]string {
					docs := map[string]string{"/.well-known/oauth-authorization-server": as(base, field, bad)}
					if !legacy {
						docs["/.well-known/oauth-protected-resource/mcp"] = prm(base, base)
					}
					return docs
				})
				_, err := discover(context.Background(), s.srv.Client(), s.srv.URL+"/mcp", Challenge{})
				if !errors.Is(err, ErrDiscovery) {
					t.Errorf("%s %s (legacy %v): %v; want ErrDiscovery", field, bad, legacy, err)
				}
			}
		}
	}
	s := serve(true, func(base string) map[string]string {
		return map[string]string{"/.well-known/oauth-protected-resource/mcp": prm(base, plainURL)}
	})
	if _, err := discover(context.Background(), s.srv.Client(), s.srv.URL+"/mcp", Challenge{}); !errors.Is(err, ErrDiscovery) {
		t.Errorf("an https server naming the plain http authorization server %s: %v; want ErrDiscovery", plainURL, err)
	}
	plain.mu.Lock()
	if len(plain.seen) != 0 {
		t.Errorf("the plain http server was asked for %q", plain.seen)
	}
	plain.mu.Unlock()

	for _, tls := range []bool{true, false} {
		s := serve(tls, func(base string) map[string]string {
			return map[string]string{"/.well-known/oauth-protected-resource/mcp": prm(base, base),
				"/.well-known/oauth-authorization-server": as(base, "", "")}
		})
		if _, err := discover(context.Background(), s.srv.Client(), s.srv.URL+"/mcp", Challenge{}); err != nil {
			t.Errorf("a loopback server (tls %v) naming endpoints of its own scheme: %v", tls, err)
		}
	}
}
