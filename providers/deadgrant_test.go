package providers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
)

// Dead grants through the whole path: a catalog provider behind a fake token
// endpoint, refreshed by an oauthflow.TokenStore on memory and on a real Redis.

var tokenKVs = []struct {
	name string
	new  func(t *testing.T) oauthflow.KV
}{
	{"memory", func(t *testing.T) oauthflow.KV {
		kv := oauthflow.NewMemoryKV()
		t.Cleanup(func() { _ = kv.Close() })
		return kv
	}},
	{"redis", func(t *testing.T) oauthflow.KV {
		c := redistest.Real(t)
		return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
	}},
}

const formType = "application/x-www-form-urlencoded; charset=utf-8"

// expiredRead is the outcome of readExpired.
type expiredRead struct {
	f     *fake
	store *oauthflow.TokenStore
	err   error // what the first GetValidAccessToken returned
}

var staleTokens = oauthflow.StoredTokens{AccessToken: "at-old", RefreshToken: "rt-old", Scope: "s"}

// readExpired stores an expired token with a refresh token for catalog
// provider id, whose token endpoint is a fake answering r, and reads it once.
func readExpired(t *testing.T, kv oauthflow.KV, id string, r reply) *expiredRead {
	t.Helper()
	f := newFake(t, r)
	reg := oauthflow.NewRegistry()
	if err := reg.Register(f.catalog(t, id, testCreds)); err != nil {
		t.Fatal(err)
	}
	store := oauthflow.NewTokenStore(kv, reg)
	stale := staleTokens
	stale.ExpiresAt = time.Now().Add(-time.Hour).UnixMilli()
	ctx := context.Background()
	if err := store.StoreTokens(ctx, "u1", id, stale); err != nil {
		t.Fatal(err)
	}
	tok, err := store.GetValidAccessToken(ctx, "u1", id)
	if tok != "" {
		t.Errorf("GetValidAccessToken returned token %q", tok)
	}
	return &expiredRead{f: f, store: store, err: err}
}

func TestDeadGrantDeletesRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id string
		r        reply
		code     string
	}{
		{"github form", "github", reply{200, formType,
			"error=bad_refresh_token&error_description=The+refresh+token+passed+is+incorrect+or+expired.&error_uri=https%3A%2F%2Fdocs.github.com"},
			"bad_refresh_token"},
		{"github json", "github", jsonReply(200, `{"error":"bad_refresh_token","error_description":"The refresh token passed is incorrect or expired.","error_uri":"https://docs.github.com"}`),
			"bad_refresh_token"},
		{"hubspot", "hubspot", jsonReply(400, `{"status":"BAD_REFRESH_TOKEN","message":"missing or unknown refresh token","correlationId":"c1","requestId":"r1"}`),
			"BAD_REFRESH_TOKEN"},
		{"slack", "slack", jsonReply(200, `{"ok":false,"error":"invalid_refresh_token"}`), "invalid_refresh_token"},
		{"google invalid_grant", "google", jsonReply(400, `{"error":"invalid_grant","error_description":"Token has been expired or revoked."}`), "invalid_grant"},
	}
	for _, kv := range tokenKVs {
		for _, tt := range tests {
			t.Run(kv.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				got := readExpired(t, kv.new(t), tt.id, tt.r)
				checkDead(t, got, tt.id, tt.code)
			})
		}
	}
}

func checkDead(t *testing.T, got *expiredRead, id, code string) {
	t.Helper()
	var pe *oauthflow.ProviderError
	if !errors.Is(got.err, oauthflow.ErrNoToken) || !errors.As(got.err, &pe) || pe.Code != code {
		t.Fatalf("first read: %v, want ErrNoToken carrying the provider's %s", got.err, code)
	}
	ctx := context.Background()
	if rec, err := got.store.GetTokens(ctx, "u1", id); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Errorf("record after a dead grant: %+v, %v; want it deleted", rec, err)
	}
	if _, err := got.store.GetValidAccessToken(ctx, "u1", id); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Errorf("second read: %v, want ErrNoToken", err)
	}
	if n := got.f.calls(); n != 1 {
		t.Errorf("token endpoint called %d times, want exactly 1", n)
	}
}

func TestFailedRefreshKeepsRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, id string
		r        reply
	}{
		{"invalid_client", "github", jsonReply(401, `{"error":"invalid_client","error_description":"bad secret"}`)},
		{"unauthorized_client", "github", jsonReply(400, `{"error":"unauthorized_client"}`)},
		{"incorrect_client_credentials", "github", reply{200, formType, "error=incorrect_client_credentials"}},
		{"400 without body", "github", reply{400, "", ""}},
		{"429", "github", reply{429, "text/plain", "slow down"}},
		{"503", "github", reply{503, "text/html", "<h1>unavailable</h1>"}},
		{"hubspot BAD_CLIENT_ID", "hubspot", jsonReply(400, `{"status":"BAD_CLIENT_ID","message":"missing or invalid client_id"}`)},
		{"hubspot 400 without body", "hubspot", reply{400, "", ""}},
		{"hubspot 503", "hubspot", jsonReply(503, `{"status":"error","message":"try later"}`)},
		{"slack bad_client_secret", "slack", jsonReply(200, `{"ok":false,"error":"bad_client_secret"}`)},
		{"slack ratelimited", "slack", jsonReply(429, `{"ok":false,"error":"ratelimited"}`)},
	}
	for _, kv := range tokenKVs {
		for _, tt := range tests {
			t.Run(kv.name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				got := readExpired(t, kv.new(t), tt.id, tt.r)
				checkKept(t, got, tt.id)
			})
		}
	}
}

