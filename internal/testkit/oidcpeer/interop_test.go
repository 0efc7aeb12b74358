package oidcpeer_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/providers"
)

// redirectURI is registered for every peer client (any loopback port). Nothing
// listens there: Authorize stops at the redirect without following it.
const redirectURI = "http://127.0.0.1:9/api/v1/oauth/callback"

// scopes are requested in every flow; the peer issues a refresh token to each
// of its clients whatever the scope (they all may use the refresh_token grant).
var scopes = []string{"openid", "offline_access", "read"}

// client is one of the peer's registered clients and how it authenticates.
type client struct {
	id, secret string
	style      providers.AuthStyle // "" keeps what discovery chose
	method     string              // how it authenticates: client_secret_basic, client_secret_post or none
}

var (
	basicClient  = client{id: oidcpeer.BasicClient, secret: oidcpeer.BasicSecret, method: basic}
	postClient   = client{id: oidcpeer.PostClient, secret: oidcpeer.PostSecret, style: providers.AuthStyleParams, method: post}
	encClient    = client{id: oidcpeer.EncClient, secret: oidcpeer.EncSecret, method: basic}
	publicClient = client{id: oidcpeer.PublicClient, method: none}
	denyClient   = client{id: oidcpeer.DenyClient, secret: oidcpeer.DenySecret, method: basic}
)

// Client authentication methods (RFC 7591 names), as the wire recorder sees them.
const (
	basic = "client_secret_basic"
	post  = "client_secret_post"
	none  = "none"
)

// wire is a transport that records how the client authenticated on each
// request to an endpoint. oidc-provider accepts either secret method from
// any confidential client, so only the wire shows which one was used.
type wire struct {
	mu      sync.Mutex
	methods map[string][]string // URL path -> one method per request
}

func (w *wire) RoundTrip(req *http.Request) (*http.Response, error) {
	var form url.Values
	if req.Body != nil {
		body, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		form, _ = url.ParseQuery(string(body))
	}
	method := none
	switch {
	case req.Header.Get("Authorization") != "":
		method = basic
	case form.Has("client_secret"):
		method = post
	}
	w.mu.Lock()
	if w.methods == nil {
		w.methods = map[string][]string{}
	}
	w.methods[req.URL.Path] = append(w.methods[req.URL.Path], method)
	w.mu.Unlock()
	return http.DefaultTransport.RoundTrip(req)
}

func (w *wire) seen(path string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.methods[path]
}

func (w *wire) option() providers.Option {
	return providers.WithHTTPClient(&http.Client{Transport: w, Timeout: 10 * time.Second})
}

// provider discovers the peer and builds a provider for c. Discovery cannot
// know how one client was registered, so a client_secret_post client gets
// its auth style set on the discovered config.
func provider(t *testing.T, peer *oidcpeer.Peer, c client, opts ...providers.Option) *providers.OAuth2 {
	t.Helper()
	creds := providers.Credentials{ClientID: c.id, ClientSecret: c.secret, RedirectURL: redirectURI}
	p, err := providers.Discover(t.Context(), "peer", peer.Issuer(), creds, opts...)
	require.NoError(t, err)
	if c.style == "" {
		return p
	}
	cfg := p.Config()
	cfg.AuthStyle = c.style
	p, err = providers.NewOAuth2(cfg, creds, opts...)
	require.NoError(t, err)
	return p
}

