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

// metadataServer serves JSON documents at paths (with {base} replaced by its
// own URL) and 404 elsewhere, and keeps the paths asked for in order.
type metadataServer struct {
	srv  *httptest.Server
	mu   sync.Mutex
	docs map[string]string
	seen []string
}

func newMetadataServer(t *testing.T, docs map[string]string) *metadataServer {
	t.Helper()
	m := &metadataServer{docs: docs}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		m.seen = append(m.seen, r.URL.Path)
		doc, ok := m.docs[r.URL.Path]
		m.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(strings.ReplaceAll(doc, "{base}", m.srv.URL)))
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *metadataServer) asked() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.seen...)
}

const asDoc = `{"issuer":"{base}","authorization_endpoint":"{base}/authorize","token_endpoint":"{base}/token",
	"registration_endpoint":"{base}/register","code_challenge_methods_supported":["S256"]}`

func TestDiscover(t *testing.T) {
	t.Parallel()
	prm := func(resource string) string {
		return `{"resource":"` + resource + `","authorization_servers":["{base}"],"scopes_supported":["mcp:read"]}`
	}
	tests := []struct {
		name      string
		path      string // of the MCP server
		challenge string // resource_metadata, relative to the server
		docs      map[string]string
		wantAsked []string
		wantErr   string // in the error; "" for success
		resource  string // the resource discovered, {base} replaced; "" for the server's URL
		legacy    bool
	}{
		{name: "the challenge's metadata URL comes first", path: "/mcp", challenge: "/custom/prm",
			docs: map[string]string{"/custom/prm": prm("{base}/mcp"), "/.well-known/oauth-protected-resource/mcp": `{}`,
				"/.well-known/oauth-authorization-server": asDoc},
			wantAsked: []string{"/custom/prm", "/.well-known/oauth-authorization-server"}},
		{name: "the path-aware well-known URL, then the root", path: "/mcp",
			docs:      map[string]string{"/.well-known/oauth-protected-resource": prm("{base}/mcp"), "/.well-known/openid-configuration": asDoc},
			wantAsked: []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"}},
		{name: "an issuer with a path: RFC 8414 inserted, OpenID inserted, OpenID appended", path: "/mcp",
			docs: map[string]string{"/.well-known/oauth-protected-resource/mcp": `{"resource":"{base}/mcp","authorization_servers":["{base}/tenant"]}`,
				"/tenant/.well-known/openid-configuration": strings.ReplaceAll(asDoc, `"issuer":"{base}"`, `"issuer":"{base}/tenant"`)},
			wantAsked: []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-authorization-server/tenant",
				"/.well-known/openid-configuration/tenant", "/tenant/.well-known/openid-configuration"}},
		{name: "metadata of another issuer is refused", path: "/mcp", wantErr: "names the issuer",
			docs: map[string]string{"/.well-known/oauth-protected-resource/mcp": prm("{base}/mcp"),
				"/.well-known/oauth-authorization-server": strings.ReplaceAll(asDoc, `"issuer":"{base}"`, `"issuer":"https://evil.example"`)}},
		{name: "a server without PKCE S256 is refused", path: "/mcp", wantErr: "PKCE S256",
			docs: map[string]string{"/.well-known/oauth-protected-resource/mcp": prm("{base}/mcp"),
				"/.well-known/oauth-authorization-server": strings.ReplaceAll(asDoc, `["S256"]`, `["plain"]`)}},
		{name: "resource metadata of another resource is refused", path: "/mcp", wantErr: "not",
			docs: map[string]string{"/.well-known/oauth-protected-resource/mcp": prm("https://other.example/mcp"),
				"/.well-known/oauth-authorization-server": asDoc}},
		{name: "resource metadata of a parent (the origin) is the resource", path: "/mcp", resource: "{base}",
			docs: map[string]string{"/.well-known/oauth-protected-resource": prm("{base}"), "/.well-known/oauth-authorization-server": asDoc}},
		{name: "resource metadata of a sibling path is refused", path: "/mcp", wantErr: "not",
			docs: map[string]string{"/.well-known/oauth-protected-resource/mcp": prm("{base}/mcp2"),
				"/.well-known/oauth-authorization-server": asDoc}},
		{name: "2025-03-26: no resource metadata, the origin's metadata", path: "/mcp", legacy: true,
			docs:      map[string]string{"/.well-known/oauth-authorization-server": asDoc},
			wantAsked: []string{"/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource", "/.well-known/oauth-authorization-server"}},
		{name: "2025-03-26: no metadata at all, the default endpoints", path: "/mcp", legacy: true, docs: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := newMetadataServer(t, tt.docs)
			var ch Challenge
			if tt.challenge != "" {
				ch.ResourceMetadata = m.srv.URL + tt.challenge
			}
			d, err := discover(context.Background(), m.srv.Client(), m.srv.URL+tt.path, ch)
			if tt.wantErr != "" {
				if !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want ErrDiscovery saying %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			wantResource := m.srv.URL + tt.path
			if tt.resource != "" {
				wantResource = strings.ReplaceAll(tt.resource, "{base}", m.srv.URL)
			}
			if d.Resource != wantResource || d.AS.TokenEndpoint != strings.TrimSuffix(d.AS.Issuer, "/tenant")+"/token" {
				t.Errorf("discovered %+v", d)
			}
			if (d.PRM == nil) != tt.legacy {
				t.Errorf("PRM %v, legacy %v", d.PRM, tt.legacy)
			}
			if tt.wantAsked != nil {
				got, _ := json.Marshal(m.asked())
				want, _ := json.Marshal(tt.wantAsked)
				if string(got) != string(want) {
					t.Errorf("asked %s, want %s", got, want)
				}
			}
		})
	}
}

