package providers

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
)

const deviceAnswer = `{"device_code":"dc-1","user_code":"WDJB-MJHT","verification_uri":"https://example.com/device",
	"verification_uri_complete":"https://example.com/device?user_code=WDJB-MJHT","expires_in":900,"interval":5}`

var wantDevice = oauthflow.DeviceAuthorization{DeviceCode: "dc-1", UserCode: "WDJB-MJHT", VerificationURI: "https://example.com/device",
	VerificationURIComplete: "https://example.com/device?user_code=WDJB-MJHT", ExpiresIn: 900, Interval: 5}

// deviceProvider is a provider whose device authorization and token
// endpoints are f's, authenticating as style says with secret.
func (f *fake) deviceProvider(t *testing.T, style AuthStyle, secret string, mod func(*Config)) *OAuth2 {
	t.Helper()
	cfg := Config{ID: "dev", AuthURL: f.srv.URL + "/authorize", TokenURL: f.srv.URL + "/token", DeviceAuthURL: f.srv.URL + "/device",
		AuthStyle: style, Scopes: []string{"openid", "profile"}}
	if mod != nil {
		mod(&cfg)
	}
	c := testCreds
	c.ClientSecret = secret
	p, err := NewOAuth2(cfg, c, WithHTTPClient(f.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// authStyles are the three ways a client authenticates in the device grant's
// requests, and the auto-detected style, which is taken as HTTP Basic.
var authStyles = []struct {
	name   string
	style  AuthStyle
	secret string
	basic  bool       // an HTTP Basic header with client-1 and the secret
	form   url.Values // client authentication in the form
}{
	{"basic", AuthStyleHeader, "s3cr:t", true, url.Values{}},
	{"auto is basic", AuthStyleAuto, "s3cr:t", true, url.Values{}},
	{"form", AuthStyleParams, "s3cr:t", false, url.Values{"client_id": {"client-1"}, "client_secret": {"s3cr:t"}}},
	{"public", AuthStyleHeader, "", false, url.Values{"client_id": {"client-1"}}},
}

// checkClientAuth: the client authenticated in req as tt says, and only so.
func checkClientAuth(t *testing.T, got request, basic bool, form url.Values) {
	t.Helper()
	if basic != (got.auth != "") || basic && (got.user != "client-1" || got.secret != "s3cr:t") {
		t.Errorf("Authorization %q (user %q secret %q), want Basic: %v", got.auth, got.user, got.secret, basic)
	}
	for _, k := range []string{"client_id", "client_secret"} {
		if got.form.Get(k) != form.Get(k) || got.form.Has(k) != form.Has(k) {
			t.Errorf("form %s = %q, want %q", k, got.form[k], form[k])
		}
	}
}

func TestDeviceAuthRequest(t *testing.T) {
	t.Parallel()
	for _, tt := range authStyles {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(200, deviceAnswer))
			got, err := f.deviceProvider(t, tt.style, tt.secret, nil).DeviceAuth(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if *got != wantDevice {
				t.Errorf("got %+v, want %+v", *got, wantDevice)
			}
			seen := f.last(t)
			if seen.path != "/device" || seen.accept != "application/json" || seen.ctype != "application/x-www-form-urlencoded" {
				t.Errorf("path %q Accept %q Content-Type %q", seen.path, seen.accept, seen.ctype)
			}
			if seen.form.Get("scope") != "openid profile" {
				t.Errorf("scope %q, want the default scopes", seen.form.Get("scope"))
			}
			checkClientAuth(t, seen, tt.basic, tt.form)
		})
	}
}

// Requested scopes replace the defaults and are joined with the provider's
// separator; of TokenParams only resource and audience go along.
func TestDeviceAuthScopesAndParams(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, deviceAnswer))
	p := f.deviceProvider(t, AuthStyleParams, "s", func(c *Config) {
		c.ScopeSeparator = ","
		c.TokenParams = map[string]string{"resource": "https://mcp.example/mcp", "audience": "https://api.example", "prompt": "none"}
	})
	if _, err := p.DeviceAuth(context.Background(), []string{"read", "write"}); err != nil {
		t.Fatal(err)
	}
	form := f.last(t).form
	if form.Get("scope") != "read,write" || form.Get("resource") != "https://mcp.example/mcp" || form.Get("audience") != "https://api.example" || form.Has("prompt") {
		t.Errorf("form %v", form)
	}
	f2 := newFake(t, jsonReply(200, deviceAnswer))
	if _, err := f2.deviceProvider(t, AuthStyleParams, "s", func(c *Config) { c.Scopes = nil }).DeviceAuth(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if f2.last(t).form.Has("scope") {
		t.Error("a provider without default scopes sent an empty scope")
	}
}

func TestDeviceAuthAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want oauthflow.DeviceAuthorization
	}{
		{"rfc 8628", deviceAnswer, wantDevice},
		{"google verification_url", `{"device_code":"dc-1","user_code":"GQVQ-JKEC","verification_url":"https://www.google.com/device","expires_in":1800,"interval":5}`,
			oauthflow.DeviceAuthorization{DeviceCode: "dc-1", UserCode: "GQVQ-JKEC", VerificationURI: "https://www.google.com/device", ExpiresIn: 1800, Interval: 5}},
		{"numbers as strings", `{"device_code":"dc-1","user_code":"u","verification_uri":"https://microsoft.com/devicelogin","expires_in":"900","interval":"5","message":"To sign in..."}`,
			oauthflow.DeviceAuthorization{DeviceCode: "dc-1", UserCode: "u", VerificationURI: "https://microsoft.com/devicelogin", ExpiresIn: 900, Interval: 5}},
		{"no interval", `{"device_code":"dc-1","user_code":"u","verification_uri":"http://localhost:8080/device","expires_in":600}`,
			oauthflow.DeviceAuthorization{DeviceCode: "dc-1", UserCode: "u", VerificationURI: "http://localhost:8080/device", ExpiresIn: 600}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(200, tt.body))
			got, err := f.deviceProvider(t, AuthStyleParams, "s", nil).DeviceAuth(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if *got != tt.want {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

// githubFake answers like GitHub: form-encoded unless asked for JSON, and a
// refused poll with HTTP 200.
func githubFake(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		answer := map[string]string{"/device": "device_code=dc-1&user_code=WDJB-MJHT&verification_uri=https%3A%2F%2Fgithub.com%2Flogin%2Fdevice&expires_in=899&interval=5",
			"/token": "error=authorization_pending&error_description=The+authorization+request+is+still+pending."}[r.URL.Path]
		if r.Header.Get("Accept") != "application/json" {
			w.Header().Set("Content-Type", "application/x-www-form-urlencoded; charset=utf-8")
			io.WriteString(w, answer)
			return
		}
		v, _ := url.ParseQuery(answer)
		obj := map[string]any{}
		for k := range v {
			obj[k] = v.Get(k)
		}
		if n := v.Get("expires_in"); n != "" {
			obj["expires_in"], obj["interval"] = json.Number(n), json.Number(v.Get("interval"))
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		json.NewEncoder(w).Encode(obj)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestDeviceGitHub(t *testing.T) {
	t.Parallel()
	srv := githubFake(t)
	cfg, err := mustLookup(t, "github").resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg.DeviceAuthURL, cfg.TokenURL = srv.URL+"/device", srv.URL+"/token"
	p, err := NewOAuth2(cfg, Credentials{ClientID: "Iv1.abc", RedirectURL: testCreds.RedirectURL}, WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	da, err := p.DeviceAuth(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := oauthflow.DeviceAuthorization{DeviceCode: "dc-1", UserCode: "WDJB-MJHT", VerificationURI: "https://github.com/login/device", ExpiresIn: 899, Interval: 5}
	if *da != want {
		t.Errorf("got %+v, want %+v", *da, want)
	}
	_, err = p.DeviceToken(context.Background(), da.DeviceCode)
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.Code != "authorization_pending" || pe.StatusCode != 200 || pe.ProviderID != "github" {
		t.Errorf("a pending poll answered with HTTP 200: %v", err)
	}
}

func mustLookup(t *testing.T, id string) entry {
	t.Helper()
	e, err := lookup(id)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestDeviceAuthFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reply     reply
		code      string
		status    int
		malformed bool
	}{
		{"rfc 6749 error", jsonReply(400, `{"error":"invalid_client","error_description":"unknown client"}`), "invalid_client", 400, false},
		{"error with HTTP 200", jsonReply(200, `{"error":"device_flow_disabled"}`), "device_flow_disabled", 200, false},
		{"server error without body", reply{status: 502}, "", 502, true},
		{"not json", reply{status: 200, ctype: "text/html", body: "<html>"}, "", 200, true},
		{"form-encoded", reply{status: 200, ctype: "application/x-www-form-urlencoded", body: "device_code=dc&user_code=u&verification_uri=https%3A%2F%2Fa.example"}, "", 200, true},
		{"no device code", jsonReply(200, `{"user_code":"u","verification_uri":"https://a.example/d","expires_in":60}`), "", 200, true},
		{"no user code", jsonReply(200, `{"device_code":"d","verification_uri":"https://a.example/d","expires_in":60}`), "", 200, true},
		{"no verification uri", jsonReply(200, `{"device_code":"d","user_code":"u","expires_in":60}`), "", 200, true},
		{"script verification uri", jsonReply(200, `{"device_code":"d","user_code":"u","verification_uri":"javascript:alert(1)"}`), "", 200, true},
		{"relative verification uri", jsonReply(200, `{"device_code":"d","user_code":"u","verification_uri":"/device"}`), "", 200, true},
		{"bad complete uri", jsonReply(200, `{"device_code":"d","user_code":"u","verification_uri":"https://a.example/d","verification_uri_complete":"data:text/html,x"}`), "", 200, true},
		{"device code not a string", jsonReply(200, `{"device_code":7,"user_code":"u","verification_uri":"https://a.example/d"}`), "", 200, true},
		{"error in the provider's own field", jsonReply(400, `{"status":"BAD_CLIENT_ID","message":"m"}`), "BAD_CLIENT_ID", 400, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.reply)
			own := func(c *Config) { c.ErrorCodeField, c.ErrorDescriptionField = "status", "message" } // HubSpot's
			da, err := f.deviceProvider(t, AuthStyleParams, "s", own).DeviceAuth(context.Background(), nil)
			var pe *oauthflow.ProviderError
			if !errors.As(err, &pe) || da != nil {
				t.Fatalf("got %+v, %v; want a *ProviderError", da, err)
			}
			if pe.Code != tt.code || pe.StatusCode != tt.status || pe.ProviderID != "dev" || errors.Is(err, ErrMalformedResponse) != tt.malformed {
				t.Errorf("code %q status %d malformed %v (%v); want %q %d %v", pe.Code, pe.StatusCode, errors.Is(err, ErrMalformedResponse), err, tt.code, tt.status, tt.malformed)
			}
		})
	}
}

func TestDeviceUnsupported(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, deviceAnswer))
	p := f.deviceProvider(t, AuthStyleParams, "s", func(c *Config) { c.DeviceAuthURL = "" })
	if p.SupportsDeviceAuth() {
		t.Error("SupportsDeviceAuth without a device authorization endpoint")
	}
	_, err1 := p.DeviceAuth(context.Background(), nil)
	_, err2 := p.DeviceToken(context.Background(), "dc-1")
	for _, err := range []error{err1, err2} {
		if !errors.Is(err, ErrDeviceAuthUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("err = %v, want ErrDeviceAuthUnsupported", err)
		}
	}
	if f.calls() != 0 {
		t.Errorf("%d requests sent", f.calls())
	}
	if !f.deviceProvider(t, AuthStyleParams, "s", nil).SupportsDeviceAuth() {
		t.Error("a provider with a device authorization endpoint does not support it")
	}
	cfg := Config{ID: "p", AuthURL: "https://a.example/a", TokenURL: "https://a.example/t", DeviceAuthURL: "/device"}
	if _, err := NewOAuth2(cfg, testCreds); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a relative DeviceAuthURL: %v", err)
	}
}

func TestDeviceAuthNoAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, deviceAnswer))
	p := f.deviceProvider(t, AuthStyleParams, "s", nil)
	f.srv.Close()
	_, err := p.DeviceAuth(context.Background(), nil)
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 0 || pe.Err == nil {
		t.Errorf("err = %v, want a *ProviderError without status", err)
	}
}

