package providers_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

// jwtClient is the client the fake provider knows by its public key alone.
const jwtClient = "jwt-app"

// jwtEnv is the fake provider with a client that authenticates with
// private_key_jwt, behind a recorder of every POST it is sent.
type jwtEnv struct {
	as  *authserver.Server
	key crypto.Signer

	mu   sync.Mutex
	seen []sentForm
}

// sentForm is a POST the fake provider received.
type sentForm struct {
	path, authorization string
	form                url.Values
}

// newJWTEnv starts the fake provider with opts and a client whose public
// key is key's.
func newJWTEnv(t *testing.T, opts authserver.Options, key crypto.Signer) *jwtEnv {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	opts.Issuer = "http://" + ts.Listener.Addr().String()
	opts.Clients = []authserver.Client{{ID: jwtClient, PublicKey: key.Public(), AnyLoopbackRedirect: true}}
	env := &jwtEnv{as: authserver.New(opts), key: key}
	ts.Config.Handler = http.HandlerFunc(env.record)
	ts.Start()
	t.Cleanup(ts.Close)
	t.Cleanup(env.as.Close)
	return env
}

// record keeps the form and the Authorization header of a POST and passes
// the request on to the fake provider.
func (e *jwtEnv) record(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodPost {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		e.mu.Lock()
		e.seen = append(e.seen, sentForm{path: r.URL.Path, authorization: r.Header.Get("Authorization"), form: form})
		e.mu.Unlock()
	}
	e.as.ServeHTTP(w, r)
}

func (e *jwtEnv) sent() []sentForm {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]sentForm(nil), e.seen...)
}

// config describes the fake provider: every endpoint that authenticates
// the client, its issuer, PAR and DPoP as its options say.
func (e *jwtEnv) config(opts authserver.Options) providers.Config {
	cfg := providers.Config{ID: "jwt", AuthURL: e.as.AuthURL(), TokenURL: e.as.TokenURL(), RevocationURL: e.as.RevokeURL(),
		DeviceAuthURL: e.as.DeviceAuthorizationURL(), Issuer: e.as.URL(), Scopes: []string{"read"},
		IssOptional: !opts.IssParameter, AuthStyle: providers.AuthStyleHeader, DPoP: opts.DPoP || opts.DPoPNonces}
	if opts.PAR || opts.RequirePAR {
		cfg.PushedAuthURL, cfg.RequirePAR = e.as.PARURL(), opts.RequirePAR
	}
	return cfg
}

