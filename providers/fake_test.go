package providers

import (
	"encoding/base64"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// reply is what the fake provider answers.
type reply struct {
	status int
	ctype  string
	body   string
}

func jsonReply(status int, body string) reply {
	return reply{status: status, ctype: "application/json", body: body}
}

// request is what the fake provider saw.
type request struct {
	path   string
	ctype  string
	auth   string // raw Authorization header
	accept string
	body   string
	form   url.Values
	user   string // Basic user, form-unescaped
	secret string // Basic password, form-unescaped
}

// fake is an httptest token/revocation endpoint that answers one reply to
// every request and keeps the requests.
type fake struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []request
}

func newFake(t *testing.T, r reply) *fake {
	t.Helper()
	f := &fake{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		f.record(t, req)
		if r.ctype != "" {
			w.Header().Set("Content-Type", r.ctype)
		}
		w.WriteHeader(r.status)
		io.WriteString(w, r.body)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fake) record(t *testing.T, req *http.Request) {
	raw, _ := io.ReadAll(req.Body)
	rq := request{path: req.URL.Path, ctype: req.Header.Get("Content-Type"), auth: req.Header.Get("Authorization"),
		accept: req.Header.Get("Accept"), body: string(raw)}
	rq.form, _ = url.ParseQuery(string(raw))
	if enc, ok := strings.CutPrefix(rq.auth, "Basic "); ok {
		dec, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Errorf("bad Basic header %q", rq.auth)
		}
		u, p, _ := strings.Cut(string(dec), ":")
		rq.user, _ = url.QueryUnescape(u)
		rq.secret, _ = url.QueryUnescape(p)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen = append(f.seen, rq)
}

func (f *fake) last(t *testing.T) request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.seen) == 0 {
		t.Fatal("the fake provider saw no request")
	}
	return f.seen[len(f.seen)-1]
}

// calls is how many requests the fake provider has seen.
func (f *fake) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seen)
}

var testCreds = Credentials{ClientID: "client-1", ClientSecret: "secret-1", RedirectURL: "https://app.example/cb"}

// generic returns a plain provider whose endpoints are the fake's.
func (f *fake) generic(t *testing.T, mod func(*Config)) *OAuth2 {
	t.Helper()
	cfg := Config{ID: "fake", AuthURL: f.srv.URL + "/authorize", TokenURL: f.srv.URL + "/token", RevocationURL: f.srv.URL + "/revoke", AuthStyle: AuthStyleParams}
	if mod != nil {
		mod(&cfg)
	}
	p, err := NewOAuth2(cfg, testCreds, WithHTTPClient(f.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// catalog returns catalog provider id, quirks intact, with its endpoints moved to the fake.
func (f *fake) catalog(t *testing.T, id string, c Credentials) *OAuth2 {
	t.Helper()
	e, err := lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := e.resolve(c.Params)
	if err != nil {
		t.Fatal(err)
	}
	cfg.TokenURL = f.srv.URL + "/token"
	if cfg.RefreshURL != "" {
		cfg.RefreshURL = f.srv.URL + "/refresh"
	}
	if cfg.RevocationURL != "" {
		cfg.RevocationURL = f.srv.URL + "/revoke"
	}
	if cfg.DeviceAuthURL != "" {
		cfg.DeviceAuthURL = f.srv.URL + "/device"
	}
	if cfg.UserinfoURL != "" {
		cfg.UserinfoURL = f.srv.URL + "/userinfo"
	}
	p, err := NewOAuth2(cfg, c, WithHTTPClient(f.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
