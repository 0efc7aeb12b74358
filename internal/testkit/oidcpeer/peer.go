// Package oidcpeer runs panva's oidc-provider, an independent and certified
// OpenID Provider written in JavaScript, as a test peer: one Node.js process
// per [Start], on a free loopback port, with automatic login and consent.
// Interop tests use it to prove the wire protocol against an authorization
// server this project did not write.
//
// The pinned setup lives in server/ (package.json, package-lock.json and
// server.mjs). Start installs it with "npm ci" when node_modules is missing.
// Without Node.js, or when the install fails, the test is skipped with the
// reason, except under CI=true, where it fails.
package oidcpeer

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The peer's registered clients. Every client may use the redirect URIs
// http://127.0.0.1{path} and http://localhost{path} on any port, for the paths
// /callback, /api/v1/oauth/callback, /oauth/callback and Options.RedirectPaths.
const (
	BasicClient  = "basic-client" // client_secret_basic
	BasicSecret  = "basic-secret"
	PostClient   = "post-client" // client_secret_post: the secret goes in the form body
	PostSecret   = "post-secret"
	PublicClient = "public-client" // no secret; PKCE required
	// EncClient authenticates with HTTP Basic, and its secret must be
	// form-urlencoded inside the header (RFC 6749 §2.3.1).
	EncClient  = "enc-client"
	EncSecret  = "p@ss:w/rd+ %&="
	DenyClient = "deny-client" // every authorization request is denied
	DenySecret = "deny-secret"
)

// The peer's clients of the device authorization grant (RFC 8628), which
// may use the refresh_token grant too.
const (
	// DeviceBasicClient authenticates with HTTP Basic and is registered for
	// the device grant alone: no redirect URI, no authorization requests.
	DeviceBasicClient = "device-basic-client"
	DeviceBasicSecret = "device-basic-secret"
	// DevicePostClient sends its secret in the form body and may use the
	// authorization code grant too, with the redirect URIs above.
	DevicePostClient = "device-post-client"
	DevicePostSecret = "device-post-secret"
	// DevicePublicClient has no secret and, like DeviceBasicClient, no
	// redirect URI.
	DevicePublicClient = "device-public-client"
)

// Refresh-token rotation policies (Options.RTRotate).
const (
	RotateAlways  = "always"  // every refresh returns a new refresh token (the peer's default)
	RotateNever   = "never"   // refresh never returns a new refresh token
	RotateDefault = "default" // oidc-provider's own policy
)

// PKCE policies (Options.PKCE).
const (
	PKCEOptional = "optional" // required of public clients only, checked whenever sent (the default)
	PKCERequired = "required" // required of every client
)

// Pushed authorization request policies (Options.PAR), RFC 9126.
const (
	// PAROptional takes pushed authorization requests at the peer's PAR
	// endpoint, named in its metadata, and still serves a request in the
	// authorization URL (the default, as oidc-provider 9 does).
	PAROptional = "optional"
	// PARRequired serves only pushed requests, and says so in the metadata
	// (require_pushed_authorization_requests).
	PARRequired = "required"
)

// DPoP policies (Options.DPoP), RFC 9449.
const (
	// DPoPOptional binds a token to the key of the proof its request carried
	// and issues a bearer token to a request without one (the default, as
	// oidc-provider 9 does). The metadata lists ES256 among
	// dpop_signing_alg_values_supported.
	DPoPOptional = "optional"
	// DPoPNonce is DPoPOptional, and every proof must carry a nonce the peer
	// issued: one without is refused with use_dpop_nonce and a DPoP-Nonce
	// header, at the token endpoint (400) and at userinfo (401).
	DPoPNonce = "nonce"
	// DPoPOff turns DPoP off: the metadata lists no algorithm, every token
	// is a bearer token.
	DPoPOff = "off"
)

