package oauthflow_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/providers"
)

// Interop with DPoP (RFC 9449): oidc-provider binds a sign-in's grant to the
// key the library made for it, and its userinfo endpoint, the one resource
// the peer protects itself, checks the binding on every call. Two instances
// share a real Redis, their records sealed at rest.

// dpopCase is one provider set-up TestInteropDPoP runs the flow with.
type dpopCase struct {
	name           string
	dpop           string // the peer's policy: oidcpeer.DPoPOptional, DPoPNonce or DPoPOff
	client, secret string
	catalog        bool // a catalog-style Config with DPoP: true; false: Discover, DPoP from the metadata
}

func TestInteropDPoP(t *testing.T) {
	t.Parallel()
	for _, tc := range []dpopCase{
		{"discovered confidential client", oidcpeer.DPoPOptional, oidcpeer.BasicClient, oidcpeer.BasicSecret, false},
		{"catalog public client", oidcpeer.DPoPOptional, oidcpeer.PublicClient, "", true},
		{"nonces/discovered confidential client", oidcpeer.DPoPNonce, oidcpeer.BasicClient, oidcpeer.BasicSecret, false},
		{"nonces/catalog public client", oidcpeer.DPoPNonce, oidcpeer.PublicClient, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			testInteropDPoP(t, tc)
		})
	}
}

// testInteropDPoP signs alice in on instance A and uses the grant from B.
func testInteropDPoP(t *testing.T, tc dpopCase) {
	// Access tokens live an hour, past the store's skew: reads use the
	// sign-in's token until the test expires it in the store.
	peer := oidcpeer.Start(t, oidcpeer.Options{DPoP: tc.dpop, ATTTL: time.Hour, UserinfoTokens: true})
	space := realRedisSpace(t)
	ring := keyRing(t, newKey(t, "k1"))
	a, b := newDPoPApp(t, peer, tc, space, ring), newDPoPApp(t, peer, tc, space, ring)

	jkt := a.signIn(t)
	require.NotEmpty(t, jkt, "the authorization request names the key")
	stored := b.tokens(t)
	require.Equal(t, "DPoP", stored.TokenType, "the peer answered token_type DPoP")
	require.Equal(t, jkt, thumbprintOf(t, stored.DPoPKey), "the stored key is the one the authorization request named")
	require.Equal(t, jkt, peer.BoundTo(t, stored.AccessToken, tc.client, tc.secret), "the peer bound the token to that key")
	requireSealed(t, space, stored)

	assert.Equal(t, http.StatusOK, b.userinfo(t), "B sends the token A stored with a proof of its key")
	refusedWithoutProof(t, peer, stored.AccessToken)

	refreshed := b.forceRefresh(t, stored)
	require.Equal(t, stored.DPoPKey, refreshed.DPoPKey, "a refresh keeps the grant's key")
	require.Equal(t, jkt, peer.BoundTo(t, refreshed.AccessToken, tc.client, tc.secret), "the refresh proved the same key")
	refusedWithoutProof(t, peer, refreshed.AccessToken)
	requireSealed(t, space, refreshed)

	challenges := 0
	if tc.dpop == oidcpeer.DPoPNonce {
		challenges = 1 // A's code exchange; B's first call to userinfo
	}
	a.wire.requireAnswered(t, challenges, "A")
	b.wire.requireAnswered(t, challenges, "B") // the peer's log is printed if the test failed (oidcpeer.Start)
}

// With DPoP off at the peer the same flow stores a bearer token, and
// userinfo accepts it as one: what refuses a bound token without its proof
// is the binding, not the endpoint.
func TestInteropDPoPOffStaysBearer(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{DPoP: oidcpeer.DPoPOff, ATTTL: time.Hour, UserinfoTokens: true})
	tc := dpopCase{dpop: oidcpeer.DPoPOff, client: oidcpeer.BasicClient, secret: oidcpeer.BasicSecret}
	space := realRedisSpace(t)
	a, b := newDPoPApp(t, peer, tc, space, nil), newDPoPApp(t, peer, tc, space, nil)

	require.Empty(t, a.signIn(t), "no dpop_jkt")
	stored := b.tokens(t)
	require.Empty(t, stored.TokenType, "a bearer token")
	require.Empty(t, stored.DPoPKey)
	require.Empty(t, peer.BoundTo(t, stored.AccessToken, tc.client, tc.secret), "the peer bound it to no key")
	assert.Equal(t, http.StatusOK, b.userinfo(t))
	assert.Equal(t, http.StatusOK, userinfoAs(t, peer, "Bearer "+stored.AccessToken, nil).StatusCode)
	assert.Zero(t, a.wire.count(http.MethodPost, "/token")+b.wire.count(http.MethodGet, "/me"), "no proof was sent")
}

