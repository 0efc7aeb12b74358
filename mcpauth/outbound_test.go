package mcpauth

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow"
)

func TestClassify(t *testing.T) {
	t.Parallel()
	tests := []struct {
		addr string
		want addrClass
	}{
		{"93.184.215.14", addrPublic}, {"2606:4700::1111", addrPublic},
		{"127.0.0.1", addrLoopback}, {"127.9.9.9", addrLoopback}, {"::1", addrLoopback}, {"::ffff:127.0.0.1", addrLoopback},
		{"10.1.2.3", addrPrivate}, {"172.16.0.1", addrPrivate}, {"192.168.1.1", addrPrivate}, {"100.64.0.1", addrPrivate},
		{"fd00::1", addrPrivate}, {"::ffff:10.0.0.1", addrPrivate}, {"64:ff9b::a00:1", addrPrivate},
		{"169.254.169.254", addrNever}, {"fe80::1", addrNever}, {"0.0.0.0", addrNever}, {"::", addrNever},
		{"224.0.0.1", addrNever}, {"ff02::1", addrNever}, {"255.255.255.255", addrNever}, {"240.0.0.1", addrNever},
		{"192.0.2.1", addrNever}, {"2001:db8::1", addrNever}, {"0.1.2.3", addrNever}, {"64:ff9b::a9fe:a9fe", addrNever},
		{"fe80::1%eth0", addrNever}, {"2002:a00:1::1", addrNever},
		// The local-use NAT64 prefix (RFC 8215) is a site's own translator:
		// private whatever it reaches, and in its /96 the IPv4 address in
		// the last 32 bits keeps a refused class (169.254.169.254).
		{"64:ff9b:1::a00:1", addrPrivate}, {"64:ff9b:1::5db8:d70e", addrPrivate}, {"64:ff9b:1:ab::1", addrPrivate},
		{"64:ff9b:1:ffff::a9fe:a9fe", addrPrivate}, {"64:ff9b:1::a9fe:a9fe", addrNever}, {"64:ff9b:1::e000:1", addrNever},
	}
	for _, tt := range tests {
		if got := classify(netip.MustParseAddr(tt.addr)); got != tt.want {
			t.Errorf("classify(%s) = %d, want %d", tt.addr, got, tt.want)
		}
	}
}

// A local-use NAT64 address is refused by default, and with
// AllowPrivateNetworks it reaches no more than the IPv4 address it
// carries would: never the cloud metadata address.
func TestOutboundLocalNAT64(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		addr         string
		allowPrivate bool
		ok           bool
	}{
		{"64:ff9b:1::a00:1", false, false}, {"64:ff9b:1:ab::1", false, false}, {"64:ff9b:1::5db8:d70e", false, false},
		{"64:ff9b:1::a00:1", true, true}, {"64:ff9b:1:ab::1", true, true},
		{"64:ff9b:1::a9fe:a9fe", true, false},
	} {
		p := &outboundPolicy{allowPrivate: tt.allowPrivate}
		if err := p.allowed("mcp.example", netip.MustParseAddr(tt.addr)); (err == nil) != tt.ok {
			t.Errorf("%s (AllowPrivateNetworks %v): %v, want allowed %v", tt.addr, tt.allowPrivate, err, tt.ok)
		}
	}
}

// fakeDNS is a resolver whose answers come from names (name -> IPv4
// address), served over an in-memory connection: the dial check sees what a
// real lookup would give, and no packet leaves the machine.
type fakeDNS struct {
	names   map[string]string
	queries atomic.Int64
}

func (f *fakeDNS) resolver() *net.Resolver {
	return &net.Resolver{PreferGo: true, Dial: func(context.Context, string, string) (net.Conn, error) {
		client, server := net.Pipe()
		go f.serve(server)
		return client, nil
	}}
}