// Options configure one peer. The zero value is the peer's defaults.
type Options struct {
	ATTTL         time.Duration // access-token lifetime, whole seconds; 0: 5 s
	RTTTL         time.Duration // refresh-token lifetime, whole seconds; 0: 1 h
	RTRotate      string        // RotateAlways, RotateNever, RotateDefault; "": always
	PKCE          string        // PKCEOptional, PKCERequired; "": optional
	RedirectPaths []string      // extra redirect paths, e.g. "/app/callback"
	Registration  bool          // open dynamic client registration (RFC 7591)
	Resources     []string      // extra resource indicators tokens may be issued for (an MCP server's URL)
	DPoP          string        // DPoPOptional, DPoPNonce, DPoPOff; "": optional
	PAR           string        // PAROptional, PARRequired; "": optional
	// UserinfoTokens gives a grant that includes the openid scope access
	// tokens for the peer's userinfo endpoint (Peer.UserinfoURL), which
	// checks them, DPoP binding included, instead of tokens for the
	// resource the grant names (audience-restricted: userinfo refuses them).
	UserinfoTokens bool

	DeviceCodeTTL time.Duration // device code (and user code) lifetime, whole seconds; 0: 10 min
	// DeviceInterval is how far apart, at least, two polls of one device
	// code at the token endpoint must be: the peer answers a sooner one
	// slow_down (RFC 8628 §3.5), whatever the code's state, and names this
	// interval in its device authorization answers. oidc-provider does
	// neither (its answer has no interval, which RFC 8628 §3.2 makes 5 s,
	// and it never sends slow_down); the peer adds both. Whole seconds;
	// 0: 1 s.
	DeviceInterval time.Duration
	// DeviceAnnouncedInterval, when set, is the interval the device
	// authorization answers name instead of DeviceInterval, which the peer
	// still enforces: with a shorter one, a client that waits as long as it
	// was told meets slow_down. Whole seconds.
	DeviceAnnouncedInterval time.Duration

	// FAPI, when FAPI20, runs the peer under the FAPI 2.0 Security Profile
	// with FAPIClient and FAPISecretClient in place of every other client:
	// pushed requests, PKCE and DPoP-bound tokens are required (PAR, PKCE
	// and DPoP may not say otherwise), clients authenticate with
	// private_key_jwt alone, and rich authorization requests of the type
	// PaymentInitiation are granted.
	FAPI string
	// ClientJWKS is FAPIClient's public JWKS (RFC 7517), which a FAPI peer
	// needs: ClientKey.JWKS makes one.
	ClientJWKS string
}

// env returns the peer's settings as environment variables.
func (o Options) env() []string {
	env := []string{"PORT=0"}
	add := func(k, v string) {
		if v != "" {
			env = append(env, k+"="+v)
		}
	}
	add("AT_TTL", seconds(o.ATTTL))
	add("RT_TTL", seconds(o.RTTTL))
	add("RT_ROTATE", o.RTRotate)
	add("PKCE", o.PKCE)
	add("REDIRECT_PATHS", strings.Join(o.RedirectPaths, ","))
	add("RESOURCES", strings.Join(o.Resources, ","))
	add("DPOP", o.DPoP)
	add("PAR", o.PAR)
	add("DEVICE_TTL", seconds(o.DeviceCodeTTL))
	add("DEVICE_INTERVAL", seconds(o.DeviceInterval))
	add("DEVICE_ANNOUNCED_INTERVAL", seconds(o.DeviceAnnouncedInterval))
	add("FAPI", o.FAPI)
	add("FAPI_JWKS", o.ClientJWKS)
	if o.Registration {
		add("REGISTRATION", "open")
	}
	if o.UserinfoTokens {
		add("USERINFO_TOKENS", "1")
	}
	return env
}

// seconds rounds d up to whole seconds; "" for 0.
func seconds(d time.Duration) string {
	if d <= 0 {
		return ""
	}
	return strconv.FormatInt(int64((d+time.Second-1)/time.Second), 10)
}