// signIn runs the authorization request as the user and returns the redirect
// to the client, after checking its state and iss.
func signIn(t *testing.T, peer *oidcpeer.Peer, p *providers.OAuth2, verifier string, opts ...oauth2.AuthCodeOption) url.Values {
	t.Helper()
	state := oauth2.GenerateVerifier() // any unguessable value will do
	if verifier != "" {
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	back := peer.Authorize(t, p.BuildAuthURL(scopes, state, opts...), redirectURI).Query()
	assert.Equal(t, state, back.Get("state"), "state round trip")
	assert.Equal(t, peer.Issuer(), back.Get("iss"), "RFC 9207 iss on the redirect")
	return back
}

// connect runs the whole flow with PKCE and returns the tokens.
func connect(t *testing.T, peer *oidcpeer.Peer, p *providers.OAuth2) *oauthflow.TokenSet {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	back := signIn(t, peer, p, verifier)
	require.NotEmpty(t, back.Get("code"), "redirect: %v", back)
	ts, err := p.ExchangeCode(t.Context(), back.Get("code"), oauth2.VerifierOption(verifier))
	require.NoError(t, err)
	require.NotEmpty(t, ts.AccessToken)
	require.NotEmpty(t, ts.RefreshToken)
	return ts
}

func TestDiscover(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	iss := peer.Issuer()

	t.Run("builds the provider", func(t *testing.T) {
		t.Parallel()
		p := provider(t, peer, basicClient)
		cfg := p.Config()
		assert.Equal(t, iss+"/auth", cfg.AuthURL)
		assert.Equal(t, iss+"/token", cfg.TokenURL)
		assert.Equal(t, iss+"/token/revocation", cfg.RevocationURL)
		assert.Equal(t, providers.AuthStyleHeader, cfg.AuthStyle)
		assert.True(t, p.SupportsPKCE(), "metadata lists S256")
		assert.True(t, p.CanRevoke())
		assert.Equal(t, iss, p.Issuer(), "metadata says the redirect carries iss")
		assert.Equal(t, []string{"openid"}, p.DefaultScopes())
	})

	mismatched := map[string]string{
		"trailing slash": iss + "/",
		"host alias":     strings.Replace(iss, "127.0.0.1", "localhost", 1),
	}
	for name, asked := range mismatched {
		t.Run("rejects issuer "+name, func(t *testing.T) {
			t.Parallel()
			creds := providers.Credentials{ClientID: oidcpeer.BasicClient, ClientSecret: oidcpeer.BasicSecret, RedirectURL: redirectURI}
			_, err := providers.Discover(t.Context(), "peer", asked, creds)
			require.ErrorIs(t, err, providers.ErrIssuerMismatch, "asked for %s", asked)
		})
	}
}

func TestCodeExchange(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	tests := []struct {
		name   string
		client client
	}{
		{"client_secret_basic", basicClient},
		{"client_secret_post", postClient},
		{"basic with a secret that must be form-encoded", encClient},
		{"public client with PKCE", publicClient},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var w wire
			ts := connect(t, peer, provider(t, peer, tt.client, w.option()))
			assert.Equal(t, []string{tt.client.method}, w.seen("/token"), "client authentication")
			assert.Positive(t, ts.ExpiresIn)
			assert.Contains(t, strings.Fields(ts.Scope), "read")
			assert.True(t, peer.Introspect(t, ts.AccessToken, tt.client.id, tt.client.secret), "fresh access token")
		})
	}
}

func TestCodeExchangeFailures(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})

	t.Run("wrong PKCE verifier", func(t *testing.T) {
		t.Parallel()
		p := provider(t, peer, publicClient)
		back := signIn(t, peer, p, oauth2.GenerateVerifier())
		_, err := p.ExchangeCode(t.Context(), back.Get("code"), oauth2.VerifierOption(oauth2.GenerateVerifier()))
		require.Error(t, err)
		assert.True(t, oauthflow.IsGrantDead(err), "invalid_grant: %v", err)
	})

	t.Run("replayed code", func(t *testing.T) {
		t.Parallel()
		p := provider(t, peer, basicClient)
		back := signIn(t, peer, p, "")
		_, err := p.ExchangeCode(t.Context(), back.Get("code"))
		require.NoError(t, err)
		_, err = p.ExchangeCode(t.Context(), back.Get("code"))
		assert.True(t, oauthflow.IsGrantDead(err), "invalid_grant: %v", err)
	})

	t.Run("wrong secret", func(t *testing.T) {
		t.Parallel()
		p := provider(t, peer, client{id: oidcpeer.EncClient, secret: "p@ss:w/rd+ %&"})
		back := signIn(t, peer, p, "")
		_, err := p.ExchangeCode(t.Context(), back.Get("code"))
		var pe *oauthflow.ProviderError
		require.ErrorAs(t, err, &pe)
		assert.Equal(t, "invalid_client", pe.Code)
		assert.False(t, oauthflow.IsGrantDead(err))
		assert.False(t, oauthflow.IsTransient(err))
	})
}

func TestRefreshRotateAlways(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{RTRotate: oidcpeer.RotateAlways})
	for _, c := range []client{basicClient, publicClient} {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			p := provider(t, peer, c)
			first := connect(t, peer, p)

			second, err := p.RefreshToken(t.Context(), first.RefreshToken)
			require.NoError(t, err)
			assert.NotEmpty(t, second.AccessToken)
			assert.NotEqual(t, first.AccessToken, second.AccessToken)
			require.NotEmpty(t, second.RefreshToken, "rotation returns a new refresh token")
			assert.NotEqual(t, first.RefreshToken, second.RefreshToken)

			// Reusing a rotated refresh token is taken as theft: the peer
			// revokes the whole grant, the new refresh token included.
			_, err = p.RefreshToken(t.Context(), first.RefreshToken)
			assert.True(t, oauthflow.IsGrantDead(err), "old refresh token: want invalid_grant, got %v", err)
			_, err = p.RefreshToken(t.Context(), second.RefreshToken)
			assert.True(t, oauthflow.IsGrantDead(err), "new refresh token after reuse: want invalid_grant, got %v", err)
		})
	}
}

func TestRefreshRotateNever(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{RTRotate: oidcpeer.RotateNever})
	p := provider(t, peer, postClient)
	first := connect(t, peer, p)
	for range 2 { // the same refresh token keeps working
		next, err := p.RefreshToken(t.Context(), first.RefreshToken)
		require.NoError(t, err)
		assert.NotEmpty(t, next.AccessToken)
		assert.NotEqual(t, first.AccessToken, next.AccessToken)
		// oidc-provider echoes the unchanged refresh token; an absent one
		// would mean the same (RFC 6749 §6).
		if next.RefreshToken != "" {
			assert.Equal(t, first.RefreshToken, next.RefreshToken, "no rotation")
		}
	}
}