func TestParseChallenge(t *testing.T) {
	t.Parallel()
	tests := []struct {
		header string
		want   Challenge
		ok     bool
	}{
		{`Bearer resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", scope="files:read files:write"`,
			Challenge{ResourceMetadata: "https://mcp.example/.well-known/oauth-protected-resource", Scopes: []string{"files:read", "files:write"}}, true},
		{`Bearer error="insufficient_scope", scope="admin", error_description="needs \"admin\""`,
			Challenge{Error: "insufficient_scope", Scopes: []string{"admin"}}, true},
		{`Basic realm="x", Bearer error=invalid_token`, Challenge{Error: "invalid_token"}, true},
		{`bearer`, Challenge{}, true},
		// A server of DPoP-bound tokens challenges with the DPoP scheme (RFC 9449 §7.1).
		{`DPoP resource_metadata="https://mcp.example/.well-known/oauth-protected-resource", algs="ES256"`,
			Challenge{ResourceMetadata: "https://mcp.example/.well-known/oauth-protected-resource"}, true},
		{`DPoP error="use_dpop_nonce"`, Challenge{Error: "use_dpop_nonce"}, true},
		{`Basic realm="dpop"`, Challenge{}, false},
		{`Basic realm="bearer"`, Challenge{}, false},
		{``, Challenge{}, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.header != "" {
			h.Set("WWW-Authenticate", tt.header)
		}
		got, ok := ParseChallenge(h)
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(tt.want)
		if ok != tt.ok || string(g) != string(w) {
			t.Errorf("%q: got %s %v, want %s %v", tt.header, g, ok, w, tt.ok)
		}
	}
}

// A server's WWW-Authenticate is the network's to write: whatever it holds,
// parsing it never panics, and what it finds holds no line breaks.
func FuzzParseChallenge(f *testing.F) {
	for _, seed := range []string{
		`Bearer resource_metadata="https://x/.well-known/oauth-protected-resource", scope="a b"`,
		`Bearer error="insufficient_scope", scope="admin", error_description="needs \"admin\""`,
		`Basic realm="x", Bearer error=invalid_token`, `bearer`, `Bearer "`, `Bearer a="\`, `Bearer ,,,=,"=`,
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h.Set("WWW-Authenticate", v)
		c, _ := ParseChallenge(h)
		for _, s := range append([]string{c.ResourceMetadata, c.Error}, c.Scopes...) {
			if strings.ContainsAny(s, "\r\n") && !strings.ContainsAny(v, "\r\n") {
				t.Fatalf("%q gave %q", v, s)
			}
		}
	})
}