func TestDeviceTokenRequest(t *testing.T) {
	t.Parallel()
	for _, tt := range authStyles {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(200, `{"access_token":"at"}`))
			p := f.deviceProvider(t, tt.style, tt.secret, func(c *Config) { c.TokenParams = map[string]string{"resource": "https://mcp.example/mcp"} })
			if _, err := p.DeviceToken(context.Background(), "dc-1"); err != nil {
				t.Fatal(err)
			}
			got := f.last(t)
			if got.path != "/token" || got.accept != "application/json" {
				t.Errorf("path %q Accept %q", got.path, got.accept)
			}
			if got.form.Get("grant_type") != "urn:ietf:params:oauth:grant-type:device_code" || got.form.Get("device_code") != "dc-1" ||
				got.form.Get("resource") != "https://mcp.example/mcp" {
				t.Errorf("form %v", got.form)
			}
			checkClientAuth(t, got, tt.basic, tt.form)
			if f.calls() != 1 {
				t.Errorf("%d requests for one poll", f.calls())
			}
		})
	}
}

// A poll takes the provider's token request quirks: Notion's JSON body.
func TestDeviceTokenJSONRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"at"}`))
	p := f.deviceProvider(t, AuthStyleParams, "s", func(c *Config) { c.JSONTokenRequest = true })
	if _, err := p.DeviceToken(context.Background(), "dc-1"); err != nil {
		t.Fatal(err)
	}
	got := f.last(t)
	var body map[string]string
	if err := json.Unmarshal([]byte(got.body), &body); err != nil || got.ctype != "application/json" || body["device_code"] != "dc-1" {
		t.Errorf("Content-Type %q body %q: want the poll as JSON", got.ctype, got.body)
	}
	if _, err := p.DeviceToken(context.Background(), ""); !errors.Is(err, oauthflow.ErrInvalidArgument) || f.calls() != 1 {
		t.Errorf("empty device code: %v after %d requests", err, f.calls())
	}
}

// Every RFC 8628 §3.5 code, and Microsoft's own, comes back as the
// ProviderError's Code, whatever the status and encoding.
func TestDeviceTokenErrors(t *testing.T) {
	t.Parallel()
	codes := []string{"authorization_pending", "slow_down", "access_denied", "expired_token", "authorization_declined", "bad_verification_code"}
	answers := []struct {
		name   string
		status int
		ctype  string
		body   func(code string) string
	}{
		{"rfc 8628", 400, "application/json", func(c string) string { return `{"error":"` + c + `","error_description":"d"}` }},
		{"github", 200, "application/json", func(c string) string { return `{"error":"` + c + `","interval":10}` }},
		{"github form", 200, "application/x-www-form-urlencoded", func(c string) string { return "error=" + c + "&error_description=d" }},
		{"google 428", 428, "application/json; charset=utf-8", func(c string) string { return `{"error":"` + c + `","error_description":"Precondition Required"}` }},
	}
	for _, a := range answers {
		for _, code := range codes {
			t.Run(a.name+"/"+code, func(t *testing.T) {
				t.Parallel()
				f := newFake(t, reply{status: a.status, ctype: a.ctype, body: a.body(code)})
				ts, err := f.deviceProvider(t, AuthStyleParams, "s", nil).DeviceToken(context.Background(), "dc-1")
				var pe *oauthflow.ProviderError
				if !errors.As(err, &pe) || ts != nil {
					t.Fatalf("got %+v, %v; want a *ProviderError", ts, err)
				}
				if pe.Code != code || pe.StatusCode != a.status || pe.ProviderID != "dev" {
					t.Errorf("code %q status %d provider %q, want %q %d", pe.Code, pe.StatusCode, pe.ProviderID, code, a.status)
				}
			})
		}
	}
}

// A successful poll is the TokenSet a code exchange makes of the same answer.
func TestDeviceTokenSuccess(t *testing.T) {
	t.Parallel()
	answers := []struct {
		name string
		body string
		want oauthflow.TokenSet
	}{
		{"full", `{"access_token":"at","token_type":"Bearer","refresh_token":"rt","expires_in":"3600","scope":"openid  profile","id_token":"x"}`,
			oauthflow.TokenSet{AccessToken: "at", RefreshToken: "rt", ExpiresIn: 3600, Scope: "openid profile"}},
		{"dpop", `{"access_token":"at","token_type":"dpop","expires_in":60}`, oauthflow.TokenSet{AccessToken: "at", ExpiresIn: 60, TokenType: "DPoP"}},
	}
	for _, a := range answers {
		t.Run(a.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(200, a.body))
			p := f.deviceProvider(t, AuthStyleParams, "s", func(c *Config) { c.DPoP = true })
			got, err := p.DeviceToken(context.Background(), "dc-1")
			if err != nil {
				t.Fatal(err)
			}
			exchanged, err := p.ExchangeCode(context.Background(), "code-1")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, a.want) || !reflect.DeepEqual(*got, *exchanged) {
				t.Errorf("poll %+v, exchange %+v, want %+v", *got, *exchanged, a.want)
			}
		})
	}
	for _, body := range []string{`{"token_type":"Bearer"}`, `{"access_token":"at","token_type":"mac"}`} {
		f := newFake(t, jsonReply(200, body))
		if _, err := f.deviceProvider(t, AuthStyleParams, "s", nil).DeviceToken(context.Background(), "dc-1"); err == nil {
			t.Errorf("%s: accepted", body)
		}
	}
}

func TestDiscoverDeviceAuthURL(t *testing.T) {
	t.Parallel()
	withDevice := func(scheme string) func(string) map[string]any {
		return func(base string) map[string]any {
			md := fullMetadata("")(base)
			md["device_authorization_endpoint"] = strings.Replace(base, "https://", scheme, 1) + "/device"
			return md
		}
	}
	srv := metadataServer(t, true, "/.well-known/oauth-authorization-server", withDevice("https://"))
	p, err := Discover(context.Background(), "as", srv.URL, testCreds, WithHTTPClient(srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Config().DeviceAuthURL; got != srv.URL+"/device" || !p.SupportsDeviceAuth() {
		t.Errorf("DeviceAuthURL %q, want %q", got, srv.URL+"/device")
	}
	plain := metadataServer(t, true, "/.well-known/oauth-authorization-server", fullMetadata(""))
	if p, err := Discover(context.Background(), "as", plain.URL, testCreds, WithHTTPClient(plain.Client())); err != nil || p.SupportsDeviceAuth() {
		t.Errorf("metadata without device_authorization_endpoint: %v, device auth %v", err, err == nil && p.SupportsDeviceAuth())
	}
	insecure := metadataServer(t, true, "/.well-known/oauth-authorization-server", withDevice("http://"))
	if _, err := Discover(context.Background(), "as", insecure.URL, testCreds, WithHTTPClient(insecure.Client())); !errors.Is(err, ErrDiscovery) ||
		!strings.Contains(err.Error(), "/device") {
		t.Errorf("an https issuer with an http device endpoint: %v", err)
	}
}

func TestCatalogDeviceAuthURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id     string
		params map[string]string
		want   string
	}{
		{"github", nil, "https://github.com/login/device/code"},
		{"google", nil, "https://oauth2.googleapis.com/device/code"},
		{"microsoft", nil, "https://login.microsoftonline.com/common/oauth2/v2.0/devicecode"},
		{"microsoft", map[string]string{"tenant": "contoso.onmicrosoft.com"}, "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/devicecode"},
		{"gitlab", nil, "https://gitlab.com/oauth/authorize_device"},
		{"gitlab", map[string]string{"base_url": "https://git.example.com/gl/"}, "https://git.example.com/gl/oauth/authorize_device"},
		{"okta", map[string]string{"domain": "dev-1.okta.com"}, "https://dev-1.okta.com/oauth2/default/v1/device/authorize"},
		{"okta", map[string]string{"domain": "dev-1.okta.com", "authorization_server": "aus1"}, "https://dev-1.okta.com/oauth2/aus1/v1/device/authorize"},
		{"auth0", map[string]string{"domain": "t.eu.auth0.com"}, "https://t.eu.auth0.com/oauth/device/code"},
		{"slack", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			c := testCreds
			c.Params = tt.params
			p, err := New(tt.id, c)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Config().DeviceAuthURL; got != tt.want || p.SupportsDeviceAuth() != (tt.want != "") {
				t.Errorf("DeviceAuthURL %q, want %q", got, tt.want)
			}
		})
	}
}