// settingKeys are the variables Options own; inherited values are dropped so
// the peer runs with exactly the options given.
var settingKeys = []string{"PORT", "AT_TTL", "RT_TTL", "RT_ROTATE", "PKCE", "REDIRECT_PATHS", "RESOURCES", "REGISTRATION",
	"DPOP", "PAR", "USERINFO_TOKENS", "DEVICE_TTL", "DEVICE_INTERVAL", "DEVICE_ANNOUNCED_INTERVAL", "FAPI", "FAPI_JWKS"}

func childEnv(o Options) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if !slices.Contains(settingKeys, k) {
			env = append(env, kv)
		}
	}
	return append(env, o.env()...)
}

// StartTimeout bounds how long Start waits for the peer's READY line.
const StartTimeout = 20 * time.Second

// Peer is one running oidc-provider process.
type Peer struct {
	issuer string
	out    *syncBuffer
}

// Start runs a peer for the test and stops it (its whole process group) when
// the test ends. The peer's output is logged if the test failed. Start skips
// the test when Node.js or the peer's npm packages are unavailable, except
// under CI=true, where it fails.
func Start(t testing.TB, opts Options) *Peer {
	t.Helper()
	dir := ensureInstalled(t)
	out := &syncBuffer{}
	ready := &readyWriter{out: out, ready: make(chan string, 1)}
	cmd := exec.Command("node", "server.mjs")
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, childEnv(opts), ready, out
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatalf("oidcpeer: starting node server.mjs in %s: %v", dir, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		killGroup(cmd)
		<-exited
		if t.Failed() {
			t.Logf("oidcpeer: output of the peer:\n%s", out)
		}
	})
	p := &Peer{out: out}
	select {
	case p.issuer = <-ready.ready:
		return p
	case err := <-exited:
		t.Fatalf("oidcpeer: the peer exited before it was ready (%v); output:\n%s", err, out)
	case <-time.After(StartTimeout):
		t.Fatalf("oidcpeer: no READY line from the peer within %v; output:\n%s", StartTimeout, out)
	}
	return nil
}

// Issuer returns the peer's issuer, "http://127.0.0.1:PORT", which is also
// the base of every endpoint.
func (p *Peer) Issuer() string { return p.issuer }

// UserinfoURL returns the peer's userinfo endpoint, the one resource it
// protects itself: it answers 200 to an access token of a grant with openid
// (see Options.UserinfoTokens), sent with a proof of its key when bound.
func (p *Peer) UserinfoURL() string { return p.issuer + "/me" }

// Output returns what the peer has printed so far (its log says why a token
// request failed; the HTTP answer is deliberately terse).
func (p *Peer) Output() string { return p.out.String() }

// syncBuffer is a bytes.Buffer safe for the process's two output copiers and
// the test reading it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// readyWriter copies stdout into out and reports the issuer from the first
// "READY <issuer>" line.
type readyWriter struct {
	out     *syncBuffer
	ready   chan string
	partial []byte
	done    bool
}

func (w *readyWriter) Write(p []byte) (int, error) {
	n, err := w.out.Write(p)
	if w.done {
		return n, err
	}
	w.partial = append(w.partial, p...)
	sc := bufio.NewScanner(bytes.NewReader(w.partial))
	for sc.Scan() {
		if issuer, ok := strings.CutPrefix(sc.Text(), "READY "); ok {
			w.done, w.partial = true, nil
			w.ready <- strings.TrimSpace(issuer)
			return n, err
		}
	}
	if i := bytes.LastIndexByte(w.partial, '\n'); i >= 0 {
		w.partial = w.partial[i+1:]
	}
	return n, err
}

// unavailable skips the test with reason, or fails it under CI=true, where
// the peer is required.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	reason := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("oidcpeer: the interop peer is required under CI=true: %s", reason)
	}
	t.Skipf("oidcpeer: skipping the interop test: %s", reason)
}
