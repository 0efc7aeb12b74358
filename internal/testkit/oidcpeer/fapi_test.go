package oidcpeer_test

import (
	"crypto/ecdsa"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
)

// This file shows, with raw HTTP requests, that a peer under the FAPI 2.0
// Security Profile (oidcpeer.Options.FAPI) enforces each of the profile's
// rules itself: a client that breaks one is refused by the server.

const assertionType = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

// fapi is a FAPI peer and the key its FAPIClient signs client assertions with.
type fapi struct {
	peer *oidcpeer.Peer
	key  oidcpeer.ClientKey
}

// startFAPI starts a FAPI peer with opts and a new client key.
func startFAPI(t *testing.T, opts oidcpeer.Options) *fapi {
	t.Helper()
	key := oidcpeer.NewClientKey(t)
	opts.FAPI, opts.ClientJWKS = oidcpeer.FAPI20, key.JWKS(t)
	return &fapi{peer: oidcpeer.Start(t, opts), key: key}
}

// assertionClaims are the claims of a client assertion the peer takes (RFC
// 7523 §3): FAPIClient's, for the issuer itself, with a fresh jti and a
// minute to live.
func (f *fapi) assertionClaims() map[string]any {
	now := time.Now().Unix()
	return map[string]any{
		"iss": oidcpeer.FAPIClient, "sub": oidcpeer.FAPIClient, "aud": f.peer.Issuer(),
		"jti": rand.Text(), "iat": now, "exp": now + 60,
	}
}

// assertion returns a client assertion with claims, signed ES256 with key.
func assertion(t *testing.T, key oidcpeer.ClientKey, claims map[string]any) string {
	t.Helper()
	b64 := base64.RawURLEncoding
	segment := func(v any) string {
		b, err := json.Marshal(v)
		require.NoError(t, err)
		return b64.EncodeToString(b)
	}
	input := segment(map[string]string{"alg": "ES256", "typ": "JWT", "kid": key.KID}) + "." + segment(claims)
	digest := sha256.Sum256([]byte(input))
	r, s, err := ecdsa.Sign(rand.Reader, key.Private, digest[:])
	require.NoError(t, err)
	sig := make([]byte, 64) // r || s, 32 bytes each (RFC 7518 §3.4)
	r.FillBytes(sig[:32])
	s.FillBytes(sig[32:])
	return input + "." + b64.EncodeToString(sig)
}

// authenticated adds a fresh client assertion of FAPIClient's to form.
func (f *fapi) authenticated(t *testing.T, form url.Values) url.Values {
	t.Helper()
	return withAssertion(form, assertion(t, f.key, f.assertionClaims()))
}

// withAssertion adds a client assertion to form (RFC 7523 §2.2).
func withAssertion(form url.Values, assertion string) url.Values {
	form.Set("client_assertion_type", assertionType)
	form.Set("client_assertion", assertion)
	return form
}

