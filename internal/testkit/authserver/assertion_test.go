package authserver_test

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/clientauth"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"golang.org/x/oauth2"
)

// jwtClientID is the client that authenticates with private_key_jwt.
const jwtClientID = "jwt-app"

// jwtServer runs a server on a clock of its own, with the default clients and
// jwtClientID, whose public key is pub.
func jwtServer(t *testing.T, opts authserver.Options, pub crypto.PublicKey) (*authserver.Server, *fakeclock.Clock) {
	t.Helper()
	clock := newClock()
	opts.Now = clock.Now
	jwt := authserver.DefaultClients()[0]
	jwt.ID, jwt.Secret, jwt.PublicKey = jwtClientID, "", pub
	opts.Clients = append(authserver.DefaultClients(), jwt)
	return start(t, opts), clock
}

func newECKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signJWT signs claims with key and alg, and header fields besides alg and
// typ: the test's own signer, so that the server is checked against more
// than the library's.
func signJWT(t testing.TB, key crypto.Signer, alg string, claims map[string]any) string {
	t.Helper()
	h, _ := json.Marshal(map[string]any{"alg": alg, "typ": "JWT"})
	c, _ := json.Marshal(claims)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	digest := sha256.Sum256([]byte(input))
	var sig []byte
	var err error
	switch k := key.(type) {
	case *ecdsa.PrivateKey:
		r, s, e := ecdsa.Sign(rand.Reader, k, digest[:])
		sig, err = append(r.FillBytes(make([]byte, 32)), s.FillBytes(make([]byte, 32))...), e
	case *rsa.PrivateKey:
		if alg == "RS256" {
			sig, err = rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, digest[:])
		} else {
			sig, err = rsa.SignPSS(rand.Reader, k, crypto.SHA256, digest[:], &rsa.PSSOptions{SaltLength: rsa.PSSSaltLengthEqualsHash})
		}
	case ed25519.PrivateKey:
		sig = ed25519.Sign(k, []byte(input))
	}
	if err != nil {
		t.Fatal(err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// goodClaims are the claims of an assertion the server takes at now.
func goodClaims(srv *authserver.Server, now time.Time) map[string]any {
	return map[string]any{"iss": jwtClientID, "sub": jwtClientID, "aud": srv.URL(),
		"iat": now.Unix(), "exp": now.Add(time.Minute).Unix(), "jti": rand.Text()}
}

// asserted is form with the client authenticated by assertion.
func asserted(form url.Values, assertion string) url.Values {
	form = cloneValues(form)
	form.Set("client_assertion_type", authserver.AssertionType)
	form.Set("client_assertion", assertion)
	return form
}

// unknownCode is a token request whose client authentication is checked
// before its code: invalid_grant means the client was authenticated.
var unknownCode = url.Values{"grant_type": {"authorization_code"}, "code": {"unknown"}}

// A client with a key is authenticated by an assertion it signed for the
// server's issuer, and refused for anything else: another audience (the
// token endpoint, the issuer with a slash, a list), another issuer or
// subject, an expired assertion, one good for longer than five minutes or
// issued in the future, one without jti, iat or exp, another key's signature,
// an algorithm the key does not sign with, a wrong type, another client_id.
func TestClientAssertionChecks(t *testing.T) {
	t.Parallel()
	key := newECKey(t)
	tests := []struct {
		name   string
		change func(c map[string]any, srv *authserver.Server, now time.Time)
		key    crypto.Signer
		alg    string
		form   url.Values
		ok     bool
	}{
		{name: "good", ok: true},
		{name: "lives five minutes", change: func(c map[string]any, _ *authserver.Server, now time.Time) {
			c["exp"] = now.Add(authserver.MaxAssertionLifetime).Unix()
		}, ok: true},
		{name: "aud the token endpoint", change: func(c map[string]any, srv *authserver.Server, _ time.Time) { c["aud"] = srv.TokenURL() }},
		{name: "aud with a slash", change: func(c map[string]any, srv *authserver.Server, _ time.Time) { c["aud"] = srv.URL() + "/" }},
		{name: "aud a list", change: func(c map[string]any, srv *authserver.Server, _ time.Time) { c["aud"] = []string{srv.URL()} }},
		{name: "no aud", change: func(c map[string]any, _ *authserver.Server, _ time.Time) { delete(c, "aud") }},
		{name: "iss another client", change: func(c map[string]any, _ *authserver.Server, _ time.Time) {
			c["iss"], c["sub"] = authserver.DefaultClientID, authserver.DefaultClientID
		}},
		{name: "sub another", change: func(c map[string]any, _ *authserver.Server, _ time.Time) { c["sub"] = "someone" }},
		{name: "expired", change: func(c map[string]any, _ *authserver.Server, now time.Time) {
			c["iat"], c["exp"] = now.Add(-time.Minute).Unix(), now.Unix()
		}},
		{name: "lives six minutes", change: func(c map[string]any, _ *authserver.Server, now time.Time) {
			c["exp"] = now.Add(authserver.MaxAssertionLifetime + time.Minute).Unix()
		}},
		{name: "issued in the future", change: func(c map[string]any, _ *authserver.Server, now time.Time) {
			c["iat"], c["exp"] = now.Add(time.Hour).Unix(), now.Add(time.Hour+time.Minute).Unix()
		}},
		{name: "no iat", change: func(c map[string]any, _ *authserver.Server, _ time.Time) { delete(c, "iat") }},
		{name: "no exp", change: func(c map[string]any, _ *authserver.Server, _ time.Time) { delete(c, "exp") }},
		{name: "no jti", change: func(c map[string]any, _ *authserver.Server, _ time.Time) { delete(c, "jti") }},
		{name: "another key", key: newECKey(t)},
		{name: "alg not the key's", alg: "RS256"},
		{name: "alg none", alg: "none"},
		{name: "wrong type", form: url.Values{"client_assertion_type": {"urn:ietf:params:oauth:client-assertion-type:saml2-bearer"}}},
		{name: "another client_id", form: url.Values{"client_id": {authserver.DefaultClientID}}},
		{name: "its own client_id", form: url.Values{"client_id": {jwtClientID}}, ok: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, clock := jwtServer(t, authserver.Options{}, key.Public())
			claims := goodClaims(srv, clock.Now())
			if tt.change != nil {
				tt.change(claims, srv, clock.Now())
			}
			signer, alg := crypto.Signer(key), "ES256"
			if tt.key != nil {
				signer = tt.key
			}
			if tt.alg != "" {
				alg = tt.alg
			}
			form := asserted(unknownCode, signJWT(t, signer, alg, claims))
			for k, v := range tt.form {
				form[k] = v
			}
			a := post(t, srv.TokenURL(), clientAuth{}, form)
			st := srv.Stats()
			if tt.ok {
				wantError(t, a, http.StatusBadRequest, "invalid_grant")
				if st.ClientAssertionsAccepted != 1 || st.ClientAssertionsRefused != 0 {
					t.Errorf("stats %+v", st)
				}
				return
			}
			wantError(t, a, http.StatusUnauthorized, "invalid_client")
			if st.ClientAssertionsAccepted != 0 || st.ClientAssertionsRefused != 1 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// An assertion is accepted once: its jti is spent, whether the same
// assertion comes again or a new one with its jti, until it expires.
func TestClientAssertionIsSingleUse(t *testing.T) {
	t.Parallel()
	key := newECKey(t)
	srv, clock := jwtServer(t, authserver.Options{}, key.Public())
	claims := goodClaims(srv, clock.Now())
	first := signJWT(t, key, "ES256", claims)
	wantError(t, post(t, srv.TokenURL(), clientAuth{}, asserted(unknownCode, first)), http.StatusBadRequest, "invalid_grant")
	wantError(t, post(t, srv.TokenURL(), clientAuth{}, asserted(unknownCode, first)), http.StatusUnauthorized, "invalid_client")
	clock.Advance(time.Second)
	claims["iat"] = clock.Now().Unix()
	again := signJWT(t, key, "ES256", claims) // the same jti, signed anew
	wantError(t, post(t, srv.TokenURL(), clientAuth{}, asserted(unknownCode, again)), http.StatusUnauthorized, "invalid_client")
	fresh := goodClaims(srv, clock.Now())
	wantError(t, post(t, srv.TokenURL(), clientAuth{}, asserted(unknownCode, signJWT(t, key, "ES256", fresh))), http.StatusBadRequest, "invalid_grant")
	if st := srv.Stats(); st.ClientAssertionsAccepted != 2 || st.ClientAssertionReplays != 2 || st.ClientAssertionsRefused != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A client with a key authenticates with it alone: its secret-less
// client_id, a secret or a Basic header is refused, and so is an assertion
// beside a secret or a Basic header, or from a client without a key.
func TestClientAssertionIsTheOnlyMethod(t *testing.T) {
	t.Parallel()
	key := newECKey(t)
	srv, clock := jwtServer(t, authserver.Options{}, key.Public())
	for name, auth := range map[string]clientAuth{
		"client_id alone": {id: jwtClientID},
		"a secret":        {id: jwtClientID, secret: "guess"},
		"Basic":           {id: jwtClientID, secret: "guess", basic: true},
		"Basic, empty":    {id: jwtClientID, basic: true},
	} {
		if a := post(t, srv.TokenURL(), auth, unknownCode); a.Status != http.StatusUnauthorized || a.Error != "invalid_client" {
			t.Errorf("%s: %d %v, want invalid_client", name, a.Status, a.Raw)
		}
	}
	good := func() string { return signJWT(t, key, "ES256", goodClaims(srv, clock.Now())) }
	withSecret := asserted(unknownCode, good())
	withSecret.Set("client_secret", "guess")
	wantError(t, post(t, srv.TokenURL(), clientAuth{}, withSecret), http.StatusBadRequest, "invalid_request")
	wantError(t, post(t, srv.TokenURL(), clientAuth{id: jwtClientID, secret: "guess", basic: true}, asserted(unknownCode, good())),
		http.StatusBadRequest, "invalid_request")
	secretClient := goodClaims(srv, clock.Now())
	secretClient["iss"], secretClient["sub"] = authserver.DefaultClientID, authserver.DefaultClientID
	wantError(t, post(t, srv.TokenURL(), clientAuth{}, asserted(unknownCode, signJWT(t, key, "ES256", secretClient))),
		http.StatusUnauthorized, "invalid_client")
	if st := srv.Stats(); st.ClientAssertionsAccepted != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// A client with a key signs in, refreshes, revokes, pushes a request and
// uses the device grant with the library's signer, for each algorithm: every
// endpoint that authenticates a client takes its assertions.
func TestClientAssertionAtEveryEndpoint(t *testing.T) {
	t.Parallel()
	rs, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, ed, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		alg string
		key crypto.Signer
	}{{"ES256", newECKey(t)}, {"PS256", rs}, {"RS256", rs}, {"EdDSA", ed}} {
		t.Run(tt.alg, func(t *testing.T) {
			t.Parallel()
			srv, clock := jwtServer(t, authserver.Options{PAR: true, DeviceInterval: time.Second}, tt.key.Public())
			s, err := clientauth.NewSigner(clientauth.Config{ClientID: jwtClientID, Audience: srv.URL(), Key: tt.key, Alg: tt.alg, Now: clock.Now})
			if err != nil {
				t.Fatal(err)
			}
			send := func(endpoint string, form url.Values) answer {
				t.Helper()
				form = cloneValues(form)
				if err := s.Authenticate(form); err != nil {
					t.Fatal(err)
				}
				return post(t, endpoint, clientAuth{}, form)
			}
			verifier := oauth2.GenerateVerifier()
			q := authParams(verifier)
			q.Set("client_id", jwtClientID)
			got := redirected(t, srv, pushedQuery(jwtClientID, requestURI(t, send(srv.PARURL(), q))))
			tok := send(srv.TokenURL(), url.Values{"grant_type": {"authorization_code"}, "code": {got.Get("code")},
				"redirect_uri": {callback}, "code_verifier": {verifier}})
			wantStatus(t, tok, http.StatusOK)
			wantStatus(t, send(srv.TokenURL(), url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tok.RefreshToken}}), http.StatusOK)
			wantStatus(t, send(srv.RevokeURL(), url.Values{"token": {tok.RefreshToken}}), http.StatusOK)
			d := deviceAnswer{answer: send(srv.DeviceAuthorizationURL(), url.Values{"scope": {"read"}})}
			wantStatus(t, d.answer, http.StatusOK)
			raw, _ := json.Marshal(d.Raw)
			_ = json.Unmarshal(raw, &d)
			if err := srv.ApproveDevice(d.UserCode, ""); err != nil {
				t.Fatal(err)
			}
			wantStatus(t, send(srv.TokenURL(), url.Values{"grant_type": {authserver.GrantDeviceCode}, "device_code": {d.DeviceCode}}), http.StatusOK)
			if st := srv.Stats(); st.ClientAssertionsAccepted != 6 || st.ClientAssertionsRefused+st.ClientAssertionReplays != 0 || st.Revocations != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// A client with a public key has no secret and is not public, and its key
// is one an assertion is verified with.
func TestClientWithAKeyIsChecked(t *testing.T) {
	t.Parallel()
	p384, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	pub := newECKey(t).Public()
	for name, c := range map[string]authserver.Client{
		"with a secret": {ID: "a", Secret: "s", PublicKey: pub},
		"public":        {ID: "a", Public: true, PublicKey: pub},
		"P-384":         {ID: "a", PublicKey: p384.Public()},
		"a private key": {ID: "a", PublicKey: p384},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			defer func() {
				if recover() == nil {
					t.Fatal("New accepted a bad client")
				}
			}()
			authserver.New(authserver.Options{Clients: []authserver.Client{c}})
		})
	}
}

// The metadata lists private_key_jwt and the algorithms it takes.
func TestClientAssertionMetadata(t *testing.T) {
	t.Parallel()
	md := getMetadata(t, start(t, authserver.Options{}))
	methods, _ := md["token_endpoint_auth_methods_supported"].([]any)
	algs, _ := md["token_endpoint_auth_signing_alg_values_supported"].([]any)
	found := false
	for _, m := range methods {
		found = found || m == "private_key_jwt"
	}
	if !found || len(algs) != 4 {
		t.Fatalf("methods %v algs %v", methods, algs)
	}
}
