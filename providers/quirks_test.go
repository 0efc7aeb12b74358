package providers

import (
	"context"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// Each test here reproduces one documented quirk of a catalog provider
// against a fake that answers the way that provider does.

func TestGitHubQuirks(t *testing.T) {
	t.Parallel()
	formType := "application/x-www-form-urlencoded; charset=utf-8"
	t.Run("form answer", func(t *testing.T) {
		t.Parallel()
		f := newFake(t, reply{200, formType, "access_token=gho_1&scope=read%3Auser%2Cuser%3Aemail&token_type=bearer"})
		got, err := f.catalog(t, "github", testCreds).ExchangeCode(context.Background(), "c")
		if err != nil {
			t.Fatal(err)
		}
		if got.AccessToken != "gho_1" || got.Scope != "read:user,user:email" || got.ExpiresIn != 0 || got.RefreshToken != "" {
			t.Errorf("got %+v", *got)
		}
		if req := f.last(t); req.form.Get("client_secret") != "secret-1" || req.auth != "" {
			t.Errorf("GitHub takes the secret in the form: %v %q", req.form, req.auth)
		}
	})
	for _, r := range []reply{
		{200, formType, "error=bad_verification_code&error_description=The+code+passed+is+incorrect+or+expired."},
		jsonReply(200, `{"error":"bad_verification_code","error_description":"The code passed is incorrect or expired."}`),
	} {
		t.Run("200 with error "+r.ctype, func(t *testing.T) {
			t.Parallel()
			ts, err := newFake(t, r).catalog(t, "github", testCreds).ExchangeCode(context.Background(), "c")
			var pe *oauthflow.ProviderError
			if ts != nil || !errors.As(err, &pe) || pe.Code != "bad_verification_code" || pe.StatusCode != 200 || !strings.Contains(pe.Description, "incorrect") {
				t.Fatalf("got %+v, %#v", ts, err)
			}
		})
	}
}

const slackAnswer = `{"ok":true,"access_token":"xoxb-bot","token_type":"bot","scope":"chat:write,commands",
 "bot_user_id":"U1","app_id":"A1","team":{"name":"T","id":"T1"},
 "authed_user":{"id":"U2","scope":"search:read","access_token":"xoxp-user","token_type":"user"}}`

func TestSlackQuirks(t *testing.T) {
	t.Parallel()
	user := testCreds
	user.Params = map[string]string{"token_type": "user"}
	tests := []struct {
		name   string
		creds  Credentials
		answer string
		want   oauthflow.TokenSet
	}{
		{"bot token by default", testCreds, slackAnswer, oauthflow.TokenSet{AccessToken: "xoxb-bot", Scope: "chat:write commands"}},
		{"user token when selected", user, slackAnswer, oauthflow.TokenSet{AccessToken: "xoxp-user", Scope: "search:read"}},
		{"user-only install", testCreds, `{"ok":true,"app_id":"A1","authed_user":{"id":"U2","scope":"search:read","access_token":"xoxp-user","token_type":"user"}}`,
			oauthflow.TokenSet{AccessToken: "xoxp-user", Scope: "search:read"}},
		{"rotating user token", user, `{"ok":true,"app_id":"A1","authed_user":{"id":"U2","scope":"search:read","access_token":"xoxe.xoxp-1","token_type":"user","refresh_token":"xoxe-1","expires_in":43200}}`,
			oauthflow.TokenSet{AccessToken: "xoxe.xoxp-1", RefreshToken: "xoxe-1", ExpiresIn: 43200, Scope: "search:read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := newFake(t, jsonReply(200, tt.answer)).catalog(t, "slack", tt.creds).ExchangeCode(context.Background(), "c")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				t.Errorf("got %+v, want %+v", *got, tt.want)
			}
		})
	}
}

func TestSlackErrorsAndScopes(t *testing.T) {
	t.Parallel()
	_, err := newFake(t, jsonReply(200, `{"ok":false,"error":"invalid_code"}`)).catalog(t, "slack", testCreds).ExchangeCode(context.Background(), "c")
	var pe *oauthflow.ProviderError
	if !errors.As(err, &pe) || pe.Code != "invalid_code" || pe.StatusCode != 200 {
		t.Fatalf("ok:false: %#v", err)
	}
	_, err = newFake(t, jsonReply(200, `{"ok":false}`)).catalog(t, "slack", testCreds).ExchangeCode(context.Background(), "c")
	if !errors.Is(err, ErrMalformedResponse) {
		t.Fatalf("ok:false without error: %v", err)
	}

	bot, _ := New("slack", testCreds)
	q := authQuery(t, bot.BuildAuthURL([]string{"chat:write", "commands"}, "s"))
	if q.Get("scope") != "chat:write,commands" || q.Has("user_scope") {
		t.Errorf("bot authorize: %v", q)
	}
	user, _ := New("slack", Credentials{ClientID: "c", RedirectURL: "https://app.example/cb", Params: map[string]string{"token_type": "user"}})
	q = authQuery(t, user.BuildAuthURL([]string{"search:read", "users:read"}, "s"))
	if q.Get("user_scope") != "search:read,users:read" || q.Has("scope") {
		t.Errorf("user authorize: %v", q)
	}
}

