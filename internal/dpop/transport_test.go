package dpop_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/dpop"
)

var testNow = time.Unix(1_700_000_000, 0)

// hit is what one request brought to a peer.
type hit struct {
	method, path, dpop, authorization, body string
	nonce                                   any // the proof's nonce claim, nil when it has none
	err                                     error
}

// peer is an httptest server on loopback that records each request, checks
// its proof as the server would, and lets a test decide the answer.
type peer struct {
	*httptest.Server
	t      *testing.T
	token  string // the access token requests must carry, or ""
	answer func(p *peer, w http.ResponseWriter, h hit)

	mu    sync.Mutex
	hits  []hit
	nonce string // the nonce proofs must carry, or ""
}

func newPeer(t *testing.T, token string, answer func(p *peer, w http.ResponseWriter, h hit)) *peer {
	p := &peer{t: t, token: token, answer: answer}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *peer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h := hit{method: r.Method, path: r.URL.Path, dpop: r.Header.Get("DPoP"), authorization: r.Header.Get("Authorization"), body: string(body)}
	p.mu.Lock()
	nonce := p.nonce
	p.mu.Unlock()
	if h.dpop != "" {
		_, claims, _ := decodeProof(p.t, h.dpop)
		h.nonce = claims["nonce"]
		_, h.err = dpop.Verify(h.dpop, r.Method, p.URL+r.URL.RequestURI(), testNow, time.Minute, p.token, nonce)
	}
	p.mu.Lock()
	p.hits = append(p.hits, h)
	p.mu.Unlock()
	p.answer(p, w, h)
}

func (p *peer) seen() []hit {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]hit(nil), p.hits...)
}

func (p *peer) requireNonce(n string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.nonce = n
}

// ok answers 200 to any request.
func ok(_ *peer, w http.ResponseWriter, _ hit) { io.WriteString(w, "ok") }

