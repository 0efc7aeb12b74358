package providers

import (
	"context"
	"errors"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/oauthflow/oauthflow"
)

const parAnswer = `{"request_uri":"urn:ietf:params:oauth:request_uri:bwc4JK-ESC0w8acc191e-Y1LTC2","expires_in":60}`

// parProvider is a provider whose PAR endpoint is f's, authenticating as
// style says with secret.
func (f *fake) parProvider(t *testing.T, style AuthStyle, secret string, mod func(*Config)) *OAuth2 {
	t.Helper()
	cfg := Config{ID: "par", AuthURL: "https://as.example/authorize", TokenURL: f.srv.URL + "/token", PushedAuthURL: f.srv.URL + "/par",
		AuthStyle: style, Scopes: []string{"openid", "profile"}, AuthParams: map[string]string{"resource": "https://api.example"}}
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

// The push carries every parameter BuildAuthURL puts in the URL, the client
// authenticates as at the token endpoint, and the URL the browser is sent to
// carries client_id and the request_uri, nothing else.
func TestPushAuthorizationRequest(t *testing.T) {
	t.Parallel()
	for _, tt := range authStyles {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(201, parAnswer))
			p := f.parProvider(t, tt.style, tt.secret, nil)
			opts := []oauth2.AuthCodeOption{oauth2.S256ChallengeOption("verifier-verifier-verifier-verifier-verifier"),
				oauth2.SetAuthURLParam("dpop_jkt", "jkt-1")}
			got, err := p.PushAuthorization(context.Background(), []string{"read"}, "state-1", opts...)
			if err != nil {
				t.Fatal(err)
			}
			want := "https://as.example/authorize?client_id=client-1&request_uri=" +
				url.QueryEscape("urn:ietf:params:oauth:request_uri:bwc4JK-ESC0w8acc191e-Y1LTC2")
			if got != want {
				t.Errorf("URL %q, want %q", got, want)
			}
			seen := f.last(t)
			if seen.path != "/par" || seen.accept != "application/json" || seen.ctype != "application/x-www-form-urlencoded" {
				t.Errorf("path %q Accept %q Content-Type %q", seen.path, seen.accept, seen.ctype)
			}
			front, _ := url.Parse(p.BuildAuthURL([]string{"read"}, "state-1", opts...))
			pushed := seen.form
			if tt.secret != "" && !tt.basic {
				if pushed.Get("client_secret") != tt.secret {
					t.Errorf("client_secret %q", pushed.Get("client_secret"))
				}
				pushed.Del("client_secret")
			}
			if !reflect.DeepEqual(pushed, front.Query()) {
				t.Errorf("pushed %v\nwant the front-channel request %v", pushed, front.Query())
			}
			for _, k := range []string{"response_type", "client_id", "redirect_uri", "scope", "state", "code_challenge", "dpop_jkt", "resource"} {
				if !pushed.Has(k) {
					t.Errorf("the push has no %s", k)
				}
			}
			if tt.basic != (seen.auth != "") || tt.basic && (seen.user != "client-1" || seen.secret != tt.secret) {
				t.Errorf("Authorization %q, want Basic: %v", seen.auth, tt.basic)
			}
		})
	}
}

// The authorization endpoint's own query stays in the URL the browser is
// sent to and is not pushed; a provider that renames client_id names it so
// in both.
func TestPushAuthorizationEndpointQuery(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(201, parAnswer))
	p := f.parProvider(t, AuthStyleParams, "s", func(c *Config) {
		c.AuthURL = "https://as.example/authorize?p=B2C_1_signin"
		c.ClientIDParam = "client_key"
	})
	got, err := p.PushAuthorization(context.Background(), nil, "state-1")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(got)
	q := u.Query()
	if len(q) != 3 || q.Get("p") != "B2C_1_signin" || q.Get("client_key") != "client-1" || q.Get("request_uri") == "" {
		t.Errorf("URL %q", got)
	}
	form := f.last(t).form
	if form.Has("p") || form.Get("client_key") != "client-1" || form.Has("client_id") || form.Get("scope") != "openid profile" {
		t.Errorf("pushed %v", form)
	}
}

// Every failure is a *oauthflow.ProviderError: the server's error answer with
// its code, an answer that is no PAR answer, and no answer at all. Nothing
// falls back to a request in the URL.
func TestPushAuthorizationFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		reply     reply
		code      string
		status    int
		malformed bool
		transient bool
	}{
		{"refused", jsonReply(400, `{"error":"invalid_request","error_description":"bad redirect_uri"}`), "invalid_request", 400, false, false},
		{"client refused", jsonReply(401, `{"error":"invalid_client"}`), "invalid_client", 401, false, false},
		{"unavailable", jsonReply(503, `{"error":"temporarily_unavailable"}`), "temporarily_unavailable", 503, false, true},
		{"an HTML page", reply{502, "text/html", "<html>Bad Gateway</html>"}, "", 502, true, true},
		{"an error in a 200", jsonReply(200, `{"error":"invalid_scope"}`), "invalid_scope", 200, false, false},
		{"no request_uri", jsonReply(201, `{"expires_in":60}`), "", 201, true, false},
		{"request_uri not a string", jsonReply(201, `{"request_uri":42,"expires_in":60}`), "", 201, true, false},
		{"request_uri too long", jsonReply(201, `{"request_uri":"urn:`+strings.Repeat("x", maxRequestURILen)+`"}`), "", 201, true, false},
		{"request_uri with a control", jsonReply(201, `{"request_uri":"urn:x\u000d\u000aSet-Cookie: a=b"}`), "", 201, true, false},
		{"over the size bound", jsonReply(201, `{"request_uri":"urn:x","pad":"`+strings.Repeat("x", maxBody)+`"}`), "", 201, true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, tt.reply)
			u, err := f.parProvider(t, AuthStyleHeader, "s", nil).PushAuthorization(context.Background(), nil, "state-1")
			var pe *oauthflow.ProviderError
			if !errors.As(err, &pe) || u != "" {
				t.Fatalf("got %q, %v; want a *ProviderError", u, err)
			}
			if pe.ProviderID != "par" || pe.Code != tt.code || pe.StatusCode != tt.status || errors.Is(err, ErrMalformedResponse) != tt.malformed {
				t.Errorf("%+v", pe)
			}
			if oauthflow.IsTransient(err) != tt.transient {
				t.Errorf("IsTransient = %v", !tt.transient)
			}
		})
	}
	f := newFake(t, jsonReply(201, parAnswer))
	p := f.parProvider(t, AuthStyleHeader, "s", nil)
	f.srv.Close()
	_, err := p.PushAuthorization(context.Background(), nil, "state-1")
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.StatusCode != 0 || !oauthflow.IsTransient(err) {
		t.Errorf("PAR endpoint down: %v", err)
	}
}