// answer is what the peer's endpoints answer, success or error.
type answer struct {
	status               int
	header               http.Header
	body                 []byte
	RequestURI           string          `json:"request_uri"`
	ExpiresIn            int             `json:"expires_in"`
	AccessToken          string          `json:"access_token"`
	RefreshToken         string          `json:"refresh_token"`
	TokenType            string          `json:"token_type"`
	AuthorizationDetails json.RawMessage `json:"authorization_details"`
	DeviceCode           string          `json:"device_code"`
	UserCode             string          `json:"user_code"`
	Active               bool            `json:"active"`
	Cnf                  struct {
		JKT string `json:"jkt"`
	} `json:"cnf"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
}

func (a answer) String() string { return http.StatusText(a.status) + ": " + string(a.body) }

// call sends req and decodes the answer, whatever its status.
func call(t *testing.T, req *http.Request) answer {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(t, err)
	a := answer{status: resp.StatusCode, header: resp.Header, body: body}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		require.NoError(t, json.Unmarshal(body, &a), "%s", body)
	}
	return a
}

// postForm sends form to endpoint, with header added.
func postForm(t *testing.T, endpoint string, form url.Values, header http.Header) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return call(t, req)
}

// withProof returns a header carrying a DPoP proof of key for a POST to
// endpoint, or no header when key is nil.
func withProof(t *testing.T, key *dpop.Key, endpoint string) http.Header {
	t.Helper()
	if key == nil {
		return nil
	}
	proof, err := key.Proof(http.MethodPost, endpoint, time.Now(), "", "")
	require.NoError(t, err)
	return http.Header{"Dpop": {proof}}
}

// request returns the parameters of FAPIClient's authorization request
// with PKCE (S256) for verifier, which tests change to break a rule. The
// peer wants client_id among them even in a pushed request, whose client
// authenticates.
func request(verifier string) url.Values {
	return url.Values{
		"client_id":             {oidcpeer.FAPIClient},
		"response_type":         {"code"},
		"redirect_uri":          {redirectURI},
		"scope":                 {"openid offline_access read"},
		"state":                 {rand.Text()},
		"code_challenge":        {oauth2.S256ChallengeFromVerifier(verifier)},
		"code_challenge_method": {"S256"},
	}
}

// push pushes params as FAPIClient and returns the peer's answer.
func (f *fapi) push(t *testing.T, params url.Values) answer {
	t.Helper()
	return postForm(t, f.peer.PushedRequestURL(), f.authenticated(t, params), nil)
}

// pushed pushes params and returns the request_uri, failing the test when
// the peer refuses them.
func (f *fapi) pushed(t *testing.T, params url.Values) string {
	t.Helper()
	a := f.push(t, params)
	require.Equal(t, http.StatusCreated, a.status, "pushed authorization request: %s", a)
	require.NotEmpty(t, a.RequestURI, "%s", a)
	return a.RequestURI
}

// authURL is the authorization request that refers to a pushed one.
func (f *fapi) authURL(requestURI string) string {
	return f.peer.Issuer() + "/auth?" + url.Values{"client_id": {oidcpeer.FAPIClient}, "request_uri": {requestURI}}.Encode()
}

// signIn pushes params, signs the user in and returns the authorization
// response, the redirect back to redirectURI.
func (f *fapi) signIn(t *testing.T, params url.Values) url.Values {
	t.Helper()
	return f.peer.Authorize(t, f.authURL(f.pushed(t, params)), redirectURI).Query()
}

// code signs the user in with params and returns the code.
func (f *fapi) code(t *testing.T, params url.Values) string {
	t.Helper()
	back := f.signIn(t, params)
	require.NotEmpty(t, back.Get("code"), "authorization response: %v", back)
	return back.Get("code")
}

// exchange redeems code at the token endpoint as FAPIClient, with a DPoP
// proof of key unless key is nil.
func (f *fapi) exchange(t *testing.T, code, verifier string, key *dpop.Key) answer {
	t.Helper()
	tokenURL := f.peer.Issuer() + "/token"
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {redirectURI}, "code_verifier": {verifier}}
	return postForm(t, tokenURL, f.authenticated(t, form), withProof(t, key, tokenURL))
}

// tokens signs in with params and redeems the code with a proof of key,
// failing the test unless the peer issues tokens.
func (f *fapi) tokens(t *testing.T, params url.Values, verifier string, key *dpop.Key) answer {
	t.Helper()
	a := f.exchange(t, f.code(t, params), verifier, key)
	require.Equal(t, http.StatusOK, a.status, "token request: %s", a)
	return a
}

// introspect asks the peer about token, as FAPIClient.
func (f *fapi) introspect(t *testing.T, token string) answer {
	t.Helper()
	a := postForm(t, f.peer.Issuer()+"/token/introspection", f.authenticated(t, url.Values{"token": {token}}), nil)
	require.Equal(t, http.StatusOK, a.status, "introspection: %s", a)
	return a
}

// errorField finds the error oidc-provider's error page names.
var errorField = regexp.MustCompile(`<strong>error</strong>: ([a-z_]+)`)

// visit plays a new browser from authURL: see browse.
func visit(t *testing.T, authURL string) (back url.Values, pageError string) {
	t.Helper()
	return browse(t, browser(t), authURL)
}

// browser is a user's browser: it keeps the peer's cookies, so the user's
// session, and leaves redirects to browse.
func browser(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// browse follows the redirects from authURL in browser c. It returns the
// redirect back to redirectURI, unvisited, or, when the peer shows its error
// page instead, the error the page names.
func browse(t *testing.T, c *http.Client, authURL string) (back url.Values, pageError string) {
	t.Helper()
	next, err := url.Parse(authURL)
	require.NoError(t, err)
	for range 20 {
		if strings.HasPrefix(next.String(), redirectURI) {
			return next.Query(), ""
		}
		resp, err := c.Get(next.String())
		require.NoError(t, err)
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		if resp.StatusCode < 300 || resp.StatusCode > 399 {
			m := errorField.FindSubmatch(body)
			require.NotNil(t, m, "GET %s: HTTP %d without an error: %s", next, resp.StatusCode, body)
			return nil, string(m[1])
		}
		next, err = next.Parse(resp.Header.Get("Location"))
		require.NoError(t, err)
	}
	t.Fatalf("no redirect back within 20 hops from %s", authURL)
	return nil, ""
}

func newDPoPKey(t *testing.T) *dpop.Key {
	t.Helper()
	key, err := dpop.NewKey()
	require.NoError(t, err)
	return key
}

// TestFAPIMetadata checks what a FAPI peer's metadata says, which a client
// discovers the profile's rules from.
func TestFAPIMetadata(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.peer.Issuer()+"/.well-known/openid-configuration", nil)
	require.NoError(t, err)
	var meta struct {
		RequirePAR       bool     `json:"require_pushed_authorization_requests"`
		PAREndpoint      string   `json:"pushed_authorization_request_endpoint"`
		AuthMethods      []string `json:"token_endpoint_auth_methods_supported"`
		AuthAlgs         []string `json:"token_endpoint_auth_signing_alg_values_supported"`
		ResponseTypes    []string `json:"response_types_supported"`
		ChallengeMethods []string `json:"code_challenge_methods_supported"`
		Iss              bool     `json:"authorization_response_iss_parameter_supported"`
		DPoPAlgs         []string `json:"dpop_signing_alg_values_supported"`
		DetailsTypes     []string `json:"authorization_details_types_supported"`
		GrantTypes       []string `json:"grant_types_supported"`
	}
	a := call(t, req)
	require.Equal(t, http.StatusOK, a.status)
	require.NoError(t, json.Unmarshal(a.body, &meta))
	assert.True(t, meta.RequirePAR)
	assert.Equal(t, f.peer.PushedRequestURL(), meta.PAREndpoint)
	assert.Equal(t, []string{"private_key_jwt"}, meta.AuthMethods)
	assert.Equal(t, []string{"ES256", "PS256"}, meta.AuthAlgs)
	assert.Equal(t, []string{"code"}, meta.ResponseTypes)
	assert.Equal(t, []string{"S256"}, meta.ChallengeMethods)
	assert.True(t, meta.Iss)
	assert.Contains(t, meta.DPoPAlgs, "ES256")
	assert.Equal(t, []string{oidcpeer.PaymentInitiation}, meta.DetailsTypes)
	assert.Contains(t, meta.GrantTypes, deviceGrant)
}

// TestFAPIAuthorizationRequestMustBePushed: a request in the authorization
// URL is refused; the same request pushed is served.
func TestFAPIAuthorizationRequestMustBePushed(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	params := request(oauth2.GenerateVerifier())
	back, pageError := visit(t, f.peer.Issuer()+"/auth?"+params.Encode())
	require.Empty(t, pageError)
	assert.Equal(t, "invalid_request", back.Get("error"), "a request not pushed: %v", back)
	assert.Contains(t, back.Get("error_description"), "Pushed Authorization Request must be used")
	assert.Empty(t, back.Get("code"))

	back, pageError = visit(t, f.authURL(f.pushed(t, params)))
	assert.Empty(t, pageError)
	assert.NotEmpty(t, back.Get("code"), "the same request pushed: %v", back)
}

// TestFAPIClientAuthentication: only FAPIClient's private_key_jwt assertion,
// signed with its key, for the issuer, fresh and unused, authenticates it.
func TestFAPIClientAuthentication(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	other := oidcpeer.NewClientKey(t)
	other.KID = f.key.KID // the registered key's kid, another key's signature
	replayed := assertion(t, f.key, f.assertionClaims())
	first := postForm(t, f.peer.PushedRequestURL(), withAssertion(request(oauth2.GenerateVerifier()), replayed), nil)
	require.Equal(t, http.StatusCreated, first.status, "the assertion's first use: %s", first)

	tests := []struct {
		name   string
		auth   func(t *testing.T, form url.Values) (url.Values, http.Header)
		status int
		err    string // the error the peer answers, "" when it takes the request
	}{
		{"private_key_jwt for the issuer", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			return f.authenticated(t, form), nil
		}, http.StatusCreated, ""},
		// The peer holds FAPISecretClient's registration but refuses it: its
		// metadata names a method the peer does not take.
		{"the secret client, HTTP Basic", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			form.Set("client_id", oidcpeer.FAPISecretClient)
			return form, basicAuth(oidcpeer.FAPISecretClient, oidcpeer.FAPISecret)
		}, http.StatusBadRequest, "invalid_client_metadata"},
		{"the secret client, secret in the form", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			form.Set("client_id", oidcpeer.FAPISecretClient)
			form.Set("client_secret", oidcpeer.FAPISecret)
			return form, nil
		}, http.StatusBadRequest, "invalid_client_metadata"},
		{"the FAPI client with a secret", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			return form, basicAuth(oidcpeer.FAPIClient, oidcpeer.FAPISecret)
		}, http.StatusUnauthorized, "invalid_client"},
		{"assertion for the token endpoint", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			c := f.assertionClaims()
			c["aud"] = f.peer.Issuer() + "/token"
			return withAssertion(form, assertion(t, f.key, c)), nil
		}, http.StatusUnauthorized, "invalid_client"},
		{"assertion for the issuer in a list", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			c := f.assertionClaims()
			c["aud"] = []string{f.peer.Issuer()}
			return withAssertion(form, assertion(t, f.key, c)), nil
		}, http.StatusUnauthorized, "invalid_client"},
		{"expired assertion", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			c := f.assertionClaims()
			c["iat"], c["exp"] = time.Now().Add(-time.Hour).Unix(), time.Now().Add(-30*time.Minute).Unix()
			return withAssertion(form, assertion(t, f.key, c)), nil
		}, http.StatusUnauthorized, "invalid_client"},
		{"assertion signed with another key", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			return withAssertion(form, assertion(t, other, f.assertionClaims())), nil
		}, http.StatusUnauthorized, "invalid_client"},
		{"replayed assertion", func(t *testing.T, form url.Values) (url.Values, http.Header) {
			return withAssertion(form, replayed), nil
		}, http.StatusUnauthorized, "invalid_client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			form, header := tt.auth(t, request(oauth2.GenerateVerifier()))
			a := postForm(t, f.peer.PushedRequestURL(), form, header)
			assert.Equal(t, tt.status, a.status, "%s", a)
			assert.Equal(t, tt.err, a.Error, "%s", a)
			assert.Equal(t, tt.err == "", a.RequestURI != "", "request_uri: %s", a)
		})
	}
}

// basicAuth is the header of HTTP Basic client authentication (RFC 6749
// §2.3.1).
func basicAuth(id, secret string) http.Header {
	req := &http.Request{Header: http.Header{}}
	req.SetBasicAuth(url.QueryEscape(id), url.QueryEscape(secret))
	return req.Header
}

// TestFAPIRefusesRegisteringASecret: dynamic registration (RFC 7591) of a
// client that would authenticate with a secret is refused; one with
// private_key_jwt is registered.
func TestFAPIRefusesRegisteringASecret(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{Registration: true})
	register := func(metadata map[string]any) answer {
		body, err := json.Marshal(metadata)
		require.NoError(t, err)
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, f.peer.Issuer()+"/reg", strings.NewReader(string(body)))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		return call(t, req)
	}
	redirects := []string{redirectURI}

	secret := register(map[string]any{"redirect_uris": redirects, "token_endpoint_auth_method": "client_secret_basic"})
	assert.Equal(t, http.StatusBadRequest, secret.status, "%s", secret)
	assert.Equal(t, "invalid_client_metadata", secret.Error, "%s", secret)

	signed := register(map[string]any{"redirect_uris": redirects, "token_endpoint_auth_method": "private_key_jwt",
		"jwks": json.RawMessage(f.key.JWKS(t))})
	assert.Equal(t, http.StatusCreated, signed.status, "%s", signed)
}

// TestFAPIRequestURIIsSingleUse: a request_uri that signed the user in is
// refused the second time.
func TestFAPIRequestURIIsSingleUse(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	authURL := f.authURL(f.pushed(t, request(oauth2.GenerateVerifier())))
	back, pageError := visit(t, authURL)
	require.Empty(t, pageError)
	require.NotEmpty(t, back.Get("code"), "first use: %v", back)

	back, pageError = visit(t, authURL)
	assert.Equal(t, "invalid_request_uri", pageError, "second use: %v", back)
	assert.Empty(t, back.Get("code"))
}

// TestFAPIRequestURIExpires: a pushed request whose lifetime ended is
// refused; another pushed with it is served.
func TestFAPIRequestURIExpires(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	expired := f.pushed(t, request(oauth2.GenerateVerifier()))
	live := f.pushed(t, request(oauth2.GenerateVerifier()))
	f.peer.ExpirePushedRequest(t, expired)

	back, pageError := visit(t, f.authURL(expired))
	assert.Equal(t, "invalid_request_uri", pageError, "expired: %v", back)
	back, pageError = visit(t, f.authURL(live))
	assert.Empty(t, pageError)
	assert.NotEmpty(t, back.Get("code"), "live: %v", back)
}

// TestFAPITokensAreDPoPBound: a token request without a DPoP proof is
// refused, the same with one is answered with a DPoP-bound token, and that
// token is refused as a bearer token.
func TestFAPITokensAreDPoPBound(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{UserinfoTokens: true})
	key := newDPoPKey(t)
	verifier := oauth2.GenerateVerifier()
	code := f.code(t, request(verifier))

	bare := f.exchange(t, code, verifier, nil)
	assert.Equal(t, http.StatusBadRequest, bare.status, "%s", bare)
	assert.Equal(t, "invalid_grant", bare.Error, "%s", bare)
	assert.Empty(t, bare.AccessToken)

	bound := f.exchange(t, code, verifier, key)
	require.Equal(t, http.StatusOK, bound.status, "the same code with a proof: %s", bound)
	assert.Equal(t, "DPoP", bound.TokenType)
	assert.Equal(t, key.Thumbprint(), f.introspect(t, bound.AccessToken).Cnf.JKT, "cnf.jkt")
	assert.Equal(t, key.Thumbprint(), f.peer.BoundToWithKey(t, bound.AccessToken, f.key), "the harness's introspection")
	assert.True(t, f.peer.IntrospectWithKey(t, bound.RefreshToken, f.key))
	assert.False(t, f.peer.IntrospectWithKey(t, "not-a-token", f.key))

	t.Run("userinfo refuses it as a bearer token", func(t *testing.T) {
		assert.Equal(t, http.StatusUnauthorized, f.userinfo(t, "Bearer", bound.AccessToken, nil).status)
		assert.Equal(t, http.StatusOK, f.userinfo(t, "DPoP", bound.AccessToken, key).status)
	})
	t.Run("refresh without a proof", func(t *testing.T) {
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {bound.RefreshToken}}
		tokenURL := f.peer.Issuer() + "/token"
		a := postForm(t, tokenURL, f.authenticated(t, form), nil)
		assert.Equal(t, "invalid_grant", a.Error, "%s", a)
		a = postForm(t, tokenURL, f.authenticated(t, form), withProof(t, key, tokenURL))
		assert.Equal(t, http.StatusOK, a.status, "%s", a)
		assert.Equal(t, "DPoP", a.TokenType)
	})
}

// userinfo calls the peer's userinfo endpoint with token in the given
// Authorization scheme and a proof of key unless key is nil.
func (f *fapi) userinfo(t *testing.T, scheme, token string, key *dpop.Key) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, f.peer.UserinfoURL(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", scheme+" "+token)
	if key != nil {
		proof, err := key.Proof(http.MethodGet, f.peer.UserinfoURL(), time.Now(), token, "")
		require.NoError(t, err)
		req.Header.Set("DPoP", proof)
	}
	return call(t, req)
}

// TestFAPIAuthorizationResponseCarriesIss: the authorization response names
// the issuer (RFC 9207), with the code and with an error.
func TestFAPIAuthorizationResponseCarriesIss(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	params := request(oauth2.GenerateVerifier())
	back := f.signIn(t, params)
	assert.NotEmpty(t, back.Get("code"))
	assert.Equal(t, params.Get("state"), back.Get("state"))
	assert.Equal(t, f.peer.Issuer(), back.Get("iss"))

	params.Set("login_hint", "deny")
	back = f.signIn(t, params)
	assert.Equal(t, "access_denied", back.Get("error"))
	assert.Equal(t, f.peer.Issuer(), back.Get("iss"))
}

// TestFAPIRequiresPKCE: a request without a code challenge, or with the
// plain method, is refused; one with S256 is taken.
func TestFAPIRequiresPKCE(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	verifier := oauth2.GenerateVerifier()
	tests := []struct {
		name   string
		change func(url.Values)
		status int
	}{
		{"S256", func(url.Values) {}, http.StatusCreated},
		{"no code_challenge", func(p url.Values) { p.Del("code_challenge"); p.Del("code_challenge_method") }, http.StatusBadRequest},
		{"plain", func(p url.Values) { p.Set("code_challenge", verifier); p.Set("code_challenge_method", "plain") }, http.StatusBadRequest},
		{"plain by default", func(p url.Values) { p.Set("code_challenge", verifier); p.Del("code_challenge_method") }, http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			params := request(verifier)
			tt.change(params)
			a := f.push(t, params)
			assert.Equal(t, tt.status, a.status, "%s", a)
			if tt.status == http.StatusBadRequest {
				assert.Equal(t, "invalid_request", a.Error, "%s", a)
			}
		})
	}
}

// TestFAPIResponseTypeCodeOnly: a request for any response type but code is
// refused.
func TestFAPIResponseTypeCodeOnly(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	for _, responseType := range []string{"code id_token", "token", "id_token", "none"} {
		t.Run(responseType, func(t *testing.T) {
			t.Parallel()
			params := request(oauth2.GenerateVerifier())
			params.Set("response_type", responseType)
			params.Set("nonce", rand.Text())
			a := f.push(t, params)
			assert.Equal(t, http.StatusBadRequest, a.status, "%s", a)
			assert.Equal(t, "unsupported_response_type", a.Error, "%s", a)
		})
	}
}

// TestFAPIRedirectURI: redirect_uri may not be left out (FAPIClient has
// several, so this holds outside the profile too), must be registered, path
// and scheme included, and a loopback one takes any port (RFC 8252 §7.3).
func TestFAPIRedirectURI(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	tests := []struct {
		name, redirect string
		status         int
	}{
		{"registered", redirectURI, http.StatusCreated},
		{"another loopback port", "http://127.0.0.1:8/api/v1/oauth/callback", http.StatusCreated},
		{"left out", "", http.StatusBadRequest},
		{"unregistered path", "http://127.0.0.1:9/api/v1/oauth/callback/x", http.StatusBadRequest},
		{"https on loopback", "https://127.0.0.1:9/api/v1/oauth/callback", http.StatusBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			params := request(oauth2.GenerateVerifier())
			params.Set("redirect_uri", tt.redirect)
			if tt.redirect == "" {
				params.Del("redirect_uri")
			}
			a := f.push(t, params)
			assert.Equal(t, tt.status, a.status, "%s", a)
			if tt.status == http.StatusBadRequest {
				assert.Equal(t, "invalid_request", a.Error, "%s", a)
			}
		})
	}
}

// TestFAPIAuthorizationDetails: authorization details (RFC 9396) pushed with
// the request are granted and come back in the token response, in the
// refresh token's and in introspection; a type the peer does not know is
// refused.
func TestFAPIAuthorizationDetails(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	key := newDPoPKey(t)
	details := `[{"type":"payment_initiation","instructedAmount":{"currency":"EUR","amount":"123.50"},` +
		`"creditorName":"Merchant A","actions":["initiate"]}]`

	t.Run("granted", func(t *testing.T) {
		t.Parallel()
		verifier := oauth2.GenerateVerifier()
		params := request(verifier)
		params.Set("authorization_details", details)
		tokens := f.tokens(t, params, verifier, key)
		assert.JSONEq(t, details, string(tokens.AuthorizationDetails), "token response")
		assert.JSONEq(t, details, string(f.introspect(t, tokens.AccessToken).AuthorizationDetails), "introspection")

		tokenURL := f.peer.Issuer() + "/token"
		form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tokens.RefreshToken}}
		refreshed := postForm(t, tokenURL, f.authenticated(t, form), withProof(t, key, tokenURL))
		require.Equal(t, http.StatusOK, refreshed.status, "%s", refreshed)
		assert.JSONEq(t, details, string(refreshed.AuthorizationDetails), "refresh token response")
	})
	t.Run("none asked, none granted", func(t *testing.T) {
		t.Parallel()
		verifier := oauth2.GenerateVerifier()
		tokens := f.tokens(t, request(verifier), verifier, key)
		assert.Empty(t, tokens.AuthorizationDetails)
	})
	t.Run("one session, each request its own", func(t *testing.T) {
		t.Parallel()
		c := browser(t)
		other := `[{"type":"payment_initiation","creditorName":"Merchant B"}]`
		for _, asked := range []string{details, other, ""} {
			verifier := oauth2.GenerateVerifier()
			params := request(verifier)
			if asked != "" {
				params.Set("authorization_details", asked)
			}
			back, pageError := browse(t, c, f.authURL(f.pushed(t, params)))
			require.Empty(t, pageError)
			tokens := f.exchange(t, back.Get("code"), verifier, key)
			require.Equal(t, http.StatusOK, tokens.status, "%s", tokens)
			if asked == "" {
				assert.Empty(t, tokens.AuthorizationDetails, "none asked")
				continue
			}
			assert.JSONEq(t, asked, string(tokens.AuthorizationDetails))
		}
	})
	t.Run("unknown type", func(t *testing.T) {
		t.Parallel()
		params := request(oauth2.GenerateVerifier())
		params.Set("authorization_details", `[{"type":"account_information"}]`)
		a := f.push(t, params)
		assert.Equal(t, http.StatusBadRequest, a.status, "%s", a)
		assert.Equal(t, "invalid_authorization_details", a.Error, "%s", a)
	})
}

// TestFAPIDeviceGrant: FAPIClient uses the device grant (RFC 8628) with
// private_key_jwt, and its polls too need a DPoP proof.
func TestFAPIDeviceGrant(t *testing.T) {
	t.Parallel()
	f := startFAPI(t, oidcpeer.Options{})
	key := newDPoPKey(t)
	authorize := func() answer {
		a := postForm(t, f.peer.DeviceAuthURL(), f.authenticated(t, url.Values{"scope": {"openid offline_access read"}}), nil)
		require.Equal(t, http.StatusOK, a.status, "device authorization: %s", a)
		f.peer.ApproveDevice(t, a.UserCode)
		return a
	}
	tokenURL := f.peer.Issuer() + "/token"
	poll := func(deviceCode string, key *dpop.Key) answer {
		form := url.Values{"grant_type": {deviceGrant}, "device_code": {deviceCode}}
		return postForm(t, tokenURL, f.authenticated(t, form), withProof(t, key, tokenURL))
	}
	// Two approved codes, each polled once: the peer paces the polls of one code.
	bare, bound := authorize(), authorize()

	a := poll(bare.DeviceCode, nil)
	assert.Equal(t, http.StatusBadRequest, a.status, "%s", a)
	assert.Equal(t, "invalid_grant", a.Error, "without a proof: %s", a)
	a = poll(bound.DeviceCode, key)
	require.Equal(t, http.StatusOK, a.status, "with a proof: %s", a)
	assert.Equal(t, "DPoP", a.TokenType)
	assert.Equal(t, key.Thumbprint(), f.introspect(t, a.AccessToken).Cnf.JKT)
}
