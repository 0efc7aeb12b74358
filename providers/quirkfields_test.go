package providers

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
)

// The quirk fields the catalog's growth needed, each proven on a provider's
// documented answer or request.

// TikTok names client_id "client_key" in the authorize URL and in the token
// request (developers.tiktok.com/doc/oauth-user-access-token-management).
func TestRenamedClientParameter(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"act.example12345Example12345Example","expires_in":86400,`+
		`"open_id":"afd97af1-b87b-48b9-ac98-410aghda5344","refresh_expires_in":31536000,`+
		`"refresh_token":"rft.example12345Example12345Example","scope":"user.info.basic,video.list","token_type":"Bearer"}`))
	p := f.catalog(t, "tiktok", testCreds)
	q := authQuery(t, p.BuildAuthURL(nil, "state-1"))
	if q.Get("client_key") != "client-1" || q.Has("client_id") {
		t.Errorf("authorize query %v", q)
	}
	for name, call := range map[string]func() (*oauthflow.TokenSet, error){
		"exchange":          func() (*oauthflow.TokenSet, error) { return p.ExchangeCode(context.Background(), "c") },
		"exchange/verifier": func() (*oauthflow.TokenSet, error) { return p.ExchangeCodeVerifier(context.Background(), "c", "") },
		"refresh":           func() (*oauthflow.TokenSet, error) { return p.RefreshToken(context.Background(), "r") },
	} {
		got, err := call()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got.AccessToken != "act.example12345Example12345Example" || got.Scope != "user.info.basic video.list" {
			t.Errorf("%s: %+v", name, got)
		}
		form := f.last(t).form
		if form.Get("client_key") != "client-1" || form.Get("client_secret") != "secret-1" || form.Has("client_id") {
			t.Errorf("%s: token request form %v", name, form)
		}
	}
}

// Withings nests the tokens under "body", beside a status
// (developer.withings.com/api-reference/#tag/oauth2/operation/oauth2-getaccesstoken).
func TestNestedTokenAnswer(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"status":0,"body":{"userid":"363","access_token":"a075f8c14fb8df40b08ebc8508533dc332a6910a",`+
		`"refresh_token":"f631236f02b991810feb774765b6ae8e6c6839ca","expires_in":10800,"scope":"user.info,user.metrics",`+
		`"csrf_token":"PACnnxwHTaBQOzF7bQqwFUUotIuvtzSM","token_type":"Bearer"}}`))
	got, err := f.catalog(t, "withings", testCreds).ExchangeCode(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	want := oauthflow.TokenSet{AccessToken: "a075f8c14fb8df40b08ebc8508533dc332a6910a", RefreshToken: "f631236f02b991810feb774765b6ae8e6c6839ca",
		ExpiresIn: 10800, Scope: "user.info user.metrics"}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("got %+v", *got)
	}
	bad := newFake(t, jsonReply(200, `{"status":503,"error":"Invalid params"}`))
	if _, err := bad.catalog(t, "withings", testCreds).ExchangeCode(context.Background(), "c"); err == nil {
		t.Error("a failure without body is not a token")
	}
}