// nonceAnswer answers as an authorization server (kind "as") or a resource
// server (kind "rs") that wants a nonce: a proof without the current one
// gets a use_dpop_nonce challenge with the next nonce. rotate decides
// whether each challenge also changes the nonce wanted, so that the
// client can never satisfy it.
func nonceAnswer(kind string, rotate bool) func(p *peer, w http.ResponseWriter, h hit) {
	var issued int
	return func(p *peer, w http.ResponseWriter, h hit) {
		if errors.Is(h.err, dpop.ErrUseNonce) || rotate {
			issued++
			next := fmt.Sprintf("n-%d", issued)
			p.requireNonce(next)
			w.Header().Set("DPoP-Nonce", next)
			if kind == "as" {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				io.WriteString(w, `{"error":"use_dpop_nonce"}`)
				return
			}
			w.Header().Set("WWW-Authenticate", `DPoP algs="ES256", error="use_dpop_nonce"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		if h.err != nil {
			http.Error(w, h.err.Error(), http.StatusForbidden)
			return
		}
		io.WriteString(w, "ok")
	}
}

func newTransport(t *testing.T, origin string, token string) *dpop.Transport {
	t.Helper()
	k, err := dpop.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	tr := &dpop.Transport{Key: k, Nonces: &dpop.Nonces{}, Origin: mustURL(t, origin), Now: func() time.Time { return testNow }}
	if token != "" {
		tr.AccessToken = func(*http.Request) (string, error) { return token, nil }
	}
	return tr
}

func roundTrip(t *testing.T, tr http.RoundTripper, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

func newRequest(t *testing.T, method, target, body string) *http.Request {
	t.Helper()
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, target, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestTransportSignsSameOriginOnly(t *testing.T) {
	t.Parallel()
	mine, other := newPeer(t, "tok", ok), newPeer(t, "", ok)
	tr := newTransport(t, mine.URL, "tok")

	roundTrip(t, tr, newRequest(t, "GET", mine.URL+"/mcp?session=1", ""))
	roundTrip(t, tr, newRequest(t, "GET", other.URL+"/mcp", "")) // same host, another port
	// The same server under another name is another origin.
	roundTrip(t, tr, newRequest(t, "GET", strings.Replace(mine.URL, "127.0.0.1", "localhost", 1)+"/mcp", ""))

	got := mine.seen()
	if len(got) != 2 || got[0].err != nil || got[0].authorization != "DPoP tok" {
		t.Fatalf("own origin saw %+v; want a request with a valid proof and Authorization: DPoP tok, then another", got)
	}
	if got[1].dpop != "" || got[1].authorization != "" {
		t.Fatalf("own server under another name saw DPoP %q and Authorization %q", got[1].dpop, got[1].authorization)
	}
	if h := other.seen(); len(h) != 1 || h[0].dpop != "" || h[0].authorization != "" {
		t.Fatalf("another origin saw %+v; want one request with neither DPoP nor Authorization", h)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

func TestTransportOrigin(t *testing.T) {
	t.Parallel()
	var sent *http.Request
	tr := newTransport(t, "https://as.example", "tok")
	tr.Base = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		sent = req
		return &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}, nil
	})
	for target, signed := range map[string]bool{
		"https://as.example/token":        true,
		"https://AS.Example:443/token?x":  true,
		"http://as.example/token":         false,
		"https://as.example:8443/token":   false,
		"https://as.example.evil/token":   false,
		"https://evil.example/as.example": false,
		"https://sub.as.example/token":    false,
	} {
		if _, err := tr.RoundTrip(newRequest(t, "GET", target, "")); err != nil {
			t.Fatal(err)
		}
		if got := sent.Header.Get("DPoP") != "" || sent.Header.Get("Authorization") != ""; got != signed {
			t.Errorf("%s: DPoP %q, Authorization %q; want signed %v", target, sent.Header.Get("DPoP"), sent.Header.Get("Authorization"), signed)
		}
	}
}

// TestTransportRedirectElsewhereCarriesNothing: a client following a
// redirect from the signed origin to another sends no proof and no token
// there; a redirect within the origin gets a proof of its own.
func TestTransportRedirectElsewhereCarriesNothing(t *testing.T) {
	t.Parallel()
	elsewhere := newPeer(t, "", ok)
	mine := newPeer(t, "tok", func(p *peer, w http.ResponseWriter, h hit) {
		switch h.path {
		case "/away":
			w.Header().Set("Location", elsewhere.URL+"/landed")
			w.WriteHeader(http.StatusFound)
		case "/here":
			w.Header().Set("Location", p.URL+"/moved")
			w.WriteHeader(http.StatusTemporaryRedirect)
		default:
			io.WriteString(w, "ok")
		}
	})
	client := &http.Client{Transport: newTransport(t, mine.URL, "tok")}
	for _, path := range []string{"/away", "/here"} {
		resp, err := client.Get(mine.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	landed := elsewhere.seen()
	if len(landed) != 1 || landed[0].dpop != "" || landed[0].authorization != "" {
		t.Fatalf("the other origin saw %+v; want one request with neither DPoP nor Authorization", landed)
	}
	got := mine.seen()
	if len(got) != 3 || got[2].path != "/moved" || got[2].err != nil || got[2].dpop == got[1].dpop {
		t.Fatalf("own origin saw %+v; want /away, /here, /moved each with a valid proof of its own", got)
	}
}

// TestTransportRetriesOnceOnChallenge: for each kind of nonce challenge, the
// request is sent again once, body and all, with the nonce; the nonce a
// later answer brings is used by the next request from the start.
func TestTransportRetriesOnceOnChallenge(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ kind, token, method string }{
		{"as", "", "POST"},   // a token request: 400 and a JSON error
		{"rs", "tok", "PUT"}, // a resource request: 401 and WWW-Authenticate
	} {
		t.Run(tc.kind, func(t *testing.T) {
			t.Parallel()
			p := newPeer(t, tc.token, nonceAnswer(tc.kind, false))
			p.requireNonce("n-0")
			tr := newTransport(t, p.URL, tc.token)
			req := newRequest(t, tc.method, p.URL+"/token", "grant_type=authorization_code&code=c")
			before := req.Header.Clone()

			resp, body := roundTrip(t, tr, req)
			if resp.StatusCode != 200 || body != "ok" {
				t.Fatalf("answer %d %q, want 200 ok", resp.StatusCode, body)
			}
			got := p.seen()
			if len(got) != 2 || got[0].nonce != nil || got[1].nonce != "n-1" || got[1].err != nil {
				t.Fatalf("server saw %+v; want a proof without a nonce, then a valid one with n-1", got)
			}
			for _, h := range got {
				if h.body != "grant_type=authorization_code&code=c" || h.method != tc.method {
					t.Fatalf("a request came as %s %q, want the caller's method and whole body", h.method, h.body)
				}
			}
			if len(req.Header) != len(before) || req.Header.Get("DPoP") != "" || req.Header.Get("Authorization") != "" {
				t.Fatalf("the caller's request was changed: %v", req.Header)
			}

			// The nonce of the challenge is the one remembered, and the next
			// request uses it at once.
			roundTrip(t, tr, newRequest(t, tc.method, p.URL+"/token", "again"))
			if got := p.seen(); len(got) != 3 || got[2].nonce != "n-1" || got[2].err != nil {
				t.Fatalf("the next request came as %+v; want it with n-1 and no challenge", got[2:])
			}
		})
	}
}

// TestTransportRemembersNonceOfSuccess: a nonce sent with a success is used
// by the next request.
func TestTransportRemembersNonceOfSuccess(t *testing.T) {
	t.Parallel()
	p := newPeer(t, "", func(p *peer, w http.ResponseWriter, h hit) {
		w.Header().Set("DPoP-Nonce", fmt.Sprintf("n-%d", len(p.seen())))
		io.WriteString(w, "ok")
	})
	tr := newTransport(t, p.URL, "")
	for range 3 {
		roundTrip(t, tr, newRequest(t, "GET", p.URL+"/", ""))
	}
	got := p.seen()
	if len(got) != 3 || got[0].nonce != nil || got[1].nonce != "n-1" || got[2].nonce != "n-2" {
		t.Fatalf("server saw %+v; want no nonce, then n-1, then n-2", got)
	}
}

func TestTransportDoesNotRetryTwice(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"as", "rs"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			p := newPeer(t, "", nonceAnswer(kind, true))
			tr := newTransport(t, p.URL, "")
			resp, body := roundTrip(t, tr, newRequest(t, "POST", p.URL+"/token", "x=1"))
			if n := len(p.seen()); n != 2 {
				t.Fatalf("server saw %d requests, want 2", n)
			}
			if resp.StatusCode != 400 && resp.StatusCode != 401 {
				t.Fatalf("answer %d, want the second challenge", resp.StatusCode)
			}
			if kind == "as" && body != `{"error":"use_dpop_nonce"}` {
				t.Fatalf("the second challenge's body is %q, want it whole", body)
			}
			if got := tr.Nonces.Get(mustURL(t, p.URL)); got != "n-2" {
				t.Fatalf("remembered %q, want the last challenge's n-2", got)
			}
		})
	}
}

// TestTransportBodyNotReplayable: a challenge to a request whose body cannot
// be read again is the answer, and its nonce is remembered.
func TestTransportBodyNotReplayable(t *testing.T) {
	t.Parallel()
	p := newPeer(t, "", nonceAnswer("as", false))
	p.requireNonce("n-0")
	tr := newTransport(t, p.URL, "")
	req := newRequest(t, "POST", p.URL+"/token", "")
	req.Body = io.NopCloser(strings.NewReader("x=1")) // no GetBody
	resp, body := roundTrip(t, tr, req)
	if resp.StatusCode != 400 || body != `{"error":"use_dpop_nonce"}` || len(p.seen()) != 1 {
		t.Fatalf("answer %d %q after %d requests; want the challenge after one", resp.StatusCode, body, len(p.seen()))
	}
	if got := tr.Nonces.Get(req.URL); got != "n-1" {
		t.Fatalf("remembered %q, want n-1", got)
	}
}

// closeRecorder wraps a RoundTripper and records whether each response's
// body was closed.
type closeRecorder struct {
	base   http.RoundTripper
	mu     sync.Mutex
	bodies []*trackedBody
}

type trackedBody struct {
	io.ReadCloser
	mu     sync.Mutex
	closed bool
}

func (b *trackedBody) Close() error {
	b.mu.Lock()
	b.closed = true
	b.mu.Unlock()
	return b.ReadCloser.Close()
}

func (b *trackedBody) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

func (c *closeRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := c.base.RoundTrip(req)
	if err == nil {
		body := &trackedBody{ReadCloser: resp.Body}
		resp.Body = body
		c.mu.Lock()
		c.bodies = append(c.bodies, body)
		c.mu.Unlock()
	}
	return resp, err
}

func TestTransportClosesTheChallenge(t *testing.T) {
	t.Parallel()
	p := newPeer(t, "tok", nonceAnswer("rs", false))
	p.requireNonce("n-0")
	rec := &closeRecorder{base: http.DefaultTransport}
	tr := newTransport(t, p.URL, "tok")
	tr.Base = rec
	resp, err := tr.RoundTrip(newRequest(t, "GET", p.URL+"/mcp", ""))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if len(rec.bodies) != 2 || !rec.bodies[0].isClosed() || rec.bodies[1].isClosed() {
		t.Fatalf("%d answers; want 2, the challenge closed and the answer left open for the caller", len(rec.bodies))
	}
}

// TestTransportBindsTheCallersToken: without AccessToken, a DPoP token the
// request carries (as x/oauth2's Transport sets it) is bound by the proof.
func TestTransportBindsTheCallersToken(t *testing.T) {
	t.Parallel()
	p := newPeer(t, "tok", ok)
	tr := newTransport(t, p.URL, "")
	req := newRequest(t, "GET", p.URL+"/mcp", "")
	req.Header.Set("Authorization", "DPoP tok")
	roundTrip(t, tr, req)
	if got := p.seen(); len(got) != 1 || got[0].err != nil || got[0].authorization != "DPoP tok" {
		t.Fatalf("server saw %+v; want a proof bound to tok", got)
	}
}

type closeCounter struct {
	io.Reader
	closed int
}

func (c *closeCounter) Close() error { c.closed++; return nil }

func TestTransportRefusesUnsent(t *testing.T) {
	t.Parallel()
	p := newPeer(t, "", ok)
	failing := newTransport(t, p.URL, "")
	failing.AccessToken = func(*http.Request) (string, error) { return "", errors.New("store down") }
	noKey := newTransport(t, p.URL, "")
	noKey.Key = nil
	noOrigin := newTransport(t, p.URL, "")
	noOrigin.Origin = nil
	for name, tr := range map[string]*dpop.Transport{"token error": failing, "no key": noKey, "no origin": noOrigin} {
		body := &closeCounter{Reader: strings.NewReader("x=1")}
		req := newRequest(t, "POST", p.URL+"/token", "")
		req.Body = body
		resp, err := tr.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
			t.Errorf("%s: RoundTrip succeeded", name)
		}
		if name == "token error" && (err == nil || !strings.Contains(err.Error(), "store down")) {
			t.Errorf("%s: RoundTrip = %v, want the token's error", name, err)
		}
		if body.closed != 1 {
			t.Errorf("%s: request body closed %d times, want 1", name, body.closed)
		}
	}
	if n := len(p.seen()); n != 0 {
		t.Fatalf("server saw %d requests, want none", n)
	}
}

// TestTransportReplaysTheBody: the retry's body comes from GetBody, whatever
// the Base does with the first one.
func TestTransportReplaysTheBody(t *testing.T) {
	t.Parallel()
	var bodies []string
	tr := newTransport(t, "https://as.example", "")
	tr.Base = roundTripFunc(func(req *http.Request) (*http.Response, error) {
		b, _ := io.ReadAll(req.Body)
		req.Body.Close()
		bodies = append(bodies, string(b))
		resp := &http.Response{StatusCode: 200, Header: http.Header{}, Body: http.NoBody}
		if len(bodies) == 1 {
			resp.StatusCode = 400
			resp.Header.Set("DPoP-Nonce", "n-1")
			resp.Body = io.NopCloser(strings.NewReader(`{"error":"use_dpop_nonce"}`))
		}
		return resp, nil
	})
	resp, err := tr.RoundTrip(newRequest(t, "POST", "https://as.example/token", "code=c"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || len(bodies) != 2 || bodies[0] != "code=c" || bodies[1] != "code=c" {
		t.Fatalf("answer %d after bodies %q; want 200 after code=c twice", resp.StatusCode, bodies)
	}
}
