package mcpauth

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The outbound policy: every request mcpauth makes on its own (discovery,
// registration, the providers' token and revocation calls, the client
// credentials and cross-app grants) goes through one *http.Client built
// here, because every URL it fetches was named by a server, which is
// untrusted input:
//   - https only; plain http only to a loopback host (localhost, 127.0.0.0/8,
//     ::1), for local development;
//   - no redirect is followed (a redirect would take a credential, or
//     discovery, somewhere nobody checked);
//   - no connection to a loopback, private, link-local, unspecified,
//     multicast or otherwise non-public address, checked on the address
//     actually dialed, so that DNS rebinding cannot get round it. A loopback
//     address is allowed when the URL names a loopback host; a public name
//     that resolves to one is refused. Config.AllowPrivateNetworks opens
//     private and loopback addresses for internal deployments; link-local
//     (the cloud metadata address 169.254.169.254), multicast and reserved
//     ones stay refused;
//   - a deadline on every call (the app client's Timeout, else 30 s).
// Bodies are read through io.LimitReader by each reader. The app's
// Config.HTTPClient is kept: an *http.Transport is cloned (TLS, proxy and
// the rest kept) and given the dial check; any other RoundTripper resolves
// and dials as it will, so then only the URL rules and literal addresses are
// enforced here, and its own egress rules must do the rest. Behind a proxy
// the proxy resolves the names, likewise.

// ErrOutbound means the outbound policy refused a request: a URL that is
// not https (or http to a loopback host), an address that is not public, or
// a redirect.
var ErrOutbound = errors.New("mcpauth: outbound request refused")

// callTimeout is the deadline of an outbound call when the app's client sets none.
const callTimeout = 30 * time.Second

// outboundPolicy decides which URLs and addresses an outbound request may reach.
type outboundPolicy struct {
	allowPrivate bool          // Config.AllowPrivateNetworks
	resolver     *net.Resolver // nil: the default; tests give their own
	proxies      sync.Map      // host:port of each proxy the transport chose: the app's own, dialed as they are
}

// outboundClient is the client of every outbound call of a Connector: the
// app's Config.HTTPClient under the outbound policy.
func outboundClient(cfg Config) *http.Client {
	return policyClient(cfg.HTTPClient, &outboundPolicy{allowPrivate: cfg.AllowPrivateNetworks})
}

// appClient is the client for the endpoints the app itself configured
// (Config.CrossApp's identity provider, which may well be internal): the
// same rules, except that private and loopback addresses are allowed.
func appClient(cfg Config) *http.Client {
	return policyClient(cfg.HTTPClient, &outboundPolicy{allowPrivate: true})
}

// policyClient wraps base (nil: a default client) in p: its transport
// checks each URL and dialed address, it follows no redirect, and it has a
// deadline.
func policyClient(base *http.Client, p *outboundPolicy) *http.Client {
	var c http.Client
	if base != nil {
		c = *base
	}
	if c.Timeout <= 0 {
		c.Timeout = callTimeout
	}
	c.Transport = &policyTransport{base: p.transport(c.Transport), p: p}
	c.CheckRedirect = refuseRedirect
	return &c
}

// refuseRedirect follows no redirect: the 3xx is an error naming where it led.
func refuseRedirect(req *http.Request, _ []*http.Request) error {
	return fmt.Errorf("%w: a redirect to %s is not followed", ErrOutbound, req.URL.Redacted())
}

// policyTransport checks each request's URL before base sends it.
type policyTransport struct {
	base http.RoundTripper
	p    *outboundPolicy
}

func (t *policyTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.p.checkURL(req.URL); err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	return t.base.RoundTrip(req)
}

// checkURL refuses a URL that is neither https nor http to a loopback host,
// and one whose host is a literal address the policy refuses (checked here
// too, for transports that dial on their own and for proxies).
func (p *outboundPolicy) checkURL(u *url.URL) error {
	host := u.Hostname()
	if host == "" || (u.Scheme != "https" && !(u.Scheme == "http" && loopbackHost(host))) {
		return fmt.Errorf("%w: %s is not an https URL (plain http is for loopback hosts only)", ErrOutbound, u.Redacted())
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return p.allowed(host, ip)
	}
	return nil
}

// loopbackHost reports whether host (a URL's host, no port) names this
// machine: localhost, a name under .localhost (RFC 6761), or a loopback address.
func loopbackHost(host string) bool {
	h := strings.TrimSuffix(strings.ToLower(host), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip, err := netip.ParseAddr(h)
	return err == nil && ip.Unmap().IsLoopback()
}

// allowed decides whether a connection for a URL whose host is host may go
// to ip.
func (p *outboundPolicy) allowed(host string, ip netip.Addr) error {
	switch classify(ip) {
	case addrPublic:
		return nil
	case addrLoopback:
		if loopbackHost(host) || p.allowPrivate {
			return nil
		}
	case addrPrivate:
		if p.allowPrivate {
			return nil
		}
	}
	return fmt.Errorf("%w: %s resolves to %s, which is not a public address (Config.AllowPrivateNetworks opens private networks)",
		ErrOutbound, host, ip)
}

// transport is rt (nil: http.DefaultTransport) with the dial check, when
// it is an *http.Transport; any other RoundTripper is kept as it is.
func (p *outboundPolicy) transport(rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	t, ok := rt.(*http.Transport)
	if !ok {
		return rt
	}
	own := t == http.DefaultTransport
	t = t.Clone()
	if own {
		t.DialContext = nil // the default dialer, replaced by the checked one below
	}
	p.watchProxy(t)
	switch {
	case t.DialContext != nil:
		t.DialContext = p.checkedAfter(t.DialContext)
	case t.Dial != nil: // an app's transport may still set the old field
		old := t.Dial
		t.DialContext = p.checkedAfter(func(_ context.Context, network, addr string) (net.Conn, error) { return old(network, addr) })
		t.Dial = nil
	default:
		t.DialContext = p.dial
	}
	switch {
	case t.DialTLSContext != nil:
		t.DialTLSContext = p.checkedAfter(t.DialTLSContext)
	case t.DialTLS != nil:
		old := t.DialTLS
		t.DialTLSContext = p.checkedAfter(func(_ context.Context, network, addr string) (net.Conn, error) { return old(network, addr) })
		t.DialTLS = nil
	}
	return t
}

// dial connects to addr, checking the address before the connection is
// made (net.Dialer's ControlContext runs for each address the name resolved
// to, just before its connect).
func (p *outboundPolicy) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: callTimeout, KeepAlive: 30 * time.Second, Resolver: p.resolver}
	if _, proxy := p.proxies.Load(addr); !proxy {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrOutbound, err)
		}
		d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: %w", ErrOutbound, err)
			}
			return p.allowed(host, ap.Addr())
		}
	}
	return d.DialContext(ctx, network, addr)
}