// serve answers the DNS queries on c (TCP framing: a net.Pipe is no
// PacketConn): an A record for a known name, nothing else.
func (f *fakeDNS) serve(c net.Conn) {
	defer c.Close()
	for {
		var n uint16
		if binary.Read(c, binary.BigEndian, &n) != nil {
			return
		}
		q := make([]byte, n)
		if _, err := io.ReadFull(c, q); err != nil || len(q) < 12 {
			return
		}
		f.queries.Add(1)
		end := 12
		var labels []string
		for end < len(q) && q[end] != 0 && end+1+int(q[end]) <= len(q) {
			labels = append(labels, string(q[end+1:end+1+int(q[end])]))
			end += 1 + int(q[end])
		}
		end += 5 // the root label, QTYPE, QCLASS
		if end > len(q) {
			return
		}
		qtype := binary.BigEndian.Uint16(q[end-4:])
		ip, known := f.names[strings.ToLower(strings.Join(labels, "."))]
		resp := append([]byte(nil), q[:end]...)
		resp[2], resp[3] = 0x85, 0x80 // a response, authoritative, recursion desired and available
		binary.BigEndian.PutUint16(resp[6:], 0)
		binary.BigEndian.PutUint16(resp[8:], 0)
		binary.BigEndian.PutUint16(resp[10:], 0)
		if known && qtype == 1 {
			binary.BigEndian.PutUint16(resp[6:], 1)
			a := netip.MustParseAddr(ip).As4()
			resp = append(resp, 0xc0, 0x0c, 0, 1, 0, 1, 0, 0, 0, 60, 0, 4)
			resp = append(resp, a[:]...)
		}
		if binary.Write(c, binary.BigEndian, uint16(len(resp))) != nil {
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
	}
}

// countingServer is an https test server that counts the requests it gets.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var n atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

// As a public name, example.com resolving to 127.0.0.1 is refused when the
// connection is dialed: the URL passes every check a URL can have, and only
// the address reached tells. With AllowPrivateNetworks it connects (and the
// app's TLS settings, the test server's CA, are kept).
func TestOutboundChecksTheDialedAddress(t *testing.T) {
	t.Parallel()
	srv, served := countingServer(t)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "https://"))
	dns := &fakeDNS{names: map[string]string{"example.com": "127.0.0.1"}}
	u := "https://example.com:" + port + "/x"

	// The test server's CA, on a transport with no dialer of its own (the
	// test server's client has one, which sends example.com to the server).
	app := &http.Client{Transport: &http.Transport{TLSClientConfig: srv.Client().Transport.(*http.Transport).TLSClientConfig}}
	refusing := policyClient(app, &outboundPolicy{resolver: dns.resolver()})
	_, err := refusing.Get(u)
	if !errors.Is(err, ErrOutbound) {
		t.Fatalf("GET %s: %v, want ErrOutbound", u, err)
	}
	if dns.queries.Load() == 0 || served.Load() != 0 {
		t.Fatalf("%d DNS queries, %d requests served: want the name looked up and nothing served", dns.queries.Load(), served.Load())
	}

	opted := policyClient(app, &outboundPolicy{resolver: dns.resolver(), allowPrivate: true})
	resp, err := opted.Get(u)
	if err != nil {
		t.Fatalf("with AllowPrivateNetworks: %v", err)
	}
	_ = resp.Body.Close()
	if served.Load() != 1 {
		t.Fatalf("%d requests served, want 1", served.Load())
	}
}

// Addresses a URL names literally, and schemes, are refused before any
// connection; loopback hosts may use plain http.
func TestOutboundURLRules(t *testing.T) {
	t.Parallel()
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(local.Close)
	var dialed atomic.Int64
	base := &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed.Add(1)
		if addr != strings.TrimPrefix(local.URL, "http://") {
			return nil, errors.New("test: only the local server is reachable")
		}
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}}
	c := policyClient(&http.Client{Transport: base}, &outboundPolicy{allowPrivate: true})
	for _, u := range []string{
		"http://example.com/", "ftp://example.com/", "https://169.254.169.254/latest/meta-data/",
		"https://[fe80::1]/", "https://0.0.0.0/", "https://224.0.0.1/", "http://10.0.0.1/",
	} {
		if _, err := c.Get(u); !errors.Is(err, ErrOutbound) {
			t.Errorf("GET %s: %v, want ErrOutbound", u, err)
		}
	}
	if n := dialed.Load(); n != 0 {
		t.Fatalf("%d dials for refused URLs", n)
	}
	resp, err := c.Get(local.URL)
	if err != nil {
		t.Fatalf("plain http to a loopback host: %v", err)
	}
	_ = resp.Body.Close()
	if dialed.Load() != 1 {
		t.Fatalf("the app's own dialer made %d dials, want 1", dialed.Load())
	}
}