// TestExpiry waits out a one-second access token.
func TestExpiry(t *testing.T) {
	t.Parallel()
	const ttl = time.Second
	peer := oidcpeer.Start(t, oidcpeer.Options{ATTTL: ttl})
	p := provider(t, peer, basicClient)
	first := connect(t, peer, p)
	assert.Equal(t, int64(ttl/time.Second), first.ExpiresIn, "expires_in is the peer's AT_TTL")

	time.Sleep(ttl + time.Second)
	require.False(t, peer.Introspect(t, first.AccessToken, basicClient.id, basicClient.secret), "expired access token")
	next, err := p.RefreshToken(t.Context(), first.RefreshToken)
	require.NoError(t, err)
	// The new token lives one second too, so asking the peer whether it is
	// still active would race the clock on a loaded machine: check what was minted.
	assert.NotEqual(t, first.AccessToken, next.AccessToken, "a new access token after expiry")
	assert.Equal(t, int64(ttl/time.Second), next.ExpiresIn, "minted with the peer's AT_TTL")
}

func TestRevoke(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	tests := []struct {
		client client
		hint   string
	}{
		{basicClient, "refresh_token"},
		{postClient, "refresh_token"},
		{encClient, "access_token"},
		{publicClient, "refresh_token"},
		{publicClient, ""},
	}
	for _, tt := range tests {
		t.Run(tt.client.id+"/"+tt.hint, func(t *testing.T) {
			t.Parallel()
			var w wire
			p := provider(t, peer, tt.client, w.option())
			ts := connect(t, peer, p)
			token := ts.RefreshToken
			if tt.hint == "access_token" {
				token = ts.AccessToken
			}
			require.True(t, peer.Introspect(t, token, tt.client.id, tt.client.secret), "before revocation")
			require.NoError(t, p.RevokeToken(t.Context(), token, tt.hint))
			assert.False(t, peer.Introspect(t, token, tt.client.id, tt.client.secret), "after revocation")
			assert.NoError(t, p.RevokeToken(t.Context(), token, tt.hint), "revoking again is not an error (RFC 7009)")
			assert.Equal(t, []string{tt.client.method, tt.client.method}, w.seen("/token/revocation"), "client authentication")
		})
	}
}

func TestAccessDenied(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	tests := []struct {
		name   string
		peer   func(t *testing.T) *oidcpeer.Peer
		client client
		opts   []oauth2.AuthCodeOption
	}{
		{name: "deny-client", client: denyClient},
		{name: "login_hint=deny", client: basicClient, opts: []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("login_hint", "deny")}},
		{name: "deny-next", client: publicClient, peer: func(t *testing.T) *oidcpeer.Peer {
			own := oidcpeer.Start(t, oidcpeer.Options{}) // its own peer: deny-next hits whichever flow comes next
			own.DenyNext(t)
			return own
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			peer := peer
			if tt.peer != nil {
				peer = tt.peer(t)
			}
			p := provider(t, peer, tt.client)
			back := signIn(t, peer, p, oauth2.GenerateVerifier(), tt.opts...) // checks state and iss
			assert.Equal(t, "access_denied", back.Get("error"))
			assert.Empty(t, back.Get("code"))
		})
	}
}

// TestPeerOptions checks the harness passes its options: a PKCE=required peer
// refuses a confidential client's request without a challenge.
func TestPeerOptions(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{PKCE: oidcpeer.PKCERequired, RedirectPaths: []string{"/extra/callback"}})
	creds := providers.Credentials{ClientID: oidcpeer.BasicClient, ClientSecret: oidcpeer.BasicSecret, RedirectURL: "http://localhost:9/extra/callback"}
	p, err := providers.Discover(t.Context(), "peer", peer.Issuer(), creds)
	require.NoError(t, err)
	back := peer.Authorize(t, p.BuildAuthURL(scopes, "s"), creds.RedirectURL).Query()
	assert.Equal(t, "invalid_request", back.Get("error"), "no code_challenge under PKCE=required: %v", back)
	assert.Equal(t, peer.Issuer(), back.Get("iss"))
}

// TestDPoPOptions checks the peer's DPoP policies reach its metadata:
// ES256 is listed unless DPoP is off, and Discover binds grants from it.
func TestDPoPOptions(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		dpop  string
		bound bool
	}{
		{"", true},
		{oidcpeer.DPoPNonce, true},
		{oidcpeer.DPoPOff, false},
	} {
		t.Run("DPoP="+tt.dpop, func(t *testing.T) {
			t.Parallel()
			peer := oidcpeer.Start(t, oidcpeer.Options{DPoP: tt.dpop})
			assert.Equal(t, tt.bound, provider(t, peer, basicClient).UsesDPoP())
		})
	}
}
