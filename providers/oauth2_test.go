package providers

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/outbound"
)

func TestNewOAuth2RejectsBadConfig(t *testing.T) {
	t.Parallel()
	good := Config{ID: "p", AuthURL: "https://p.example/a", TokenURL: "https://p.example/t"}
	tests := []struct {
		name string
		mod  func(*Config, *Credentials)
	}{
		{"empty ID", func(c *Config, _ *Credentials) { c.ID = "" }},
		{"relative auth URL", func(c *Config, _ *Credentials) { c.AuthURL = "/authorize" }},
		{"token URL scheme", func(c *Config, _ *Credentials) { c.TokenURL = "ftp://p.example/t" }},
		{"revocation URL fragment", func(c *Config, _ *Credentials) { c.RevocationURL = "https://p.example/r#x" }},
		{"unknown auth style", func(c *Config, _ *Credentials) { c.AuthStyle = "cookie" }},
		{"unknown PKCE mode", func(c *Config, _ *Credentials) { c.PKCE = "maybe" }},
		{"user token without field", func(c *Config, _ *Credentials) { c.UserToken = true }},
		{"empty client ID", func(_ *Config, cr *Credentials) { cr.ClientID = "" }},
		{"relative redirect", func(_ *Config, cr *Credentials) { cr.RedirectURL = "/cb" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg, cr := cloneConfig(good), testCreds
			tt.mod(&cfg, &cr)
			_, err := NewOAuth2(cfg, cr)
			if !errors.Is(err, ErrInvalidConfig) || !errors.Is(err, oauthflow.ErrInvalidArgument) {
				t.Fatalf("err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := NewOAuth2(good, testCreds); err != nil {
		t.Fatalf("good config: %v", err)
	}
}

func TestNewOAuth2Defaults(t *testing.T) {
	t.Parallel()
	p, err := NewOAuth2(Config{ID: "p", AuthURL: "https://p.example/a", TokenURL: "https://p.example/t"}, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	if p.client == nil || p.client.Timeout != DefaultTimeout || p.client == http.DefaultClient || p.client.Transport != outbound.Client(0).Transport {
		t.Errorf("default client = %+v, want a client of its own over the pooled transport with a %v timeout", p.client, DefaultTimeout)
	}
	if p.DisplayName() != "p" || !p.SupportsPKCE() || p.RequiresPKCE() || p.Issuer() != "" || p.CanRevoke() {
		t.Errorf("defaults: name %q pkce %v/%v issuer %q revoke %v", p.DisplayName(), p.SupportsPKCE(), p.RequiresPKCE(), p.Issuer(), p.CanRevoke())
	}
	q, _ := NewOAuth2(Config{ID: "q", AuthURL: "https://p.example/a", TokenURL: "https://p.example/t"}, testCreds)
	if p.client == q.client {
		t.Error("two providers share one default client")
	}
}

func TestPKCEModes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode               PKCE
		supports, requires bool
	}{
		{PKCEDefault, true, false},
		{PKCESupported, true, false},
		{PKCERequired, true, true},
		{PKCEUnsupported, false, false},
	}
	for _, tt := range tests {
		p, err := NewOAuth2(Config{ID: "p", AuthURL: "https://p.example/a", TokenURL: "https://p.example/t", PKCE: tt.mode}, testCreds)
		if err != nil {
			t.Fatal(err)
		}
		if p.SupportsPKCE() != tt.supports || p.RequiresPKCE() != tt.requires {
			t.Errorf("%q: supports %v requires %v, want %v %v", tt.mode, p.SupportsPKCE(), p.RequiresPKCE(), tt.supports, tt.requires)
		}
	}
}

func authQuery(t *testing.T, raw string) url.Values {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u.Query()
}

func TestBuildAuthURL(t *testing.T) {
	t.Parallel()
	base := Config{ID: "p", AuthURL: "https://p.example/authorize?tenant=x", TokenURL: "https://p.example/t", Scopes: []string{"a", "b"}}
	verifier := oauth2.GenerateVerifier()
	tests := []struct {
		name   string
		mod    func(*Config)
		scopes []string
		opts   []oauth2.AuthCodeOption
		want   map[string]string // "" value: must be absent
	}{
		{"default scopes", nil, nil, nil, map[string]string{"scope": "a b", "code_challenge": ""}},
		{"requested scopes", nil, []string{"x"}, nil, map[string]string{"scope": "x"}},
		{"comma separator", func(c *Config) { c.ScopeSeparator = "," }, []string{"x", "y"}, nil, map[string]string{"scope": "x,y"}},
		{"no scopes at all", func(c *Config) { c.Scopes = nil }, nil, nil, map[string]string{"scope": ""}},
		{"auth params", func(c *Config) { c.AuthParams = map[string]string{"prompt": "consent"} }, nil, nil, map[string]string{"prompt": "consent"}},
		{"caller overrides auth params", func(c *Config) { c.AuthParams = map[string]string{"prompt": "consent"} }, nil,
			[]oauth2.AuthCodeOption{oauth2.SetAuthURLParam("prompt", "none")}, map[string]string{"prompt": "none"}},
		{"caller PKCE", nil, nil, []oauth2.AuthCodeOption{oauth2.S256ChallengeOption(verifier)},
			map[string]string{"code_challenge": oauth2.S256ChallengeFromVerifier(verifier), "code_challenge_method": "S256"}},
		{"fixed fields", nil, nil, nil, map[string]string{"client_id": "client-1", "redirect_uri": "https://app.example/cb", "response_type": "code", "state": "st", "tenant": "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := cloneConfig(base)
			if tt.mod != nil {
				tt.mod(&cfg)
			}
			p, err := NewOAuth2(cfg, testCreds)
			if err != nil {
				t.Fatal(err)
			}
			q := authQuery(t, p.BuildAuthURL(tt.scopes, "st", tt.opts...))
			for k, want := range tt.want {
				if got, ok := q[k]; want == "" && ok || want != "" && (len(got) != 1 || got[0] != want) {
					t.Errorf("%s = %q, want %q", k, got, want)
				}
			}
		})
	}
}

func TestExchangeCodeAnswers(t *testing.T) {
	t.Parallel()
	form := "application/x-www-form-urlencoded; charset=utf-8"
	tests := []struct {
		name  string
		reply reply
		want  oauthflow.TokenSet
	}{
		{"rfc 6749", jsonReply(200, `{"access_token":"at","token_type":"Bearer","refresh_token":"rt","expires_in":3600,"scope":"a b"}`),
			oauthflow.TokenSet{AccessToken: "at", RefreshToken: "rt", ExpiresIn: 3600, Scope: "a b"}},
		{"lower-case bearer", jsonReply(200, `{"access_token":"at","token_type":"bearer"}`), oauthflow.TokenSet{AccessToken: "at"}},
		{"upper-case bearer", jsonReply(200, `{"access_token":"at","token_type":"BEARER"}`), oauthflow.TokenSet{AccessToken: "at"}},
		{"no token_type", jsonReply(200, `{"access_token":"at"}`), oauthflow.TokenSet{AccessToken: "at"}},
		{"expires_in string", jsonReply(200, `{"access_token":"at","token_type":"bearer","expires_in":"7200"}`), oauthflow.TokenSet{AccessToken: "at", ExpiresIn: 7200}},
		{"expires_in float", jsonReply(200, `{"access_token":"at","expires_in":3599.0}`), oauthflow.TokenSet{AccessToken: "at", ExpiresIn: 3599}},
		{"expires_in null", jsonReply(200, `{"access_token":"at","expires_in":null}`), oauthflow.TokenSet{AccessToken: "at"}},
		{"expires_in negative", jsonReply(200, `{"access_token":"at","expires_in":-5}`), oauthflow.TokenSet{AccessToken: "at"}},
		{"scope array", jsonReply(200, `{"access_token":"at","scope":["a","b"]}`), oauthflow.TokenSet{AccessToken: "at", Scope: "a b"}},
		{"extra fields", jsonReply(200, `{"access_token":"at","id_token":"x.y.z","info":{"n":1}}`), oauthflow.TokenSet{AccessToken: "at"}},
		{"form answer", reply{200, form, "access_token=at&token_type=bearer&scope=a%2Cb&expires_in=60"}, oauthflow.TokenSet{AccessToken: "at", ExpiresIn: 60, Scope: "a,b"}},
		{"text/plain answer", reply{200, "text/plain", "access_token=at"}, oauthflow.TokenSet{AccessToken: "at"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.reply)
			got, err := f.generic(t, nil).ExchangeCode(context.Background(), "code-1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestExchangeCodeFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name              string
		reply             reply
		status            int
		code              string
		sentinel          error
		dead, transient   bool
		wantRetrieveError bool
	}{
		{"invalid_grant 400", jsonReply(400, `{"error":"invalid_grant","error_description":"code used","error_uri":"https://p.example/e"}`), 400, "invalid_grant", nil, true, false, true},
		{"200 with error", jsonReply(200, `{"error":"bad_verification_code","error_description":"expired"}`), 200, "bad_verification_code", nil, false, false, true},
		{"200 form with error", reply{200, "application/x-www-form-urlencoded", "error=bad_verification_code&error_description=x"}, 200, "bad_verification_code", nil, false, false, true},
		{"error object", jsonReply(400, `{"error":{"message":"nope"}}`), 400, `{"message":"nope"}`, nil, false, false, true},
		{"no access_token", jsonReply(200, `{"token_type":"bearer"}`), 200, "", ErrNoAccessToken, false, false, false},
		{"empty access_token", jsonReply(200, `{"access_token":""}`), 200, "", ErrNoAccessToken, false, false, false},
		{"mac token", jsonReply(200, `{"access_token":"at","token_type":"mac"}`), 200, "", ErrTokenType, false, false, false},
		{"not JSON", reply{200, "text/html", "<html>hi</html>"}, 200, "", ErrMalformedResponse, false, false, false},
		{"bad expires_in", jsonReply(200, `{"access_token":"at","expires_in":"soon"}`), 200, "", ErrMalformedResponse, false, false, false},
		{"server error page", reply{502, "text/html", "<html>bad gateway</html>"}, 502, "", nil, false, true, true},
		{"rate limited", jsonReply(429, `{}`), 429, "", nil, false, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.reply)
			ts, err := f.generic(t, nil).ExchangeCode(context.Background(), "code-1")
			var pe *oauthflow.ProviderError
			if ts != nil || !errors.As(err, &pe) {
				t.Fatalf("got %+v, %v; want a *ProviderError", ts, err)
			}
			if pe.ProviderID != "fake" || pe.StatusCode != tt.status || pe.Code != tt.code {
				t.Errorf("error = %+v, want status %d code %q", pe, tt.status, tt.code)
			}
			if tt.sentinel != nil && !errors.Is(err, tt.sentinel) {
				t.Errorf("err = %v, want %v", err, tt.sentinel)
			}
			if oauthflow.IsGrantDead(err) != tt.dead || oauthflow.IsTransient(err) != tt.transient {
				t.Errorf("dead %v transient %v, want %v %v", oauthflow.IsGrantDead(err), oauthflow.IsTransient(err), tt.dead, tt.transient)
			}
			var re *oauth2.RetrieveError
			if errors.As(err, &re) != tt.wantRetrieveError {
				t.Errorf("errors.As(*oauth2.RetrieveError) = %v, want %v", !tt.wantRetrieveError, tt.wantRetrieveError)
			}
		})
	}
}

func TestExchangeCodeDescriptionKept(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(400, `{"error":"invalid_grant","error_description":"code used","error_uri":"https://p.example/e"}`))
	_, err := f.generic(t, nil).ExchangeCode(context.Background(), "c")
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.Description != "code used" || pe.URI != "https://p.example/e" {
		t.Fatalf("err = %#v", err)
	}
}

func TestExchangeCodeNoAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{}`))
	p := f.generic(t, nil)
	f.srv.Close()
	_, err := p.ExchangeCode(context.Background(), "c")
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 0 || pe.Err == nil || !oauthflow.IsTransient(err) {
		t.Fatalf("err = %#v, want a transient ProviderError without status", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = newFake(t, jsonReply(200, `{"access_token":"at"}`)).generic(t, nil).ExchangeCode(ctx, "c")
	if !errors.As(err, &pe) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: err = %v", err)
	}
}

func TestExchangeCodeRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"at"}`))
	if _, err := f.generic(t, nil).ExchangeCode(context.Background(), "code-1", oauth2.VerifierOption("ver-1")); err != nil {
		t.Fatal(err)
	}
	got := f.last(t)
	want := url.Values{"grant_type": {"authorization_code"}, "code": {"code-1"}, "redirect_uri": {"https://app.example/cb"},
		"code_verifier": {"ver-1"}, "client_id": {"client-1"}, "client_secret": {"secret-1"}}
	if got.form.Encode() != want.Encode() || got.auth != "" {
		t.Errorf("form %v auth %q, want %v and no header", got.form, got.auth, want)
	}
	if _, err := f.generic(t, nil).ExchangeCode(context.Background(), ""); !errors.Is(err, oauthflow.ErrInvalidArgument) {
		t.Errorf("empty code: %v", err)
	}
}

