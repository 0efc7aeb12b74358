package mcpauth_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// mixUpServer is a malicious MCP server and its authorization server in
// one. Its metadata advertises no RFC 9207 and names an honest
// authorization server's authorization endpoint as its own, so the user's
// sign-in (our state, our PKCE challenge) happens at the honest server; its
// token endpoint records what it is sent.
type mixUpServer struct {
	srv      *httptest.Server
	mu       sync.Mutex
	received []url.Values // the form of each token request
}

func newMixUpServer(t *testing.T, honestAuthorize string) *mixUpServer {
	m := &mixUpServer{}
	mux := http.NewServeMux()
	m.srv = httptest.NewServer(mux)
	t.Cleanup(m.srv.Close)
	base := func() string { return m.srv.URL }
	mux.HandleFunc("POST /mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+base()+`/.well-known/oauth-protected-resource/mcp"`)
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("GET /.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"resource": base() + "/mcp", "authorization_servers": []string{base()}})
	})
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]any{"issuer": base(), "authorization_endpoint": honestAuthorize,
			"token_endpoint": base() + "/token", "registration_endpoint": base() + "/register",
			"code_challenge_methods_supported": []string{"S256"}, "token_endpoint_auth_methods_supported": []string{"none"}})
	})
	mux.HandleFunc("POST /register", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated) // our client at the honest server, which the attacker knows
		writeJSON(w, map[string]any{"client_id": "client-1", "token_endpoint_auth_method": "none"})
	})
	mux.HandleFunc("POST /token", func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		m.mu.Lock()
		m.received = append(m.received, r.PostForm)
		m.mu.Unlock()
		writeJSON(w, map[string]any{"access_token": "attacker-at", "token_type": "Bearer", "expires_in": 3600})
	})
	return m
}

func (m *mixUpServer) tokenRequests() []url.Values {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]url.Values(nil), m.received...)
}

// The mix-up attack across MCP servers (RFC 9700 §4.4): a malicious server
// whose authorization server advertises nothing forwards the user to an
// honest one, which answers with its own iss. The sign-in recorded the
// issuer it was sent to, so the callback is refused: the honest code and
// the PKCE verifier never reach the attacker's token endpoint, and no token
// is stored.
func TestMixUpAcrossServersIsRefused(t *testing.T) {
	t.Parallel()
	honest := newFakeMCPAuth(t)
	honest.iss = "{base}" // the honest server advertises RFC 9207 and sends its iss
	evil := newMixUpServer(t, honest.srv.URL+"/authorize")
	in := newInstance(t, oauthflow.NewMemoryKV(), http.DefaultClient)
	id, err := in.conn.Connect(context.Background(), evil.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	_, doc, err := in.mod.StartSignIn(context.Background(), "alice", id)
	if err != nil {
		t.Fatal(err)
	}
	query := consent(t, doc.AuthURL) // at the honest server
	if q, _ := url.ParseQuery(query); q.Get("iss") != honest.srv.URL {
		t.Fatalf("the honest server's callback carries iss %q", q.Get("iss"))
	}
	cb, err := http.Get(in.api.URL + oauthflow.CallbackPath + "?" + query)
	if err != nil {
		t.Fatal(err)
	}
	_ = cb.Body.Close()

	for _, form := range evil.tokenRequests() {
		t.Errorf("the attacker's token endpoint received code %q and verifier %q", form.Get("code"), form.Get("code_verifier"))
	}
	if cb.StatusCode == http.StatusOK {
		t.Errorf("the mixed-up callback completed (HTTP %d)", cb.StatusCode)
	}
	if _, err := in.mod.Tokens.GetTokens(context.Background(), "alice", id); err == nil {
		t.Error("a token was stored for the mixed-up sign-in")
	}
}

// A server that advertises RFC 9207 must send iss: a callback without it
// is refused and stores nothing (SEP-2468); one that does not advertise it
// completes without. (Its name runs it with TestIssuerIsChecked.)
func TestIssuerIsCheckedWhenTheCallbackOmitsIt(t *testing.T) {
	t.Parallel()
	for _, advertised := range []bool{true, false} {
		f := newFakeMCPAuth(t)
		if advertised {
			f.iss = "{base}"
		}
		in := newInstance(t, oauthflow.NewMemoryKV(), f.srv.Client())
		id, err := in.conn.Connect(context.Background(), f.srv.URL+"/mcp", mcpauth.Challenge{})
		if err != nil {
			t.Fatal(err)
		}
		_, doc, err := in.mod.StartSignIn(context.Background(), "alice", id)
		if err != nil {
			t.Fatal(err)
		}
		q, _ := url.ParseQuery(consent(t, doc.AuthURL))
		q.Del("iss")
		cb, err := http.Get(in.api.URL + oauthflow.CallbackPath + "?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		_ = cb.Body.Close()
		_, stored := in.mod.Tokens.GetTokens(context.Background(), "alice", id)
		if (cb.StatusCode == http.StatusOK) == advertised || (stored == nil) == advertised {
			t.Errorf("advertised %v, no iss: callback HTTP %d, token %v", advertised, cb.StatusCode, stored)
		}
	}
}