// checkedAfter wraps an app's own dialer: the address it connected to is
// checked before anything is sent on the connection.
func (p *outboundPolicy) checkedAfter(dial func(context.Context, string, string) (net.Conn, error)) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if _, proxy := p.proxies.Load(addr); proxy {
			return conn, nil
		}
		if err := p.checkConn(addr, conn); err != nil {
			_ = conn.Close()
			return nil, err
		}
		return conn, nil
	}
}

// checkConn checks the address conn reached for a dial of addr.
func (p *outboundPolicy) checkConn(addr string, conn net.Conn) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrOutbound, err)
	}
	ap, err := netip.ParseAddrPort(conn.RemoteAddr().String())
	if err != nil {
		return fmt.Errorf("%w: the connection to %s reached %s", ErrOutbound, addr, conn.RemoteAddr())
	}
	return p.allowed(host, ap.Addr())
}

// watchProxy records the address of each proxy t's Proxy function chooses:
// the app configured it, so it is dialed whatever its address.
func (p *outboundPolicy) watchProxy(t *http.Transport) {
	choose := t.Proxy
	if choose == nil {
		return
	}
	t.Proxy = func(req *http.Request) (*url.URL, error) {
		u, err := choose(req)
		if err == nil && u != nil {
			p.proxies.Store(proxyAddr(u), true)
		}
		return u, err
	}
}

// proxyAddr is the host:port a transport dials for the proxy u.
func proxyAddr(u *url.URL) string {
	port := u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443", "socks5": "1080", "socks5h": "1080"}[u.Scheme]
	}
	return net.JoinHostPort(u.Hostname(), port)
}