func TestClientAuthentication(t *testing.T) {
	t.Parallel()
	const secret = "p@ss:w/rd+ %&="
	tests := []struct {
		name       string
		style      AuthStyle
		secret     string
		wantHeader bool
		wantForm   url.Values
	}{
		{"header encodes id and secret", AuthStyleHeader, secret, true, url.Values{}},
		{"params", AuthStyleParams, secret, false, url.Values{"client_id": {"id:1"}, "client_secret": {secret}}},
		{"public client in header style", AuthStyleHeader, "", false, url.Values{"client_id": {"id:1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(200, `{"access_token":"at"}`))
			cfg := Config{ID: "p", AuthURL: f.srv.URL + "/a", TokenURL: f.srv.URL + "/t", AuthStyle: tt.style}
			p, err := NewOAuth2(cfg, Credentials{ClientID: "id:1", ClientSecret: tt.secret, RedirectURL: "https://app.example/cb"}, WithHTTPClient(f.srv.Client()))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.ExchangeCode(context.Background(), "c"); err != nil {
				t.Fatal(err)
			}
			got := f.last(t)
			if tt.wantHeader != (got.auth != "") {
				t.Fatalf("Authorization = %q", got.auth)
			}
			if tt.wantHeader && (got.user != "id:1" || got.secret != secret || strings.Count(decodeBasic(t, got.auth), ":") != 1) {
				t.Errorf("Basic user %q secret %q raw %q: want both form-urlencoded (RFC 6749 §2.3.1)", got.user, got.secret, decodeBasic(t, got.auth))
			}
			for k, v := range tt.wantForm {
				if got.form.Get(k) != v[0] {
					t.Errorf("form %s = %q, want %q", k, got.form.Get(k), v[0])
				}
			}
			if tt.wantHeader && got.form.Has("client_secret") {
				t.Error("secret sent twice")
			}
		})
	}
}

func decodeBasic(t *testing.T, h string) string {
	t.Helper()
	u, p, ok := (&http.Request{Header: http.Header{"Authorization": {h}}}).BasicAuth()
	if !ok {
		t.Fatalf("not Basic: %q", h)
	}
	return u + ":" + p
}

func TestRefreshToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		reply reply
		want  oauthflow.TokenSet
	}{
		{"no new refresh token", jsonReply(200, `{"access_token":"at2","expires_in":60}`), oauthflow.TokenSet{AccessToken: "at2", ExpiresIn: 60}},
		{"rotated", jsonReply(200, `{"access_token":"at2","refresh_token":"rt2"}`), oauthflow.TokenSet{AccessToken: "at2", RefreshToken: "rt2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.reply)
			got, err := f.generic(t, nil).RefreshToken(context.Background(), "rt1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
			if req := f.last(t); req.form.Get("grant_type") != "refresh_token" || req.form.Get("refresh_token") != "rt1" || req.path != "/token" {
				t.Errorf("request %s %v", req.path, req.form)
			}
		})
	}
}