// An app's own dialer is kept, and the address it reached is checked
// before anything is sent: a public name it connects to a loopback address
// is refused.
func TestOutboundChecksAnAppsDialer(t *testing.T) {
	t.Parallel()
	srv, served := countingServer(t)
	c := policyClient(srv.Client(), &outboundPolicy{}) // its dialer sends example.com to the test server
	if _, err := c.Get("https://example.com/"); !errors.Is(err, ErrOutbound) {
		t.Fatalf("GET through the app's dialer to a loopback address: %v, want ErrOutbound", err)
	}
	if served.Load() != 0 {
		t.Fatalf("%d requests served", served.Load())
	}
}

// An app's own TLS dialer (mTLS, a mesh), set as DialTLSContext or as the
// legacy DialTLS, is kept for https requests, and the address it reached
// is checked before the request is sent: a public name it connects to a
// loopback address is refused, unless AllowPrivateNetworks.
func TestOutboundChecksAnAppsTLSDialer(t *testing.T) {
	t.Parallel()
	srv, served := countingServer(t)
	tlsConfig := srv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
	tlsConfig.ServerName = "example.com" // in the test server's certificate
	var dialed atomic.Int64
	dialTLS := func(ctx context.Context, network, _ string) (net.Conn, error) {
		dialed.Add(1)
		conn, err := (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
		if err != nil {
			return nil, err
		}
		tc := tls.Client(conn, tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return tc, nil
	}
	for name, app := range map[string]func() *http.Transport{
		"DialTLSContext": func() *http.Transport { return &http.Transport{DialTLSContext: dialTLS} },
		"DialTLS": func() *http.Transport {
			return &http.Transport{DialTLS: func(network, addr string) (net.Conn, error) {
				return dialTLS(context.Background(), network, addr)
			}}
		},
	} {
		before, beforeServed := dialed.Load(), served.Load()
		c := policyClient(&http.Client{Transport: app()}, &outboundPolicy{})
		if _, err := c.Get("https://example.com/"); !errors.Is(err, ErrOutbound) {
			t.Errorf("%s to a loopback address: %v, want ErrOutbound", name, err)
		}
		if dialed.Load() == before || served.Load() != beforeServed {
			t.Errorf("%s: %d dials, %d requests served; want the app's dialer used and nothing served", name, dialed.Load()-before, served.Load()-beforeServed)
		}
		opted := policyClient(&http.Client{Transport: app()}, &outboundPolicy{allowPrivate: true})
		resp, err := opted.Get("https://example.com/")
		if err != nil {
			t.Errorf("%s with AllowPrivateNetworks: %v", name, err)
			continue
		}
		_ = resp.Body.Close()
		if served.Load() != beforeServed+1 {
			t.Errorf("%s with AllowPrivateNetworks: %d requests served, want 1", name, served.Load()-beforeServed)
		}
	}
}

// No redirect is followed: a token request or a metadata fetch redirected
// elsewhere ends at the redirect.
func TestOutboundFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	var reached atomic.Int64
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { reached.Add(1) }))
	t.Cleanup(target.Close)
	redirector := httptest.NewServer(http.RedirectHandler(target.URL+"/elsewhere", http.StatusTemporaryRedirect))
	t.Cleanup(redirector.Close)
	c := outboundClient(Config{})
	req, _ := http.NewRequest(http.MethodPost, redirector.URL+"/token", strings.NewReader("client_secret=s"))
	if _, err := c.Do(req); !errors.Is(err, ErrOutbound) || !strings.Contains(err.Error(), "redirect") {
		t.Fatalf("POST to a redirect: %v, want ErrOutbound naming the redirect", err)
	}
	if reached.Load() != 0 {
		t.Fatalf("the redirect's target was reached %d times", reached.Load())
	}
	if c.Timeout != callTimeout {
		t.Errorf("timeout %v, want %v", c.Timeout, callTimeout)
	}
}