// realRedisSpace is a keyspace of the test's own in the real Redis (required
// under CI=true).
func realRedisSpace(t *testing.T) *redisSpace {
	c := redistest.Real(t)
	prefix := redistest.Prefix(t, c)
	return &redisSpace{c: c, prefix: prefix, kv: oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), prefix)}
}

// dpopApp is one instance: a Module with its own callback server, and the
// wire between it and the peer.
type dpopApp struct {
	peer *oidcpeer.Peer
	mod  *oauthflow.Module
	api  *httptest.Server
	wire *dpopWire
}

func newDPoPApp(t *testing.T, peer *oidcpeer.Peer, tc dpopCase, space *redisSpace, ring *oauthflow.KeyRing) *dpopApp {
	t.Helper()
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	wire := &dpopWire{}
	creds := providers.Credentials{ClientID: tc.client, ClientSecret: tc.secret, RedirectURL: api.URL + oauthflow.CallbackPath}
	prov := dpopProvider(t, peer, tc, creds, providers.WithHTTPClient(&http.Client{Transport: wire, Timeout: 10 * time.Second}))
	require.Equal(t, tc.dpop != oidcpeer.DPoPOff, prov.UsesDPoP(), "DPoP from the metadata or the config")
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(prov))
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{KV: space.kv, Registry: reg,
		Encryption: ring, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close() })
	mod.Mount(mux)
	return &dpopApp{peer: peer, mod: mod, api: api, wire: wire}
}

// dpopProvider builds the case's provider: discovered, so DPoP comes from
// dpop_signing_alg_values_supported, or written out as a catalog entry is.
func dpopProvider(t *testing.T, peer *oidcpeer.Peer, tc dpopCase, creds providers.Credentials, opt providers.Option) *providers.OAuth2 {
	t.Helper()
	iss := peer.Issuer()
	if !tc.catalog {
		p, err := providers.Discover(context.Background(), "peer", iss, creds, opt)
		require.NoError(t, err)
		return p
	}
	p, err := providers.NewOAuth2(providers.Config{ID: "peer", DisplayName: "oidc-provider",
		AuthURL: iss + "/auth", TokenURL: iss + "/token", RevocationURL: iss + "/token/revocation",
		Issuer: iss, PKCE: providers.PKCERequired, DPoP: true}, creds, opt)
	require.NoError(t, err)
	return p
}

// signIn runs alice's sign-in through the peer's login and consent to this
// instance's callback, and returns the dpop_jkt the authorization request
// carried ("" for none).
func (a *dpopApp) signIn(t *testing.T) string {
	t.Helper()
	run, doc, err := a.mod.StartSignIn(context.Background(), "alice", "peer", "openid", "offline_access")
	require.NoError(t, err)
	authURL, err := url.Parse(doc.AuthURL)
	require.NoError(t, err)
	jkt := authURL.Query().Get("dpop_jkt")
	redirect := a.peer.Authorize(t, doc.AuthURL, a.api.URL+oauthflow.CallbackPath)
	status, body, _ := get(t, redirect.String())
	require.Equal(t, http.StatusOK, status, "%s\npeer log:\n%s", body, a.peer.Output())
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, a.mod.Engine.Document(context.Background(), run.ID, oauthflow.PromptDocumentName, &prompt))
	require.Equal(t, oauthflow.PromptSuccess, prompt.Status)
	return jkt
}

func (a *dpopApp) tokens(t *testing.T) *oauthflow.StoredTokens {
	t.Helper()
	tok, err := a.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	return tok
}