// A provider without a PAR endpoint does not push, and PushAuthorization
// says why; one without a redirect URL (the device grant only) has no
// authorization request to push.
func TestPushAuthorizationUnsupported(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(201, parAnswer))
	p := f.generic(t, nil)
	if p.PushesAuthorization() {
		t.Error("a provider without PushedAuthURL pushes")
	}
	if _, err := p.PushAuthorization(context.Background(), nil, "s"); !errors.Is(err, ErrPARUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("got %v", err)
	}
	cfg := Config{ID: "dev", AuthURL: f.srv.URL + "/authorize", TokenURL: f.srv.URL + "/token", DeviceAuthURL: f.srv.URL + "/device",
		PushedAuthURL: f.srv.URL + "/par"}
	dev, err := NewOAuth2(cfg, Credentials{ClientID: "client-1"}, WithHTTPClient(f.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.PushAuthorization(context.Background(), nil, "s"); !errors.Is(err, oauthflow.ErrInvalidArgument) {
		t.Errorf("device-only provider: %v", err)
	}
	if len(f.seen) != 0 {
		t.Errorf("%d requests sent", len(f.seen))
	}
}

// A provider whose server requires pushed authorization requests is refused
// when built without a PAR endpoint: its sign-ins could not work.
func TestRequirePARNeedsAnEndpoint(t *testing.T) {
	t.Parallel()
	cfg := Config{ID: "par", AuthURL: "https://as.example/authorize", TokenURL: "https://as.example/token", RequirePAR: true}
	_, err := NewOAuth2(cfg, testCreds)
	if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "requires pushed authorization requests (RFC 9126 §5)") {
		t.Errorf("got %v", err)
	}
	cfg.PushedAuthURL = "/par"
	if _, err := NewOAuth2(cfg, testCreds); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "PushedAuthURL") {
		t.Errorf("a relative PAR endpoint: %v", err)
	}
	cfg.PushedAuthURL = "https://as.example/par"
	p, err := NewOAuth2(cfg, testCreds)
	if err != nil || !p.PushesAuthorization() {
		t.Errorf("got %v", err)
	}
}

// Discover reads pushed_authorization_request_endpoint and
// require_pushed_authorization_requests; metadata that requires PAR without
// naming an endpoint is refused, and an https issuer's PAR endpoint must be
// https.
func TestDiscoverPAR(t *testing.T) {
	t.Parallel()
	with := func(scheme string, endpoint, require bool) func(string) map[string]any {
		return func(base string) map[string]any {
			md := fullMetadata("")(base)
			if endpoint {
				md["pushed_authorization_request_endpoint"] = strings.Replace(base, "https://", scheme, 1) + "/par"
			}
			md["require_pushed_authorization_requests"] = require
			return md
		}
	}
	discover := func(fill func(string) map[string]any) (*OAuth2, string, error) {
		srv := metadataServer(t, true, "/.well-known/oauth-authorization-server", fill)
		p, err := Discover(context.Background(), "as", srv.URL, testCreds, WithHTTPClient(srv.Client()))
		return p, srv.URL, err
	}
	p, base, err := discover(with("https://", true, true))
	if err != nil {
		t.Fatal(err)
	}
	if c := p.Config(); c.PushedAuthURL != base+"/par" || !c.RequirePAR || !p.PushesAuthorization() {
		t.Errorf("PushedAuthURL %q RequirePAR %v", c.PushedAuthURL, c.RequirePAR)
	}
	// An endpoint offered, not required, is not used: a pushed request
	// outlives few links.
	if p, _, err := discover(with("https://", true, false)); err != nil || p.PushesAuthorization() || p.Config().RequirePAR {
		t.Errorf("an endpoint not required: %v", err)
	}
	if p, _, err := discover(fullMetadata("")); err != nil || p.PushesAuthorization() {
		t.Errorf("no endpoint: %v", err)
	}
	if _, _, err := discover(with("https://", false, true)); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "RFC 9126") {
		t.Errorf("required without an endpoint: %v", err)
	}
	if _, _, err := discover(with("http://", true, false)); !errors.Is(err, ErrDiscovery) || !strings.Contains(err.Error(), "/par") {
		t.Errorf("an https issuer with an http PAR endpoint: %v", err)
	}
}