func checkKept(t *testing.T, got *expiredRead, id string) {
	t.Helper()
	if got.err == nil || errors.Is(got.err, oauthflow.ErrNoToken) {
		t.Fatalf("first read: %v, want an error that is not ErrNoToken", got.err)
	}
	rec, err := got.store.GetTokens(context.Background(), "u1", id)
	if err != nil || rec.AccessToken != staleTokens.AccessToken || rec.RefreshToken != staleTokens.RefreshToken {
		t.Errorf("record after a failed refresh: %+v, %v; want it kept", rec, err)
	}
	if n := got.f.calls(); n != 1 {
		t.Errorf("token endpoint called %d times, want exactly 1", n)
	}
}

// TestCatalogDeadGrantCodes: every listed code is the provider's own, named
// once, with the documentation it came from, and reaches the provider.
func TestCatalogDeadGrantCodes(t *testing.T) {
	t.Parallel()
	cat, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	generic := []string{"invalid_request", "invalid_client", "unauthorized_client", "invalid_scope", "invalid_grant"}
	for _, id := range Known() {
		e := cat[id]
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			var codes []string
			for _, d := range e.DeadGrants {
				switch {
				case strings.TrimSpace(d.Code) == "" || d.Code != strings.TrimSpace(d.Code):
					t.Errorf("dead-grant code %q: want a non-empty code without spaces", d.Code)
				case slices.ContainsFunc(generic, func(g string) bool { return strings.EqualFold(g, d.Code) }):
					t.Errorf("dead-grant code %q is an RFC 6749 code, not the provider's own", d.Code)
				case slices.Contains(codes, d.Code):
					t.Errorf("dead-grant code %q listed twice", d.Code)
				case !strings.Contains(d.Doc, "https://"):
					t.Errorf("dead-grant code %q: doc %q names no documentation", d.Code, d.Doc)
				}
				codes = append(codes, d.Code)
			}
			c := testCreds
			c.Params = exampleParams(e)
			p, err := New(id, c)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.DeadGrantCodes(); !slices.Equal(got, codes) {
				t.Errorf("DeadGrantCodes() = %q, want %q", got, codes)
			}
		})
	}
}

func TestConfigDeadGrantCodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		codes []string
		ok    bool
	}{
		{nil, true},
		{[]string{"bad_refresh_token", "token_revoked"}, true},
		{[]string{""}, false},
		{[]string{" "}, false},
		{[]string{"invalid_client"}, false},
		{[]string{"bad_refresh_token", "Unauthorized_Client"}, false},
		{[]string{"invalid_request"}, false},
		{[]string{"invalid_scope"}, false},
		{[]string{"server_error"}, false},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.codes, ","), func(t *testing.T) {
			t.Parallel()
			cfg := Config{ID: "p", AuthURL: "https://p.example/a", TokenURL: "https://p.example/t", DeadGrantCodes: tt.codes}
			p, err := NewOAuth2(cfg, testCreds)
			if !tt.ok {
				if !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("err = %v, want ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := p.DeadGrantCodes()
			if !slices.Equal(got, tt.codes) {
				t.Fatalf("DeadGrantCodes() = %q, want %q", got, tt.codes)
			}
			if len(got) > 0 {
				got[0] = "mutated"
				if p.DeadGrantCodes()[0] == "mutated" {
					t.Error("DeadGrantCodes returns shared state")
				}
			}
		})
	}
}

// TestErrorCodeField: HubSpot's status field becomes the error code only for
// a provider that declares it, and only on an answer that is not a token.
func TestErrorCodeField(t *testing.T) {
	t.Parallel()
	hubspot := func(c *Config) { c.ErrorCodeField, c.ErrorDescriptionField = "status", "message" }
	tests := []struct {
		name       string
		mod        func(*Config)
		r          reply
		code, desc string
		token      string
	}{
		{"declared", hubspot, jsonReply(400, `{"status":"BAD_REFRESH_TOKEN","message":"missing or unknown refresh token"}`), "BAD_REFRESH_TOKEN", "missing or unknown refresh token", ""},
		{"undeclared", nil, jsonReply(400, `{"status":"BAD_REFRESH_TOKEN","message":"missing"}`), "", "", ""},
		{"RFC error wins", hubspot, jsonReply(400, `{"error":"invalid_grant","error_description":"gone","status":"BAD_REFRESH_TOKEN"}`), "invalid_grant", "gone", ""},
		{"200 without token", hubspot, jsonReply(200, `{"status":"BAD_REFRESH_TOKEN"}`), "BAD_REFRESH_TOKEN", "", ""},
		{"token with a status", hubspot, jsonReply(200, `{"access_token":"at","status":"ok"}`), "", "", "at"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := newFake(t, tt.r).generic(t, tt.mod).RefreshToken(context.Background(), "rt")
			if tt.token != "" {
				if err != nil || got.AccessToken != tt.token {
					t.Fatalf("got %+v, %v; want token %q", got, err, tt.token)
				}
				return
			}
			var pe *oauthflow.ProviderError
			if got != nil || !errors.As(err, &pe) || pe.Code != tt.code || pe.Description != tt.desc || pe.StatusCode != tt.r.status {
				t.Fatalf("got %+v, %#v; want code %q description %q", got, err, tt.code, tt.desc)
			}
		})
	}
}