func TestBasicAuthProviders(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"reddit", "notion", "x", "bitbucket", "spotify", "zoom", "xero", "intuit", "figma"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			f := newFake(t, jsonReply(200, `{"access_token":"at","token_type":"bearer"}`))
			if _, err := f.catalog(t, id, testCreds).ExchangeCode(context.Background(), "c"); err != nil {
				t.Fatal(err)
			}
			if req := f.last(t); req.user != "client-1" || req.secret != "secret-1" || strings.Contains(req.body, "secret-1") {
				t.Errorf("want HTTP Basic only: user %q secret %q body %q", req.user, req.secret, req.body)
			}
		})
	}
}

func TestNotionJSONTokenRequest(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"ntn_1","token_type":"bearer","bot_id":"b","workspace_id":"w","owner":{"type":"user"}}`))
	got, err := f.catalog(t, "notion", testCreds).ExchangeCode(context.Background(), "code-1")
	if err != nil || got.AccessToken != "ntn_1" {
		t.Fatalf("got %+v, %v", got, err)
	}
	req := f.last(t)
	var body map[string]string
	if err := json.Unmarshal([]byte(req.body), &body); err != nil || req.ctype != "application/json" {
		t.Fatalf("want a JSON body, got %q (%s): %v", req.body, req.ctype, err)
	}
	if body["grant_type"] != "authorization_code" || body["code"] != "code-1" || body["redirect_uri"] != "https://app.example/cb" {
		t.Errorf("body = %v", body)
	}
	p, _ := New("notion", testCreds)
	if q := authQuery(t, p.BuildAuthURL(nil, "s")); q.Get("owner") != "user" || q.Has("scope") {
		t.Errorf("authorize: %v", q)
	}
}

func TestAuthorizeParamQuirks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id   string
		want map[string]string
	}{
		{"google", map[string]string{"access_type": "offline", "prompt": "consent", "include_granted_scopes": "true", "scope": "openid email profile"}},
		{"atlassian", map[string]string{"audience": "api.atlassian.com", "prompt": "consent", "scope": "read:me offline_access"}},
		{"dropbox", map[string]string{"token_access_type": "offline"}},
		{"reddit", map[string]string{"duration": "permanent", "scope": "identity"}},
		{"strava", map[string]string{"approval_prompt": "auto", "scope": "read"}},
		{"x", map[string]string{"scope": "tweet.read users.read offline.access"}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			p, err := New(tt.id, testCreds)
			if err != nil {
				t.Fatal(err)
			}
			q := authQuery(t, p.BuildAuthURL(nil, "s"))
			for k, v := range tt.want {
				if q.Get(k) != v {
					t.Errorf("%s = %q, want %q", k, q.Get(k), v)
				}
			}
		})
	}
}

func TestCommaScopeProviders(t *testing.T) {
	t.Parallel()
	for _, id := range []string{"strava", "linear", "shopify", "pinterest", "slack"} {
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			c := testCreds
			if id == "shopify" {
				c.Params = map[string]string{"shop": "my-shop"}
			}
			p, err := New(id, c)
			if err != nil {
				t.Fatal(err)
			}
			if q := authQuery(t, p.BuildAuthURL([]string{"read", "activity:read_all"}, "s")); q.Get("scope") != "read,activity:read_all" {
				t.Errorf("scope = %q, want one comma-joined value", q.Get("scope"))
			}
		})
	}
}

func TestShopifyAnswer(t *testing.T) {
	t.Parallel()
	c := testCreds
	c.Params = map[string]string{"shop": "my-shop.myshopify.com"}
	got, err := newFake(t, jsonReply(200, `{"access_token":"shpat_1","scope":"read_products,write_orders"}`)).catalog(t, "shopify", c).ExchangeCode(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, oauthflow.TokenSet{AccessToken: "shpat_1", Scope: "read_products write_orders"}) {
		t.Errorf("got %+v", *got)
	}
}

func TestTwitchScopeArray(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"tw","refresh_token":"r","expires_in":14124,"scope":["user:read:email","chat:read"],"token_type":"bearer"}`))
	got, err := f.catalog(t, "twitch", testCreds).ExchangeCode(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if got.Scope != "user:read:email chat:read" || got.ExpiresIn != 14124 {
		t.Errorf("got %+v", *got)
	}
}

func TestStravaAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"token_type":"Bearer","expires_at":1568775134,"expires_in":21600,"refresh_token":"r","access_token":"a","athlete":{"id":1}}`))
	got, err := f.catalog(t, "strava", testCreds).ExchangeCode(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, oauthflow.TokenSet{AccessToken: "a", RefreshToken: "r", ExpiresIn: 21600}) {
		t.Errorf("got %+v", *got)
	}
}

func TestSalesforceNoExpiry(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"00D","refresh_token":"5Aep","instance_url":"https://x.my.salesforce.com","issued_at":"1278448101416","token_type":"Bearer","scope":"api refresh_token"}`))
	got, err := f.catalog(t, "salesforce", testCreds).ExchangeCode(context.Background(), "c")
	if err != nil || got.ExpiresIn != 0 || got.RefreshToken != "5Aep" {
		t.Fatalf("got %+v, %v", got, err)
	}
}