// userinfo calls the peer's userinfo endpoint as alice through the store's
// transport (what Tokens.Client sends with) over the wire, and returns the
// status.
func (a *dpopApp) userinfo(t *testing.T) int {
	t.Helper()
	c := &http.Client{Transport: a.mod.Tokens.Transport(context.Background(), "alice", "peer", a.wire), Timeout: 10 * time.Second}
	resp, err := c.Get(a.peer.UserinfoURL())
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	var claims struct {
		Sub string `json:"sub"`
	}
	if resp.StatusCode == http.StatusOK {
		require.NoError(t, json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&claims))
		require.NotEmpty(t, claims.Sub, "userinfo names the user")
	}
	return resp.StatusCode
}

// forceRefresh expires the stored token and calls userinfo, which refreshes
// it (with a proof of the grant's key) before the call; it returns the
// record the refresh stored.
func (a *dpopApp) forceRefresh(t *testing.T, stored *oauthflow.StoredTokens) *oauthflow.StoredTokens {
	t.Helper()
	expired := *stored
	expired.ExpiresAt = time.Now().Add(-time.Minute).UnixMilli()
	require.NoError(t, a.mod.Tokens.StoreTokens(context.Background(), "alice", "peer", expired))
	refreshes := a.wire.count(http.MethodPost, "/token")
	require.Equal(t, http.StatusOK, a.userinfo(t), "the refreshed token is accepted with a proof")
	require.Greater(t, a.wire.count(http.MethodPost, "/token"), refreshes, "the call refreshed the token at the peer")
	fresh := a.tokens(t)
	require.NotEqual(t, stored.AccessToken, fresh.AccessToken, "a new access token")
	require.Equal(t, "DPoP", fresh.TokenType)
	return fresh
}

// refusedWithoutProof checks the peer refuses a bound token sent without a
// proof of its key: as a Bearer token (401 invalid_token), as a DPoP token
// with no DPoP header (400 invalid_request, RFC 6750 §3.1) and with a proof
// of another key (401 invalid_token).
func refusedWithoutProof(t *testing.T, peer *oidcpeer.Peer, access string) {
	t.Helper()
	other, err := dpop.NewKey()
	require.NoError(t, err)
	proof, err := other.Proof(http.MethodGet, peer.UserinfoURL(), time.Now(), access, "")
	require.NoError(t, err)
	// In nonce mode that proof is refused for want of a nonce: the answer's
	// nonce makes one refused for its key alone.
	if nonce := userinfoAs(t, peer, "DPoP "+access, http.Header{"DPoP": {proof}}).Header.Get("DPoP-Nonce"); nonce != "" {
		proof, err = other.Proof(http.MethodGet, peer.UserinfoURL(), time.Now(), access, nonce)
		require.NoError(t, err)
	}
	for _, tt := range []struct {
		name, auth, proof string
		status            int
		error             string
	}{
		{"as a Bearer token", "Bearer " + access, "", http.StatusUnauthorized, "invalid_token"},
		{"as DPoP without a proof", "DPoP " + access, "", http.StatusBadRequest, "invalid_request"},
		{"with a proof of another key", "DPoP " + access, proof, http.StatusUnauthorized, "invalid_token"},
	} {
		resp := userinfoAs(t, peer, tt.auth, http.Header{"DPoP": {tt.proof}})
		assert.Equal(t, tt.status, resp.StatusCode, tt.name)
		assert.Contains(t, resp.Header.Get("WWW-Authenticate"), `error="`+tt.error+`"`, tt.name)
	}
}