// Pipedrive's answer names the company's API host, which its API needs
// (pipedrive.readme.io/docs/marketplace-oauth-authorization, step 5).
func TestKeptAnswerFields(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"v1:RdB1dd","token_type":"Bearer","refresh_token":"v1:4NB1dd",`+
		`"scope":"base,deals:full","expires_in":3599,"api_domain":"https://company.pipedrive.com"}`))
	got, err := f.catalog(t, "pipedrive", testCreds).ExchangeCode(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"api_domain": "https://company.pipedrive.com"}; !reflect.DeepEqual(got.Metadata, want) {
		t.Errorf("metadata %v, want %v", got.Metadata, want)
	}
	if cf := mustNew(t, "quickbooks").CallbackFields(); !reflect.DeepEqual(cf, []string{"realmId"}) {
		t.Errorf("QuickBooks keeps the callback's %v", cf)
	}
}

// Square says when the token expires, as an ISO 8601 time
// (developer.squareup.com/reference/square/objects/ObtainTokenResponse).
func TestAbsoluteExpiry(t *testing.T) {
	t.Parallel()
	square := mustNew(t, "square").cfg
	now := time.Date(2006, 1, 1, 15, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		unit, v string
		want    int64
	}{
		{"rfc3339", "2006-01-02T15:04:05Z", 86400},
		{"rfc3339", "2005-01-02T15:04:05Z", 1}, // past: refreshed on the first read
		{"unix", "1136214245", 86400},
		{"unix", "1136214245.612", 86400},
		{"s", "3600", 3600},
		{"rfc3339", "", 0},
	} {
		c := square
		c.ExpiresUnit = tt.unit
		got, err := c.lifetime(tt.v, now)
		if err != nil || got != tt.want {
			t.Errorf("%s %q: %d, %v; want %d", tt.unit, tt.v, got, err, tt.want)
		}
	}
	if _, err := square.lifetime("next tuesday", now); err == nil {
		t.Error("an unreadable time is a malformed answer")
	}
	in := time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	f := newFake(t, jsonReply(200, `{"access_token":"EAAl","token_type":"bearer","expires_at":"`+in+`","merchant_id":"M","refresh_token":"R"}`))
	got, err := f.catalog(t, "square", testCreds).ExchangeCode(context.Background(), "c")
	if err != nil {
		t.Fatal(err)
	}
	if got.ExpiresIn < 30*24*3600-60 || got.ExpiresIn > 30*24*3600 {
		t.Errorf("a token that expires in 30 days: expires_in %d", got.ExpiresIn)
	}
}

// WHOOP asks for scope=offline on each refresh to get a new refresh token
// (developer.whoop.com/docs/developing/oauth).
func TestRefreshOnlyParameters(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(200, `{"access_token":"a","refresh_token":"r2","expires_in":3600,"token_type":"bearer"}`))
	p := f.catalog(t, "whoop", testCreds)
	if _, err := p.RefreshToken(context.Background(), "r"); err != nil {
		t.Fatal(err)
	}
	if form := f.last(t).form; form.Get("scope") != "offline" || form.Get("grant_type") != "refresh_token" {
		t.Errorf("refresh form %v", form)
	}
	if _, err := p.ExchangeCode(context.Background(), "c"); err != nil {
		t.Fatal(err)
	}
	if form := f.last(t).form; form.Has("scope") {
		t.Errorf("the code exchange got the refresh's parameters: %v", form)
	}
}

// The account a grant is for, from the documented user-info answers: GitHub
// (docs.github.com/rest/users/users#get-the-authenticated-user), Microsoft
// Graph (learn.microsoft.com/graph/api/user-get) and Asana
// (developers.asana.com/reference/getuser).
func TestReadAccount(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ id, answer, want string }{
		{"github", `{"login":"octocat","id":1,"node_id":"MDQ6VXNlcjE=","type":"User","name":"monalisa octocat"}`, "octocat"},
		{"microsoft", `{"displayName":"Adele Vance","mail":"AdeleV@contoso.com","userPrincipalName":"AdeleV@contoso.com","id":"87d349ed"}`, "AdeleV@contoso.com"},
		{"asana", `{"data":{"gid":"12345","email":"gsanchez@example.com","name":"Greg Sanchez","resource_type":"user"}}`, "gsanchez@example.com"},
	} {
		f := newFake(t, jsonReply(200, tt.answer))
		c := testCreds
		c.Params = exampleParams(mustLookup(t, tt.id))
		p := f.catalog(t, tt.id, c)
		client := f.srv.Client()
		if !p.ReadsAccount() {
			t.Errorf("%s: ReadsAccount false with a user-info endpoint", tt.id)
		}
		got, err := p.ReadAccount(context.Background(), client)
		if err != nil || got != tt.want {
			t.Errorf("%s: %q, %v; want %q", tt.id, got, err, tt.want)
		}
		if seen := f.last(t); seen.path != "/userinfo" || seen.accept != "application/json" {
			t.Errorf("%s: asked %+v", tt.id, seen)
		}
	}
	for _, answer := range []reply{jsonReply(401, `{"message":"Bad credentials"}`), jsonReply(200, `{"id":1}`), jsonReply(200, `not json`)} {
		f := newFake(t, answer)
		if got, err := f.catalog(t, "github", testCreds).ReadAccount(context.Background(), f.srv.Client()); err == nil {
			t.Errorf("answer %q: account %q without an error", answer.body, got)
		}
	}
	plain := newFake(t, jsonReply(200, `{"login":"octocat"}`))
	if p := plain.generic(t, nil); p.ReadsAccount() {
		t.Errorf("no user-info endpoint, and ReadsAccount true: a sign-in would build its call for nothing")
	}
	if got, err := plain.generic(t, nil).ReadAccount(context.Background(), plain.srv.Client()); err != nil || got != "" || plain.calls() != 0 {
		t.Errorf("no user-info endpoint: %q, %v", got, err)
	}
	for path, want := range map[string]string{"emails.1.value": "b@example.com", "emails.9.value": "", "n": "42", "o": ""} {
		got, _ := atPath(map[string]any{"emails": []any{map[string]any{"value": "a@example.com"}, map[string]any{"value": "b@example.com"}},
			"n": float64(42), "o": map[string]any{}}, path)
		if got != want {
			t.Errorf("atPath %q = %q, want %q", path, got, want)
		}
	}
}

// A user-info answer that is not 2xx is a refusal, whatever its body holds:
// a 401, 403, 429 or 5xx whose JSON has the entry's account field (PayPal's
// {"name":"AUTHENTICATION_FAILURE"} for an entry that reads name) never
// becomes the connection's account.
func TestReadAccountRefusal(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		status, field, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		code, _ := strconv.Atoi(status)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(docAt(field, "AUTHENTICATION_FAILURE"))
	}))
	t.Cleanup(srv.Close)
	checked := 0
	for _, id := range Known() {
		e := mustLookup(t, id)
		if e.UserinfoURL == "" {
			continue
		}
		cfg, err := e.resolve(exampleParams(e))
		if err != nil {
			t.Fatal(err)
		}
		for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusServiceUnavailable} {
			cfg.UserinfoURL = fmt.Sprintf("%s/%d/%s", srv.URL, status, cfg.AccountField)
			p, err := NewOAuth2(cfg, testCreds, WithHTTPClient(srv.Client()))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := p.ReadAccount(context.Background(), srv.Client()); err == nil || got != "" {
				t.Errorf("%s: HTTP %d gave account %q, %v; want an error", id, status, got, err)
			}
			checked++
		}
	}
	if checked == 0 {
		t.Fatal("no catalog entry reads an account")
	}
	// The same body with 200 is the account: the refusal is the status's.
	cfg := mustLookup(t, "reddit").Config
	cfg.UserinfoURL = srv.URL + "/200/name"
	p, err := NewOAuth2(cfg, testCreds)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.ReadAccount(context.Background(), srv.Client()); err != nil || got != "AUTHENTICATION_FAILURE" {
		t.Errorf("HTTP 200: %q, %v", got, err)
	}
}

// docAt is a JSON value holding v at the dotted path, as atPath reads it (a
// numeric segment is an array index).
func docAt(path, v string) any {
	var doc any = v
	segs := strings.Split(path, ".")
	for i := len(segs) - 1; i >= 0; i-- {
		if n, err := strconv.Atoi(segs[i]); err == nil {
			arr := make([]any, n+1)
			arr[n] = doc
			doc = arr
			continue
		}
		doc = map[string]any{segs[i]: doc}
	}
	return doc
}

// Auth0 answers an ID token whose email claim names the account
// (auth0.com/docs/secure/tokens/id-tokens/id-token-structure).
func TestIDTokenAccount(t *testing.T) {
	t.Parallel()
	payload := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"https://tenant.us.auth0.com/","sub":"auth0|123","email":"janedoe@example.com","email_verified":true}`))
	f := newFake(t, jsonReply(200, `{"access_token":"eyJz","refresh_token":"GEbRx","id_token":"eyJhbGciOiJSUzI1NiJ9.`+payload+`.sig",`+
		`"token_type":"Bearer","expires_in":86400}`))
	c := testCreds
	c.Params = exampleParams(mustLookup(t, "auth0"))
	got, err := f.catalog(t, "auth0", c).ExchangeCode(context.Background(), "c")
	if err != nil || got.Account != "janedoe@example.com" {
		t.Errorf("got %+v, %v", got, err)
	}
	for _, bad := range []string{"", "a.b", "a.!!!.c", "a." + base64.RawURLEncoding.EncodeToString([]byte(`{"email":7}`)) + ".c"} {
		if claim := idTokenClaim(bad, "email"); claim != "" {
			t.Errorf("id token %q: claim %q", bad, claim)
		}
	}
}

func mustNew(t *testing.T, id string) *OAuth2 {
	t.Helper()
	c := testCreds
	c.Params = exampleParams(mustLookup(t, id))
	p, err := New(id, c)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