func TestRefreshTokenDeadGrant(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(400, `{"error":"invalid_grant"}`))
	_, err := f.generic(t, nil).RefreshToken(context.Background(), "rt1")
	if !oauthflow.IsGrantDead(err) || oauthflow.IsTransient(err) {
		t.Fatalf("err = %v, want a dead grant", err)
	}
	if _, err := f.generic(t, nil).RefreshToken(context.Background(), ""); !errors.Is(err, oauthflow.ErrInvalidArgument) {
		t.Errorf("empty refresh token: %v", err)
	}
}

// countingTransport proves WithHTTPClient's client carries every call.
type countingTransport struct {
	n    int
	base http.RoundTripper
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n++
	return c.base.RoundTrip(r)
}

func TestWithHTTPClientCarriesEveryCall(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"at"}`))
	ct := &countingTransport{base: f.srv.Client().Transport}
	cfg := Config{ID: "p", AuthURL: f.srv.URL + "/a", TokenURL: f.srv.URL + "/t", RevocationURL: f.srv.URL + "/r", AuthStyle: AuthStyleHeader}
	p, err := NewOAuth2(cfg, testCreds, WithHTTPClient(&http.Client{Transport: ct}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, err1 := p.ExchangeCode(ctx, "c")
	_, err2 := p.RefreshToken(ctx, "r")
	err3 := p.RevokeToken(ctx, "r", "refresh_token")
	if err := errors.Join(err1, err2, err3); err != nil {
		t.Fatal(err)
	}
	if ct.n != 3 {
		t.Errorf("client carried %d requests, want 3", ct.n)
	}
}

// TokenParams go into every token request: the code exchange on both of its
// paths (posted directly with the auth style known, through x/oauth2 for a
// JSON request) and the refresh.
func TestTokenParams(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"at","refresh_token":"rt2"}`))
	resource := map[string]string{"resource": "https://mcp.example/mcp"}
	direct := f.generic(t, func(c *Config) { c.TokenParams = resource })
	viaLib := f.generic(t, func(c *Config) { c.TokenParams, c.AuthStyle = resource, AuthStyleAuto })
	calls := map[string]func() error{
		"exchange, posted directly": func() error {
			_, err := direct.ExchangeCodeVerifier(context.Background(), "c", "v")
			return err
		},
		"exchange through x/oauth2": func() error {
			_, err := viaLib.ExchangeCode(context.Background(), "c")
			return err
		},
		"refresh": func() error {
			_, err := direct.RefreshToken(context.Background(), "rt1")
			return err
		},
	}
	for name, call := range calls {
		if err := call(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := f.last(t).form; got.Get("resource") != "https://mcp.example/mcp" || got.Get("grant_type") == "" {
			t.Errorf("%s: form %v, want resource beside the grant", name, got)
		}
	}
}