// provider builds the client of the fake provider, which signs with key.
func (e *jwtEnv) provider(t *testing.T, cfg providers.Config, key crypto.Signer, alg, redirectURL string, opts ...providers.Option) *providers.OAuth2 {
	t.Helper()
	p, err := providers.NewOAuth2(cfg, providers.Credentials{ClientID: jwtClient, RedirectURL: redirectURL,
		SigningKey: key, KeyID: "key-1", SigningAlg: alg}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkSent checks every POST the fake provider received: the client
// authenticated with client_id and an assertion alone, never a secret or an
// Authorization header; each assertion is for the issuer, issued by and
// about the client, good for a minute at most, with a jti no other request
// carried. It returns how many POSTs went to each path.
func (e *jwtEnv) checkSent(t *testing.T) map[string]int {
	t.Helper()
	jtis := map[string]bool{}
	paths := map[string]int{}
	for _, s := range e.sent() {
		paths[s.path]++
		f := s.form
		if f.Has("client_secret") || s.authorization != "" {
			t.Errorf("%s: a secret or an Authorization header was sent: %v %q", s.path, f, s.authorization)
		}
		if f.Get("client_id") != jwtClient || f.Get("client_assertion_type") != authserver.AssertionType {
			t.Errorf("%s: client_id %q, client_assertion_type %q", s.path, f.Get("client_id"), f.Get("client_assertion_type"))
		}
		c := claimsOf(t, f.Get("client_assertion"))
		if c.Aud != e.as.URL() || c.Iss != jwtClient || c.Sub != jwtClient {
			t.Errorf("%s: aud %#v iss %q sub %q, want aud %q", s.path, c.Aud, c.Iss, c.Sub, e.as.URL())
		}
		if life := c.Exp - c.Iat; life <= 0 || life > 60 {
			t.Errorf("%s: the assertion is good for %d s, want at most 60", s.path, life)
		}
		if c.Jti == "" || jtis[c.Jti] {
			t.Errorf("%s: jti %q is empty or was sent before", s.path, c.Jti)
		}
		jtis[c.Jti] = true
	}
	return paths
}

type assertionClaims struct {
	Iss, Sub, Jti string
	Aud           any
	Iat, Exp      int64
}

func claimsOf(t *testing.T, assertion string) assertionClaims {
	t.Helper()
	parts := strings.Split(assertion, ".")
	var c assertionClaims
	if len(parts) != 3 {
		t.Errorf("client_assertion %q is no JWT", assertion)
		return c
	}
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil || json.Unmarshal(raw, &c) != nil {
		t.Errorf("client_assertion %q: claims", assertion)
	}
	return c
}

// signingKeys are a fresh key of each kind, with the algorithm named for it.
func signingKeys(t *testing.T) []struct {
	name, alg string
	key       crypto.Signer
} {
	t.Helper()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return []struct {
		name, alg string
		key       crypto.Signer
	}{{"ES256", "", ec}, {"PS256", "", rs}, {"EdDSA", "", ed}, {"RS256 named", "RS256", rs}}
}

// noFollow reports a redirect instead of following it.
var noFollow = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// authorize opens a pushed authorization URL as a browser would and returns
// the code the provider sends back.
func authorize(t *testing.T, link string) string {
	t.Helper()
	resp, err := noFollow.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("authorize: %d, Location %q", resp.StatusCode, resp.Header.Get("Location"))
	}
	return loc.Query().Get("code")
}

// A client with a key authenticates with private_key_jwt at every endpoint:
// the push and both paths of the code exchange, a refresh, a revocation, a
// device authorization and its token request, for each kind of key. No
// secret is ever sent, and every request carries a new assertion for the
// issuer.
func TestPrivateKeyJWTAtEveryEndpoint(t *testing.T) {
	t.Parallel()
	for _, k := range signingKeys(t) {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			opts := authserver.Options{RequirePAR: true}
			env := newJWTEnv(t, opts, k.key)
			p := env.provider(t, env.config(opts), k.key, k.alg, "http://127.0.0.1/callback")
			ctx := t.Context()
			verifier := oauth2.GenerateVerifier()
			link, err := p.PushAuthorization(ctx, nil, "state-1", oauth2.S256ChallengeOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.ExchangeCode(ctx, authorize(t, link), oauth2.VerifierOption(verifier)); err != nil {
				t.Fatalf("ExchangeCode: %v", err)
			}
			link, err = p.PushAuthorization(ctx, nil, "state-2", oauth2.S256ChallengeOption(verifier))
			if err != nil {
				t.Fatal(err)
			}
			ts, err := p.ExchangeCodeVerifier(ctx, authorize(t, link), verifier)
			if err != nil {
				t.Fatalf("ExchangeCodeVerifier: %v", err)
			}
			if _, err := p.RefreshToken(ctx, ts.RefreshToken); err != nil {
				t.Fatalf("RefreshToken: %v", err)
			}
			if err := p.RevokeToken(ctx, ts.RefreshToken, "refresh_token"); err != nil {
				t.Fatalf("RevokeToken: %v", err)
			}
			da, err := p.DeviceAuth(ctx, nil)
			if err != nil {
				t.Fatalf("DeviceAuth: %v", err)
			}
			if err := env.as.ApproveDevice(da.UserCode, ""); err != nil {
				t.Fatal(err)
			}
			if _, err := p.DeviceToken(ctx, da.DeviceCode); err != nil {
				t.Fatalf("DeviceToken: %v", err)
			}
			paths := env.checkSent(t)
			want := map[string]int{authserver.PathPAR: 2, authserver.PathToken: 4, authserver.PathRevoke: 1, authserver.PathDeviceAuthorization: 1}
			for path, n := range want {
				if paths[path] != n {
					t.Errorf("%d requests to %s, want %d", paths[path], path, n)
				}
			}
			if st := env.as.Stats(); st.ClientAssertionsAccepted != 8 || st.Revocations != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// signInApp is a Module on memory, mounted on an app server, with p built
// for it by build from the app's callback URL.
func signInApp(t *testing.T, build func(redirectURL string) *providers.OAuth2) *oauthflow.Module {
	t.Helper()
	mod, err := oauthflow.New(t.Context(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mod.Close() })
	mux := http.NewServeMux()
	mod.Mount(mux)
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	if err := mod.Registry.Register(build(app.URL + oauthflow.CallbackPath)); err != nil {
		t.Fatal(err)
	}
	return mod
}

// openLink opens a sign-in's link as a browser would: the module pushes
// the authorization request and sends the browser on, to the returned URL.
func openLink(t *testing.T, link string) string {
	t.Helper()
	resp, err := noFollow.Get(link)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") == "" {
		t.Fatalf("opening %s: %d, Location %q", link, resp.StatusCode, resp.Header.Get("Location"))
	}
	return resp.Header.Get("Location")
}

// A whole sign-in behind a provider that requires PAR and DPoP nonces: the
// push, the code exchange and a refresh are each challenged for a nonce and
// sent again, and each retry carries an assertion of its own, which the
// provider, remembering every jti, takes.
func TestPrivateKeyJWTSignInWithDPoPNonces(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	opts := authserver.Options{RequirePAR: true, DPoPNonces: true, IssParameter: true, AccessTokenTTL: 30 * time.Second}
	env := newJWTEnv(t, opts, key)
	mod := signInApp(t, func(cb string) *providers.OAuth2 { return env.provider(t, env.config(opts), key, "", cb) })
	ctx := t.Context()
	_, prompt, err := mod.StartSignIn(ctx, "alice", "jwt")
	if err != nil {
		t.Fatal(err)
	}
	authorizeURL := openLink(t, prompt.AuthURL) // the push
	env.as.RotateDPoPNonce()                    // the exchange holds a stale nonce
	page, err := oauthflowtest.NewBrowser().SignIn(ctx, authorizeURL)
	if err != nil || page.StatusCode != http.StatusOK {
		t.Fatalf("sign-in: %v %+v", err, page)
	}
	// The refresh holds a stale nonce too; a 30 s token is inside the refresh margin.
	env.as.RotateDPoPNonce()
	if _, err := mod.Tokens.GetValidAccessToken(ctx, "alice", "jwt"); err != nil {
		t.Fatal(err)
	}
	st := env.as.Stats()
	if st.DPoPNonceChallenges != 3 || st.Refreshes != 1 || st.CodesExchanged != 1 {
		t.Fatalf("stats %+v, want a challenge each for the push, the exchange and the refresh", st)
	}
	if st.ClientAssertionsAccepted != 6 || st.ClientAssertionReplays != 0 || st.ClientAssertionsRefused != 0 {
		t.Fatalf("stats %+v, want six assertions taken, none again", st)
	}
	if paths := env.checkSent(t); paths[authserver.PathPAR] != 2 || paths[authserver.PathToken] != 4 {
		t.Fatalf("requests %v", paths)
	}
}

// A push that fails, for a client with a key as for any, is the provider's
// error and starts no sign-in: the PAR endpoint down, refusing the client
// (scripted, or for a key it does not know), or slower than the caller's
// deadline. PushAuthorization returns a *oauthflow.ProviderError; opening a
// sign-in's link shows the try-later page and sends the browser nowhere; no
// request reaches the authorization or token endpoint, and nothing is stored.
func TestPrivateKeyJWTPushFailures(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	stranger, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		failure  *authserver.Failure
		endpoint string        // the PAR endpoint, when not the provider's
		key      crypto.Signer // the client's key, when not the one the provider knows
		deadline bool
		code     string
	}{
		"down":              {endpoint: down.URL + authserver.PathPAR},
		"invalid_client":    {failure: &authserver.Failure{Error: "invalid_client"}, code: "invalid_client"},
		"an unknown key":    {key: stranger, code: "invalid_client"},
		"past the deadline": {failure: &authserver.Failure{Delay: time.Hour}, deadline: true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
			if err != nil {
				t.Fatal(err)
			}
			opts := authserver.Options{RequirePAR: true}
			env := newJWTEnv(t, opts, key)
			if tc.failure != nil {
				env.as.FailNextPAR(*tc.failure, *tc.failure) // the call and the link
			}
			cfg := env.config(opts)
			if tc.endpoint != "" {
				cfg.PushedAuthURL = tc.endpoint
			}
			signer := crypto.Signer(key)
			if tc.key != nil {
				signer = tc.key
			}
			var p *providers.OAuth2
			mod := signInApp(t, func(cb string) *providers.OAuth2 {
				p = env.provider(t, cfg, signer, "", cb, providers.WithHTTPClient(&http.Client{Timeout: 200 * time.Millisecond}))
				return p
			})
			ctx := t.Context()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, 100*time.Millisecond)
				defer cancel()
			}
			_, err = p.PushAuthorization(ctx, nil, "state-1", oauth2.S256ChallengeOption(oauth2.GenerateVerifier()))
			var pe *oauthflow.ProviderError
			if !errors.As(err, &pe) || pe.ProviderID != "jwt" || pe.Code != tc.code {
				t.Fatalf("err = %v, want the provider's error %q", err, tc.code)
			}
			if tc.deadline && !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v, want the deadline's", err)
			}
			_, prompt, err := mod.StartSignIn(t.Context(), "alice", "jwt")
			if err != nil {
				t.Fatal(err)
			}
			resp, err := noFollow.Get(prompt.AuthURL)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadGateway || resp.Header.Get("Location") != "" {
				t.Errorf("opening the link: %d, Location %q; want the try-later page", resp.StatusCode, resp.Header.Get("Location"))
			}
			if _, err := mod.Tokens.GetTokens(t.Context(), "alice", "jwt"); !errors.Is(err, oauthflow.ErrNoToken) {
				t.Errorf("GetTokens: %v, want ErrNoToken", err)
			}
			if st := env.as.Stats(); st.Authorizations+st.RequestURIsRedeemed+st.TokenRequests != 0 {
				t.Errorf("stats %+v: the sign-in went on", st)
			}
			env.checkSent(t)
		})
	}
}