// userinfoAs calls userinfo with the Authorization header auth and extra
// headers (an empty value is left out), and returns the closed answer.
func userinfoAs(t *testing.T, peer *oidcpeer.Peer, auth string, extra http.Header) *http.Response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, peer.UserinfoURL(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", auth)
	for k, vs := range extra {
		if vs[0] != "" {
			req.Header.Set(k, vs[0])
		}
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	discardBody(resp)
	return resp
}

func discardBody(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
}

// thumbprintOf is the RFC 7638 thumbprint of a key as StoredTokens.DPoPKey
// holds it.
func thumbprintOf(t *testing.T, enc string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(enc)
	require.NoError(t, err)
	k, err := dpop.ParseKey(b)
	require.NoError(t, err)
	return k.Thumbprint()
}

// requireSealed checks the record is sealed at rest and that no value in the
// keyspace holds the grant's key (its encoded form, or its private scalar in
// any usual encoding) or the tokens in the clear.
func requireSealed(t *testing.T, space *redisSpace, tok *oauthflow.StoredTokens) {
	t.Helper()
	values := space.dump(t)
	require.True(t, strings.HasPrefix(values["oauth:alice:peer"], "enc1:k1:"), "the token record is sealed")
	raw, err := base64.RawURLEncoding.DecodeString(tok.DPoPKey)
	require.NoError(t, err)
	d := raw[1:33] // the private scalar, after the encoding's version byte
	secrets := map[string]string{
		"the key": tok.DPoPKey, "the access token": tok.AccessToken, "the refresh token": tok.RefreshToken,
		"the private scalar": string(d), "the private scalar in hex": hex.EncodeToString(d),
		"the private scalar in base64url": base64.RawURLEncoding.EncodeToString(d),
		"the private scalar in base64":    base64.StdEncoding.EncodeToString(d),
	}
	for key, v := range values {
		for what, secret := range secrets {
			require.NotContains(t, v, secret, "%s is in the clear at %s", what, key)
		}
	}
}

// dpopWire is a transport that records each request an instance sends to
// the peer with a DPoP proof, and how the peer answered it.
type dpopWire struct {
	mu    sync.Mutex
	calls []dpopCall
}

type dpopCall struct {
	method, path string
	nonce        string // the nonce the proof carried
	status       int
	challenge    string // the nonce of a use_dpop_nonce answer, "" for any other
}

func (w *dpopWire) RoundTrip(req *http.Request) (*http.Response, error) {
	proof := req.Header.Get("DPoP")
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || proof == "" {
		return resp, err
	}
	call := dpopCall{method: req.Method, path: req.URL.Path, nonce: proofNonce(proof), status: resp.StatusCode}
	if useNonce(resp) {
		call.challenge = resp.Header.Get("DPoP-Nonce")
	}
	w.mu.Lock()
	w.calls = append(w.calls, call)
	w.mu.Unlock()
	return resp, nil
}

// useNonce reports whether resp is a use_dpop_nonce challenge: a token
// endpoint's error (400, RFC 9449 §8) or a resource's (401, §9). It leaves
// the body readable.
func useNonce(resp *http.Response) bool {
	if resp.StatusCode == http.StatusUnauthorized {
		return strings.Contains(resp.Header.Get("WWW-Authenticate"), `error="use_dpop_nonce"`)
	}
	if resp.StatusCode != http.StatusBadRequest {
		return false
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var answer struct {
		Error string `json:"error"`
	}
	return json.Unmarshal(body, &answer) == nil && answer.Error == "use_dpop_nonce"
}

// proofNonce is the nonce claim of a proof, read without checking it.
func proofNonce(proof string) string {
	parts := strings.Split(proof, ".")
	if len(parts) != 3 {
		return ""
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var claims struct {
		Nonce string `json:"nonce"`
	}
	_ = json.Unmarshal(payload, &claims)
	return claims.Nonce
}

// count is how many proofs were sent to method and path.
func (w *dpopWire) count(method, path string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, c := range w.calls {
		if c.method == method && c.path == path {
			n++
		}
	}
	return n
}

// requireAnswered checks the peer challenged the instance's proofs want
// times, and that each challenge was answered by one retry with the nonce it
// gave, which the peer accepted; every other proof was accepted.
func (w *dpopWire) requireAnswered(t *testing.T, want int, instance string) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	challenged := 0
	for i, c := range w.calls {
		if c.challenge == "" {
			require.Equal(t, http.StatusOK, c.status, "%s: %s %s was refused", instance, c.method, c.path)
			continue
		}
		challenged++
		require.Less(t, i+1, len(w.calls), "%s: the challenge to %s %s got no retry", instance, c.method, c.path)
		retry := w.calls[i+1]
		require.Equal(t, c.path, retry.path, "%s: the retry follows its challenge", instance)
		require.Equal(t, c.challenge, retry.nonce, "%s: the retry carries the challenge's nonce", instance)
		require.Empty(t, retry.challenge, "%s: the retry is not challenged again", instance)
	}
	require.Equal(t, want, challenged, "%s: use_dpop_nonce challenges", instance)
}