// A token_type of DPoP (any case) is a bound token: a provider configured for
// DPoP reports it in TokenSet.TokenType; any other refuses it, since it sent
// no proof the token could be bound to.
func TestDPoPTokenType(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"at","token_type":"dpop","expires_in":60}`))
	got, err := f.generic(t, func(c *Config) { c.DPoP = true }).ExchangeCode(context.Background(), "code-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (oauthflow.TokenSet{AccessToken: "at", ExpiresIn: 60, TokenType: "DPoP"}); !reflect.DeepEqual(*got, want) {
		t.Errorf("got %+v, want %+v", *got, want)
	}
	_, err = f.generic(t, nil).ExchangeCode(context.Background(), "code-1")
	if !errors.Is(err, ErrTokenType) {
		t.Errorf("a provider without DPoP took a DPoP token: %v", err)
	}
}

// TestProviderErrorTextIsBoundedWhereParsed: the error code, description and
// URI a token endpoint chooses are cut where its answer is parsed, so the
// ProviderError an app's OnEvent or its own logging sees is as bounded as the
// library's own pages and records.
func TestProviderErrorTextIsBoundedWhereParsed(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 300_000)
	body := `{"error":"` + long + `","error_description":"` + long + `","error_uri":"https://p.example/` + long + `"}`
	f := newFake(t, jsonReply(400, body))
	_, err := f.generic(t, nil).ExchangeCode(context.Background(), "c")
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a ProviderError", err)
	}
	if len(pe.Code) > 64 || len(pe.Description) > 1024 || len(pe.URI) > 2048 {
		t.Fatalf("kept %d, %d and %d bytes of the code, description and URI; want at most 64, 1024 and 2048",
			len(pe.Code), len(pe.Description), len(pe.URI))
	}
	if pe.Code != long[:64] {
		t.Fatalf("code = %q, want its first 64 bytes", pe.Code)
	}
	f = newFake(t, jsonReply(400, `{"error":"invalid_grant","error_description":"d\u00e9j\u00e0 `+strings.Repeat("\u00e9", 600)+`"}`))
	_, err = f.generic(t, nil).ExchangeCode(context.Background(), "c")
	if !errors.As(err, &pe) || pe.Code != "invalid_grant" || !utf8.ValidString(pe.Description) || len(pe.Description) > 1024 {
		t.Fatalf("err = %#v, want invalid_grant with a valid, bounded description", err)
	}
}

// A provider built from a plain Config reports the refresh limit set there,
// none when it is zero, and a negative one is refused.
func TestConfigRefreshLimit(t *testing.T) {
	t.Parallel()
	cfg := Config{ID: "acme", AuthURL: "https://a.example/authorize", TokenURL: "https://a.example/token", AuthStyle: AuthStyleHeader}
	p, err := NewOAuth2(cfg, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := p.RefreshLimit(); ok || got != (oauthflow.RefreshLimit{}) {
		t.Errorf("no limit set: RefreshLimit() = %+v, %v", got, ok)
	}
	cfg.RefreshLimit = oauthflow.RefreshLimit{Concurrency: 4, PerSecond: 9}
	if p, err = NewOAuth2(cfg, testCreds); err != nil {
		t.Fatal(err)
	}
	if got, ok := p.RefreshLimit(); !ok || got != cfg.RefreshLimit {
		t.Errorf("RefreshLimit() = %+v, %v; want %+v", got, ok, cfg.RefreshLimit)
	}
	for _, bad := range []oauthflow.RefreshLimit{{Concurrency: -1}, {PerSecond: -1}} {
		cfg.RefreshLimit = bad
		if _, err := NewOAuth2(cfg, testCreds); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("refresh limit %+v: err = %v, want ErrInvalidConfig", bad, err)
		}
	}
}