// A provider with a key is refused when built with a secret beside it,
// without the issuer its assertions are for, with JSON token requests, with
// a key or an algorithm no assertion is signed with; KeyID and SigningAlg
// without a key are refused too. Discover, which sets the issuer, builds one.
func TestPrivateKeyJWTRefusedAtBuild(t *testing.T) {
	t.Parallel()
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	cfg := providers.Config{ID: "acme", AuthURL: "https://as.example/authorize", TokenURL: "https://as.example/token", Issuer: "https://as.example"}
	creds := providers.Credentials{ClientID: jwtClient, RedirectURL: "https://app.example/cb", SigningKey: ec}
	for _, tt := range []struct {
		name   string
		change func(*providers.Config, *providers.Credentials)
		says   string
	}{
		{"a secret beside the key", func(_ *providers.Config, c *providers.Credentials) { c.ClientSecret = "s" }, "never both"},
		{"no issuer", func(cfg *providers.Config, _ *providers.Credentials) { cfg.Issuer = "" }, "private_key_jwt needs the provider's Issuer"},
		{"JSON token requests", func(cfg *providers.Config, _ *providers.Credentials) { cfg.JSONTokenRequest = true }, "JSON"},
		{"a P-384 key", func(_ *providers.Config, c *providers.Credentials) { c.SigningKey = p384 }, "P-256"},
		{"an algorithm not the key's", func(_ *providers.Config, c *providers.Credentials) { c.SigningAlg = "RS256" }, "RS256"},
		{"a key ID without a key", func(_ *providers.Config, c *providers.Credentials) { c.SigningKey, c.KeyID = nil, "k" }, "go with a SigningKey"},
	} {
		cfg, creds := cfg, creds
		tt.change(&cfg, &creds)
		_, err := providers.NewOAuth2(cfg, creds)
		if !errors.Is(err, providers.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.says) {
			t.Errorf("%s: err = %v, want ErrInvalidConfig saying %q", tt.name, err, tt.says)
		}
	}
	if _, err := providers.NewOAuth2(cfg, creds); err != nil {
		t.Errorf("a key and the issuer: %v", err)
	}
	env := newJWTEnv(t, authserver.Options{}, ec)
	creds.RedirectURL = "http://127.0.0.1/callback"
	p, err := providers.Discover(t.Context(), "jwt", env.as.URL(), creds)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if err := p.RevokeToken(t.Context(), "unknown-token", ""); err != nil {
		t.Fatalf("RevokeToken: %v", err)
	}
	env.checkSent(t)
}

// Credentials never serialize the key, its ID or its algorithm, so no log
// or record of them carries the private key.
func TestPrivateKeyJWTKeyNeverSerialized(t *testing.T) {
	t.Parallel()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(providers.Credentials{ClientID: jwtClient, SigningKey: key, KeyID: "key-1", SigningAlg: "ES256"})
	if err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{key.D.String(), "key-1", "ES256", "SigningKey"} {
		if strings.Contains(string(b), secret) {
			t.Fatalf("the credentials serialize %q: %s", secret, b)
		}
	}
}