func TestFigmaRefreshEndpoint(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"fig2","expires_in":7776000}`))
	got, err := f.catalog(t, "figma", testCreds).RefreshToken(context.Background(), "rt")
	if err != nil {
		t.Fatal(err)
	}
	if req := f.last(t); req.path != "/refresh" || got.RefreshToken != "" || got.ExpiresIn != 7776000 {
		t.Errorf("refresh went to %s, got %+v", req.path, *got)
	}
}

func TestXRequiresPKCE(t *testing.T) {
	t.Parallel()
	p, err := New("x", testCreds)
	if err != nil {
		t.Fatal(err)
	}
	if !p.RequiresPKCE() || !p.SupportsPKCE() {
		t.Error("X must require PKCE")
	}
	if q := authQuery(t, p.BuildAuthURL(nil, "s")); q.Has("code_challenge") {
		t.Error("BuildAuthURL added PKCE by itself")
	}
}

func TestTemplatedEndpoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id        string
		params    map[string]string
		auth, tok string
	}{
		{"microsoft", nil, "https://login.microsoftonline.com/common/oauth2/v2.0/authorize", "https://login.microsoftonline.com/common/oauth2/v2.0/token"},
		{"microsoft", map[string]string{"tenant": "contoso.onmicrosoft.com"}, "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/authorize", ""},
		{"gitlab", nil, "https://gitlab.com/oauth/authorize", "https://gitlab.com/oauth/token"},
		{"gitlab", map[string]string{"base_url": "https://git.example.com/gl/"}, "https://git.example.com/gl/oauth/authorize", "https://git.example.com/gl/oauth/token"},
		{"shopify", map[string]string{"shop": "my-shop"}, "https://my-shop.myshopify.com/admin/oauth/authorize", "https://my-shop.myshopify.com/admin/oauth/access_token"},
		{"okta", map[string]string{"domain": "dev-1.okta.com"}, "https://dev-1.okta.com/oauth2/default/v1/authorize", "https://dev-1.okta.com/oauth2/default/v1/token"},
		{"okta", map[string]string{"domain": "dev-1.okta.com", "authorization_server": "aus1"}, "https://dev-1.okta.com/oauth2/aus1/v1/authorize", ""},
		{"auth0", map[string]string{"domain": "t.eu.auth0.com"}, "https://t.eu.auth0.com/authorize", "https://t.eu.auth0.com/oauth/token"},
		{"keycloak", map[string]string{"base_url": "https://sso.example.com", "realm": "acme"}, "https://sso.example.com/realms/acme/protocol/openid-connect/auth", "https://sso.example.com/realms/acme/protocol/openid-connect/token"},
		{"keycloak", map[string]string{"base_url": "http://localhost:8080", "realm": "dev"}, "http://localhost:8080/realms/dev/protocol/openid-connect/auth", ""},
		{"salesforce", map[string]string{"domain": "test.salesforce.com"}, "https://test.salesforce.com/services/oauth2/authorize", ""},
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
			cfg := p.Config()
			if cfg.AuthURL != tt.auth || tt.tok != "" && cfg.TokenURL != tt.tok {
				t.Errorf("auth %q token %q, want %q %q", cfg.AuthURL, cfg.TokenURL, tt.auth, tt.tok)
			}
		})
	}
}

func TestTemplateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id     string
		params map[string]string
		want   error
		names  string
	}{
		{"keycloak", map[string]string{"base_url": "https://sso.example.com"}, ErrMissingParam, `"realm"`},
		{"okta", nil, ErrMissingParam, `"domain"`},
		{"shopify", nil, ErrMissingParam, `"shop"`},
		{"shopify", map[string]string{"shop": "evil.com/x?"}, ErrInvalidConfig, "shop"},
		{"auth0", map[string]string{"domain": "evil.com@x"}, ErrInvalidConfig, "domain"},
		{"gitlab", map[string]string{"base_url": "http://gitlab.example.com"}, ErrInvalidConfig, "https"},
		{"gitlab", map[string]string{"base_url": "https://gitlab.example.com/?q=1"}, ErrInvalidConfig, "base_url"},
		{"slack", map[string]string{"token_type": "admin"}, ErrInvalidConfig, "token_type"},
		{"github", map[string]string{"tenant": "x"}, ErrInvalidConfig, `"tenant"`},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			t.Parallel()
			c := testCreds
			c.Params = tt.params
			_, err := New(tt.id, c)
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.names) {
				t.Fatalf("err = %v, want %v naming %s", err, tt.want, tt.names)
			}
		})
	}
}