// The proxy an app's transport chooses is the app's own: it is dialed
// whatever its address, while the names it is asked for stay its to
// resolve.
func TestOutboundKeepsTheAppsProxy(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var asked []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		asked = append(asked, r.Method+" "+r.Host)
		mu.Unlock()
		http.Error(w, "no", http.StatusBadGateway)
	}))
	t.Cleanup(proxy.Close)
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(proxy.URL, "http://"))
	proxyURL, _ := url.Parse("http://proxy.corp.example:" + port)
	dns := &fakeDNS{names: map[string]string{"proxy.corp.example": "127.0.0.1"}}
	c := policyClient(&http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(proxyURL)}},
		&outboundPolicy{resolver: dns.resolver()})
	if _, err := c.Get("https://mcp.example/"); err == nil {
		t.Fatal("the proxy refused the tunnel, yet the request succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 1 || asked[0] != "CONNECT mcp.example:443" {
		t.Fatalf("the proxy was asked %q, want one CONNECT mcp.example:443", asked)
	}
}

// A RoundTripper that is no *http.Transport dials as it will; the URL rules
// still hold.
func TestOutboundOtherRoundTripper(t *testing.T) {
	t.Parallel()
	var sent atomic.Int64
	rt := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent.Add(1)
		return &http.Response{StatusCode: http.StatusOK, Body: http.NoBody, Request: r}, nil
	})
	c := policyClient(&http.Client{Transport: rt}, &outboundPolicy{})
	if _, err := c.Get("http://example.com/"); !errors.Is(err, ErrOutbound) {
		t.Fatalf("http to a public name: %v, want ErrOutbound", err)
	}
	if _, err := c.Get("https://10.0.0.1/"); !errors.Is(err, ErrOutbound) {
		t.Fatalf("a literal private address: %v, want ErrOutbound", err)
	}
	resp, err := c.Get("https://example.com/")
	if err != nil || sent.Load() != 1 {
		t.Fatalf("https to a name: %v, %d sent", err, sent.Load())
	}
	_ = resp.Body.Close()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The Connector's own calls are under the policy: an MCP server that is
// example.com to the app but reached at a loopback address is refused,
// unless the app opts in to private networks; the app's client (its TLS
// settings, its dialer) carries the calls either way.
func TestConnectorUsesTheOutboundPolicy(t *testing.T) {
	t.Parallel()
	srv := publicTLSServer(t, map[string]string{
		"/.well-known/oauth-protected-resource/mcp": publicPRM,
		"/.well-known/oauth-authorization-server": `{"issuer":"{base}","authorization_endpoint":"{base}/authorize",
			"token_endpoint":"{base}/token","registration_endpoint":"{base}/register","code_challenge_methods_supported":["S256"]}`,
		"/register": `{"client_id":"c1","token_endpoint_auth_method":"none"}`,
	})
	for _, allow := range []bool{false, true} {
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = m.Close() })
		c, err := New(Config{Module: m, RedirectURL: "http://127.0.0.1:1/cb", HTTPClient: srv.Client(), AllowPrivateNetworks: allow})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Connect(context.Background(), "https://example.com/mcp", Challenge{})
		if allow && err != nil {
			t.Errorf("with AllowPrivateNetworks: %v", err)
		}
		if !allow && !errors.Is(err, ErrOutbound) {
			t.Errorf("without AllowPrivateNetworks: %v, want ErrOutbound", err)
		}
	}
}
