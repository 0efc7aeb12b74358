package oauthflow_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

func TestCallbackSuccess(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	run, doc := env.startSignIn(0, "alice")
	assert.Equal(t, oauthflow.PromptPending, doc.Status)
	assert.Equal(t, "demo", doc.Provider)
	assert.Len(t, doc.State, 43, "32 random bytes, base64url")
	assert.Equal(t, oauthflow.RunWaiting, run.Status)
	assert.Equal(t, oauthflow.StateAwaitingAuth, run.State)

	status, body, h := get(t, env.consent(doc.AuthURL, 0))
	assert.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "Demo &lt;Cloud&gt; account connected", "the display name, escaped")
	assert.Contains(t, body, "window.close()", "a popup closes itself")
	assertPageHeaders(t, h)

	assert.Equal(t, oauthflow.PromptSuccess, env.prompt(run.ID).Status)
	r := env.run(run.ID)
	assert.Equal(t, oauthflow.RunCompleted, r.Status)
	assert.JSONEq(t, `{"authenticated":true}`, string(r.Result))
	tok, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
	require.NoError(t, err)
	assert.NotEmpty(t, tok)
	assert.Contains(t, env.events.kinds(), oauthflow.EventConnected)
	assert.EqualValues(t, 1, env.as.Stats().CodesExchanged)
}

func assertPageHeaders(t *testing.T, h http.Header) {
	t.Helper()
	assert.Equal(t, "no-store", h.Get("Cache-Control"))
	assert.Equal(t, "no-referrer", h.Get("Referrer-Policy"))
	assert.Equal(t, "DENY", h.Get("X-Frame-Options"))
	csp := h.Get("Content-Security-Policy")
	assert.Contains(t, csp, "default-src 'none'")
	assert.Contains(t, csp, "script-src 'nonce-")
	assert.NotContains(t, csp, "unsafe-inline")
	assert.Contains(t, csp, "frame-ancestors 'none'")
}

func TestCallbackFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		arrange    func(env *flowEnv)
		callback   func(env *flowEnv, redirect string) string // the URL delivered
		wantStatus int
		wantBody   string
		wantPrompt string // "" = not checked
		wantRun    string
	}{
		{name: "provider error redirect", wantStatus: 400, wantBody: "Sign-in not completed",
			arrange:  func(env *flowEnv) { env.as.DenyNext() },
			callback: func(_ *flowEnv, r string) string { return r }, wantPrompt: oauthflow.PromptError, wantRun: oauthflow.RunWaiting},
		{name: "code missing", wantStatus: 400, wantBody: "Invalid callback",
			callback: func(_ *flowEnv, r string) string { return dropParam(r, "code") }, wantPrompt: oauthflow.PromptPending},
		{name: "state missing", wantStatus: 400, wantBody: "Invalid callback",
			callback: func(_ *flowEnv, r string) string { return dropParam(r, "state") }, wantPrompt: oauthflow.PromptPending},
		{name: "state unknown", wantStatus: 400, wantBody: "expired or was already used",
			callback: func(_ *flowEnv, r string) string { return setParam(r, "state", unknownState) }, wantPrompt: oauthflow.PromptPending},
		{name: "state not of the issued form", wantStatus: 400, wantBody: "Invalid callback",
			callback: func(_ *flowEnv, r string) string { return setParam(r, "state", "forged") }, wantPrompt: oauthflow.PromptPending},
		{name: "provider rejects the code", wantStatus: 400, wantBody: "Sign-in not completed",
			arrange:  func(env *flowEnv) { env.as.FailNext(authserver.Failure{Error: "invalid_grant"}) },
			callback: func(_ *flowEnv, r string) string { return r }, wantPrompt: oauthflow.PromptError, wantRun: oauthflow.RunFailed},
		{name: "provider 5xx", wantStatus: 502, wantBody: "could not be reached",
			arrange:  func(env *flowEnv) { env.as.FailNext(authserver.Failure{Status: 503}) },
			callback: func(_ *flowEnv, r string) string { return r }, wantPrompt: oauthflow.PromptError, wantRun: oauthflow.RunFailed},
		{name: "store unreachable", wantStatus: 503, wantBody: "Temporarily unavailable",
			callback: func(env *flowEnv, r string) string { env.kv.down.Store(true); return r }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newFlowEnv(t, envOptions{})
			run, doc := env.startSignIn(0, "alice")
			if tt.arrange != nil {
				tt.arrange(env)
			}
			status, body, h := get(t, tt.callback(env, env.consent(doc.AuthURL, 0)))
			env.kv.down.Store(false)
			assert.Equal(t, tt.wantStatus, status)
			assert.Contains(t, body, tt.wantBody)
			assertPageHeaders(t, h)
			assert.NotContains(t, body, "oauthflow: ", "internal error text reached the page")
			assert.NotContains(t, body, "invalid_grant:")
			if tt.wantPrompt != "" {
				assert.Equal(t, tt.wantPrompt, env.prompt(run.ID).Status)
			}
			if tt.wantRun != "" {
				r := env.run(run.ID)
				assert.Equal(t, tt.wantRun, r.Status)
				if r.Status == oauthflow.RunFailed {
					assert.JSONEq(t, `{"authenticated":false}`, string(r.Result))
				}
			}
			_, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken, "no tokens stored")
		})
	}
}

// A provider error at the redirect does not consume the sign-in: the same link works again.
func TestProviderErrorKeepsSessionForRetry(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	run, doc := env.startSignIn(0, "alice")
	env.as.DenyNext()
	status, _, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, oauthflow.PromptError, env.prompt(run.ID).Status)
	assert.Contains(t, env.events.kinds(), oauthflow.EventFlowFailed)

	status, _, _ = get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusOK, status, "the same link succeeds after a denial")
	assert.Equal(t, oauthflow.PromptSuccess, env.prompt(run.ID).Status)
}

func TestCallbackEscapesErrorDescription(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	_, doc := env.startSignIn(0, "alice")
	u, _ := url.Parse(env.replicas[0].api.URL + oauthflow.CallbackPath)
	u.RawQuery = url.Values{"error": {"access_denied"}, "state": {doc.State},
		"error_description": {`<script>alert("x")</script><img src=x onerror=alert(1)>`}}.Encode()
	status, body, _ := get(t, u.String())
	assert.Equal(t, http.StatusBadRequest, status)
	assert.NotContains(t, body, "<script>alert")
	assert.NotContains(t, body, "<img src=x")
	assert.Contains(t, body, "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;")
}

func TestCompleteEndpoint(t *testing.T) {
	t.Parallel()
	type answer struct {
		status int
		error  string
	}
	tests := []struct {
		name        string
		contentType string
		body        func(env *flowEnv, code, state string) string
		arrange     func(env *flowEnv)
		want        answer
		wantTokens  bool
	}{
		{name: "success", contentType: "application/json", wantTokens: true, want: answer{200, ""},
			body: func(_ *flowEnv, code, state string) string { return `{"code":"` + code + `","state":"` + state + `"}` }},
		{name: "charset parameter is fine", contentType: "application/json; charset=utf-8", wantTokens: true, want: answer{200, ""},
			body: func(_ *flowEnv, code, state string) string { return `{"code":"` + code + `","state":"` + state + `"}` }},
		{name: "provider error report", contentType: "application/json", want: answer{200, ""},
			body: func(_ *flowEnv, _, state string) string {
				return `{"state":"` + state + `","error":"access_denied","error_description":"no"}`
			}},
		{name: "wrong content type", contentType: "text/plain", want: answer{415, "unsupported_media_type"},
			body: func(_ *flowEnv, code, state string) string { return `{"code":"` + code + `","state":"` + state + `"}` }},
		{name: "form body", contentType: "application/x-www-form-urlencoded", want: answer{415, "unsupported_media_type"},
			body: func(_ *flowEnv, code, state string) string { return "code=" + code + "&state=" + state }},
		{name: "1 MiB body", contentType: "application/json", want: answer{413, "request_too_large"},
			body: func(_ *flowEnv, code, state string) string {
				return `{"code":"` + code + `","state":"` + state + `","error_description":"` + strings.Repeat("A", 1<<20) + `"}`
			}},
		{name: "malformed JSON", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, code, state string) string { return `{"code":"` + code }},
		{name: "unknown field", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, code, state string) string {
				return `{"code":"` + code + `","state":"` + state + `","admin":true}`
			}},
		{name: "two JSON values", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, code, state string) string {
				return `{"code":"` + code + `","state":"` + state + `"} {}`
			}},
		{name: "empty code", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, _, state string) string { return `{"code":"","state":"` + state + `"}` }},
		{name: "empty state", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, code, _ string) string { return `{"code":"` + code + `","state":""}` }},
		{name: "no state field", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, code, _ string) string { return `{"code":"` + code + `"}` }},
		{name: "an error without a state", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(*flowEnv, string, string) string { return `{"error":"access_denied"}` }},
		{name: "code too long", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, _, state string) string {
				return `{"code":"` + strings.Repeat("c", 5000) + `","state":"` + state + `"}`
			}},
		{name: "unknown state", contentType: "application/json", want: answer{400, "invalid_state"},
			body: func(_ *flowEnv, code, _ string) string {
				return `{"code":"` + code + `","state":"` + unknownState + `"}`
			}},
		{name: "state not of the issued form", contentType: "application/json", want: answer{400, "invalid_request"},
			body: func(_ *flowEnv, code, _ string) string { return `{"code":"` + code + `","state":"nope"}` }},
		{name: "provider rejects the code", contentType: "application/json", want: answer{400, "exchange_failed"},
			arrange: func(env *flowEnv) { env.as.FailNext(authserver.Failure{Error: "invalid_grant"}) },
			body:    func(_ *flowEnv, code, state string) string { return `{"code":"` + code + `","state":"` + state + `"}` }},
		{name: "provider unreachable", contentType: "application/json", want: answer{502, "provider_unavailable"},
			arrange: func(env *flowEnv) { env.as.FailNext(authserver.Failure{Status: 500}) },
			body:    func(_ *flowEnv, code, state string) string { return `{"code":"` + code + `","state":"` + state + `"}` }},
		{name: "store unreachable", contentType: "application/json", want: answer{503, "store_unavailable"},
			body: func(env *flowEnv, code, state string) string {
				env.kv.down.Store(true)
				return `{"code":"` + code + `","state":"` + state + `"}`
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newFlowEnv(t, envOptions{})
			run, doc := env.startSignIn(0, "alice")
			if tt.arrange != nil {
				tt.arrange(env)
			}
			redirect, _ := url.Parse(env.consent(doc.AuthURL, 0))
			code := redirect.Query().Get("code")
			status, out := env.postComplete(0, tt.contentType, tt.body(env, code, doc.State))
			env.kv.down.Store(false)
			assert.Equal(t, tt.want.status, status, "answer %v", out)
			if tt.want.error == "" {
				assert.Equal(t, map[string]any{"ok": true, "provider": "demo", "providerName": "Demo <Cloud>"}, out)
			} else {
				assert.Equal(t, false, out["ok"])
				assert.Equal(t, tt.want.error, out["error"])
				assert.NotEmpty(t, out["message"])
				assert.NotContains(t, out["message"], "oauthflow: ", "internal error text reached the client")
			}
			_, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
			assert.Equal(t, tt.wantTokens, err == nil, "tokens stored: %v", err)
			if tt.want.status == 415 || tt.want.status == 413 || tt.want.error == "invalid_request" {
				// Nothing else happened: the sign-in is still pending and usable.
				assert.Equal(t, oauthflow.PromptPending, env.prompt(run.ID).Status)
				_, err := oauthflow.PeekSession(env.mod(0).Sessions, context.Background(), doc.State)
				assert.NoError(t, err, "the sign-in must not be consumed")
				assert.Zero(t, env.as.Stats().CodeRequests, "no code exchange")
			}
		})
	}
}

// An internal failure (here a provider's ExchangeCode panics, which is
// recovered into an error that is neither a provider's answer nor a store
// failure) answers 500 on both endpoints, and none of its text reaches the client.
func TestInternalFailureAnswers500(t *testing.T) {
	t.Parallel()
	const secret = "secret internal detail"
	tests := []struct {
		name    string
		deliver func(t *testing.T, env *flowEnv, state string) (int, string)
		check   func(t *testing.T, body string)
	}{
		{name: "GET callback", deliver: func(t *testing.T, env *flowEnv, state string) (int, string) {
			status, body, h := get(t, env.replicas[0].api.URL+oauthflow.CallbackPath+"?"+
				url.Values{"code": {"c0de"}, "state": {state}}.Encode())
			assertPageHeaders(t, h)
			return status, body
		}, check: func(t *testing.T, body string) {
			assert.Contains(t, body, "Something went wrong")
			assert.Contains(t, body, `data-status="error"`)
		}},
		{name: "POST complete", deliver: func(t *testing.T, env *flowEnv, state string) (int, string) {
			resp, err := http.Post(env.replicas[0].api.URL+oauthflow.CompletePath, "application/json",
				strings.NewReader(`{"code":"c0de","state":"`+state+`"}`))
			require.NoError(t, err)
			defer func() { _ = resp.Body.Close() }()
			b, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(b)
		}, check: func(t *testing.T, body string) {
			var out map[string]any
			require.NoError(t, json.Unmarshal([]byte(body), &out), body)
			assert.Equal(t, false, out["ok"])
			assert.Equal(t, "internal_error", out["error"])
			assert.NotEmpty(t, out["message"])
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := newFlowEnv(t, envOptions{setup: func(m *oauthflow.Module) {
				require.NoError(t, m.Registry.Register(exchangePanics{newFakeProvider("boom"), secret}))
			}})
			// A sign-in started by build_oauth_url itself, outside a workflow.
			res, err := env.mod(0).BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"},
				json.RawMessage(`{"provider":"boom","scopes":[]}`))
			require.NoError(t, err)
			var built oauthflow.BuildOAuthURLResult
			require.NoError(t, json.Unmarshal(res, &built))

			status, body := tt.deliver(t, env, built.State)
			assert.Equal(t, http.StatusInternalServerError, status, body)
			tt.check(t, body)
			for _, leak := range []string{secret, "panicked", "ExchangeCode", "oauthflow: "} {
				assert.NotContains(t, body, leak, "internal error text reached the client")
			}
		})
	}
}

// exchangePanics is a provider whose ExchangeCode panics with text no client may see.
type exchangePanics struct {
	*fakeProvider
	secret string
}

func (p exchangePanics) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	panic(p.secret)
}

func TestHandlersLeaveMethodsToTheMux(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	resp, err := http.Post(env.replicas[0].api.URL+oauthflow.CallbackPath, "text/plain", nil)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
	resp, err = http.Get(env.replicas[0].api.URL + oauthflow.CompletePath)
	require.NoError(t, err)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusMethodNotAllowed, resp.StatusCode)
}

// The Done-when race: 100 deliveries of one callback URL make one exchange.
func TestConcurrentCallbackDeliveries(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{replicas: 2})
	_, doc := env.startSignIn(0, "alice")
	redirect := env.consent(doc.AuthURL, 0)
	other := strings.Replace(redirect, env.replicas[0].api.URL, env.replicas[1].api.URL, 1)
	statuses := make([]int, 100)
	bodies := make([]string, 100)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			u := redirect
			if i%2 == 1 {
				u = other
			}
			statuses[i], bodies[i], _ = get(t, u)
		}()
	}
	close(start)
	waitfor.Group(t, &wg, "100 callback deliveries")
	ok := 0
	for i, s := range statuses {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusBadRequest:
			assert.Contains(t, bodies[i], "expired or was already used")
		default:
			t.Errorf("delivery %d answered %d", i, s)
		}
	}
	assert.Equal(t, 1, ok, "exactly one delivery succeeds")
	assert.EqualValues(t, 1, env.as.Stats().CodeRequests, "exactly one code exchange")
	_, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
	assert.NoError(t, err, "one token record")
}

// A flow started on one replica completes through another that shares the store.
func TestFlowAcrossReplicas(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{replicas: 2})
	run, doc := env.startSignIn(0, "alice")
	status, _, _ := get(t, env.consent(doc.AuthURL, 1))
	require.Equal(t, http.StatusOK, status)
	tok, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
	require.NoError(t, err)
	assert.NotEmpty(t, tok)
	assert.Equal(t, oauthflow.RunCompleted, env.run(run.ID).Status)
}

// The refresh path through the real HTTP provider: an expired token is renewed on read.
func TestFlowThenRefresh(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{as: authserver.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true}})
	_, doc := env.startSignIn(0, "alice")
	status, _, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusOK, status)
	stored, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
	require.NoError(t, err)
	// A 30 s lifetime is inside the 60 s skew: the read refreshes, and rotation replaces the refresh token.
	tok, err := env.mod(0).Tokens.GetValidAccessToken(context.Background(), "alice", "demo")
	require.NoError(t, err)
	assert.NotEqual(t, stored.AccessToken, tok)
	assert.EqualValues(t, 1, env.as.Stats().Refreshes)
	after, err := env.mod(0).Tokens.GetTokens(context.Background(), "alice", "demo")
	require.NoError(t, err)
	assert.NotEqual(t, stored.RefreshToken, after.RefreshToken)
	assert.Equal(t, tok, after.AccessToken)
}

func dropParam(raw, name string) string {
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Del(name)
	u.RawQuery = q.Encode()
	return u.String()
}

func setParam(raw, name, value string) string {
	u, _ := url.Parse(raw)
	q := u.Query()
	q.Set(name, value)
	u.RawQuery = q.Encode()
	return u.String()
}

// The callback's extra parameters the provider declares (CallbackFielder)
// are kept however many others its redirect carries, and whatever their
// names: undeclared ones never crowd a declared one out. The answer's own
// parameters are never kept, even declared.
func TestCallbackKeepsDeclaredFieldsAmongOthers(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{demo: func(c *providers.Config) { c.CallbackFields = []string{"realmId", "code", "zone"} }})
	extra := url.Values{"realmId": {"4620816365"}, "zone": {"eu"}}
	for i := range 12 {
		extra.Set(fmt.Sprintf("a%02d", i), "x") // sorts before both
	}
	c, _ := signInAndList(t, env, "&"+extra.Encode())
	assert.Equal(t, map[string]string{"realmId": "4620816365", "zone": "eu"}, c.Metadata)
}

// POST /complete carries the extra fields the frontend callback page
// forwards; the provider's declared ones are kept with the tokens.
func TestCompleteKeepsDeclaredFields(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{demo: func(c *providers.Config) { c.CallbackFields = []string{"realmId"} }})
	_, doc := env.startSignIn(0, "alice")
	q, err := url.Parse(env.consent(doc.AuthURL, 0))
	require.NoError(t, err)
	body, err := json.Marshal(map[string]any{"code": q.Query().Get("code"), "state": doc.State,
		"fields": map[string]string{"realmId": "4620816365", "other": "x"}})
	require.NoError(t, err)
	status, out := env.postComplete(0, "application/json", string(body))
	require.Equal(t, http.StatusOK, status, out)
	conns, err := env.mod(0).Tokens.Connections(context.Background(), "alice")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	assert.Equal(t, map[string]string{"realmId": "4620816365"}, conns[0].Metadata)
}

// newCORSModule returns a mux with a module mounted whose FrontendOrigins are origins.
func newCORSModule(t *testing.T, origins ...string) *http.ServeMux {
	t.Helper()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(),
		Logger: slog.New(slog.DiscardHandler), FrontendOrigins: origins})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	mux := http.NewServeMux()
	m.Mount(mux)
	return mux
}

func TestFrontendOriginsRefusesWhatIsNotAnOrigin(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"", "*", "https://*.example.com", "null", "app.example.com", "//app.example.com",
		"ftp://app.example.com", "javascript:alert(1)", "https://", "https://:8080",
		"https://app.example.com/path", "https://app.example.com/?", "https://app.example.com?x=1",
		"https://app.example.com#f", "https://user:pw@app.example.com", "https://app.example.com:",
		"https://app.example.com:0", "https://app.example.com:65536", "https://app.example.com:08080",
		"https://app example.com", "https://bücher.example", "https://app.example.com\"';",
		"http://[::1%25eth0]:3000", "http://[not:an:ip]",
	} {
		t.Run(bad, func(t *testing.T) {
			t.Parallel()
			_, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(),
				FrontendOrigins: []string{"https://ok.example", bad}})
			require.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "FrontendOrigins[1]")
		})
	}
}

// An origin is normalised at New to what a browser sends in Origin, so a
// configured spelling that differs still matches.
func TestFrontendOriginsAreNormalised(t *testing.T) {
	t.Parallel()
	tests := []struct{ configured, origin string }{
		{"HTTPS://App.Example.COM:443/", "https://app.example.com"},
		{"http://localhost:80", "http://localhost"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"https://app.example.com:8443", "https://app.example.com:8443"},
		{"http://[0:0:0:0:0:0:0:1]:3000", "http://[::1]:3000"},
	}
	for _, tt := range tests {
		t.Run(tt.configured, func(t *testing.T) {
			t.Parallel()
			res := preflight(newCORSModule(t, tt.configured, tt.configured), tt.origin)
			assert.Equal(t, http.StatusNoContent, res.Code)
			assert.Equal(t, tt.origin, res.Header().Get("Access-Control-Allow-Origin"))
		})
	}
}

func preflight(h http.Handler, origin string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodOptions, oauthflow.CompletePath, nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Access-Control-Request-Method", http.MethodPost)
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func postFrom(h http.Handler, origin, contentType, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, oauthflow.CompletePath, strings.NewReader(body))
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// corsHeaders returns the response's Access-Control-* headers.
func corsHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = v
		}
	}
	return out
}

const frontend = "http://localhost:3000"

func TestCompletePreflight(t *testing.T) {
	t.Parallel()
	mux := newCORSModule(t, frontend, "https://app.example.com")
	t.Run("allowed origin", func(t *testing.T) {
		t.Parallel()
		res := preflight(mux, frontend)
		assert.Equal(t, http.StatusNoContent, res.Code)
		assert.Equal(t, http.Header{
			"Access-Control-Allow-Origin":  {frontend},
			"Access-Control-Allow-Methods": {"POST"},
			"Access-Control-Allow-Headers": {"Content-Type"},
			"Access-Control-Max-Age":       {"600"},
		}, corsHeaders(res.Header()), "exactly these: no credentials, no wildcard")
		assert.Equal(t, []string{"Origin"}, res.Header().Values("Vary"))
	})
	for name, origin := range map[string]string{
		"other origin":            "https://evil.example",
		"another port":            "http://localhost:3001",
		"another scheme":          "https://localhost:3000",
		"a suffix of an allowed":  "https://app.example.com.evil.example",
		"the opaque origin":       "null",
		"no Origin":               "",
		"an allowed one, unusual": "HTTP://LOCALHOST:3000", // browsers send it serialised
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := preflight(mux, origin)
			assert.Equal(t, http.StatusForbidden, res.Code)
			assert.Empty(t, corsHeaders(res.Header()))
			assert.Empty(t, res.Header().Values("Vary"))
		})
	}
	t.Run("no frontend origins configured", func(t *testing.T) {
		t.Parallel()
		res := preflight(newCORSModule(t), frontend)
		assert.Equal(t, http.StatusForbidden, res.Code)
		assert.Empty(t, corsHeaders(res.Header()))
	})
}

// The POST itself carries the allowed origin on every answer, errors included,
// so the frontend can read why a completion failed; any other origin gets none.
func TestCompleteCORS(t *testing.T) {
	t.Parallel()
	mux := newCORSModule(t, frontend)
	tests := []struct {
		name, origin, contentType, body string
		status                          int
		allow                           string
	}{
		{"allowed origin, unknown state", frontend, "application/json", `{"code":"c","state":"` + unknownState + `"}`, http.StatusBadRequest, frontend},
		{"allowed origin, not JSON", frontend, "text/plain", `{}`, http.StatusUnsupportedMediaType, frontend},
		{"other origin", "https://evil.example", "application/json", `{"code":"c","state":"` + unknownState + `"}`, http.StatusBadRequest, ""},
		{"no Origin (same origin or not a browser)", "", "application/json", `{"code":"c","state":"` + unknownState + `"}`, http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := postFrom(mux, tt.origin, tt.contentType, tt.body)
			assert.Equal(t, tt.status, res.Code, res.Body.String())
			if tt.allow == "" {
				assert.Empty(t, corsHeaders(res.Header()))
				return
			}
			assert.Equal(t, http.Header{"Access-Control-Allow-Origin": {tt.allow}}, corsHeaders(res.Header()))
			assert.Equal(t, []string{"Origin"}, res.Header().Values("Vary"))
		})
	}
}

// A module that checks the completing browser's user lets allowed frontends
// send their cookies with POST /complete; one that does not, never.
func TestCompleteAllowsCredentialsOnlyWhenItChecksTheUser(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]oauthflow.Config{
		"VerifyUser":  {VerifyUser: func(*http.Request, string) error { return nil }},
		"BindSignIns": {BindSignIns: true},
		"neither":     {},
	} {
		cfg.KV, cfg.FrontendOrigins = oauthflow.NewMemoryKV(), []string{frontend}
		m, err := oauthflow.New(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		mux := http.NewServeMux()
		m.Mount(mux)
		want := "true"
		if name == "neither" {
			want = ""
		}
		res := preflight(mux, frontend)
		assert.Equal(t, want, res.Header().Get("Access-Control-Allow-Credentials"), name)
		assert.Equal(t, frontend, res.Header().Get("Access-Control-Allow-Origin"), name)
	}
}

// fuzzModule is a module over memory with a fake provider and one pending
// sign-in under the state "seed-state".
func fuzzModule(f *testing.F) *oauthflow.Module {
	reg := oauthflow.NewRegistry()
	if err := reg.Register(newFakeProvider("acme")); err != nil {
		f.Fatal(err)
	}
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := m.StartSignIn(context.Background(), "alice", "acme"); err != nil {
		f.Fatal(err)
	}
	if err := m.Sessions.Register(context.Background(), "seed-state", oauthflow.Session{UserID: "alice", Provider: "acme"}); err != nil {
		f.Fatal(err)
	}
	return m
}

var allowedStatus = map[int]bool{200: true, 400: true, 413: true, 415: true, 502: true, 503: true}

func FuzzCallbackQuery(f *testing.F) {
	for _, seed := range []string{
		"code=abc&state=seed-state",
		"code=abc&state=unknown",
		"error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E&state=seed-state",
		"code=&state=",
		"state=seed-state&iss=http%3A%2F%2Fevil",
		"code=a&code=b&state=seed-state&state=x",
		"%zz=%zz&code=%00",
		strings.Repeat("code=x&", 100),
	} {
		f.Add(seed)
	}
	h := fuzzModule(f).CallbackHandler()
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/oauth/callback", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowedStatus[rec.Code] {
			t.Fatalf("query %q answered %d", query, rec.Code)
		}
		if strings.Contains(rec.Body.String(), "<script>alert") {
			t.Fatalf("query %q reached the page unescaped", query)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Fatal("page without a Content-Security-Policy")
		}
	})
}

func FuzzCompleteBody(f *testing.F) {
	for _, seed := range []string{
		`{"code":"abc","state":"seed-state"}`,
		`{"code":"abc","state":"unknown"}`,
		`{"state":"seed-state","error":"access_denied","error_description":"<b>no</b>"}`,
		`{"code":"abc","state":"seed-state","extra":1}`,
		`{"code":1}`, `[]`, `null`, `{`, ``, `{"code":"a","state":"b"}{}`,
		`{"code":"` + strings.Repeat("x", 5000) + `","state":"s"}`,
	} {
		f.Add(seed)
	}
	h := fuzzModule(f).CompleteHandler()
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/oauth/complete", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowedStatus[rec.Code] {
			t.Fatalf("body %q answered %d", body, rec.Code)
		}
		var out struct {
			OK    *bool  `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.OK == nil {
			t.Fatalf("body %q: answer is not {ok:...} JSON: %q", body, rec.Body.String())
		}
		if *out.OK != (rec.Code == 200) || (!*out.OK && out.Error == "") {
			t.Fatalf("body %q: ok=%v with status %d and error %q", body, *out.OK, rec.Code, out.Error)
		}
	})
}

// textBrowser is a user's browser that runs no script (a text browser, or
// JavaScript turned off): it follows redirects, keeps cookies, reads pages,
// and submits the one form a page shows, <noscript> content included.
type textBrowser struct {
	t       *testing.T
	c       *http.Client
	cookies []*http.Cookie // sent with every request (the app's own login)
}

func newTextBrowser(t *testing.T, cookies ...*http.Cookie) *textBrowser {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &textBrowser{t: t, c: &http.Client{Jar: jar}, cookies: cookies}
}

// textPage is a page as the text browser shows it.
type textPage struct {
	url    *url.URL
	status int
	body   string
}

var (
	formTag  = regexp.MustCompile(`<form\s[^>]*>`)
	inputTag = regexp.MustCompile(`<input\s[^>]*>`)
	attr     = regexp.MustCompile(`([a-z-]+)="([^"]*)"`)
	heading  = regexp.MustCompile(`(?s)<h1[^>]*>(.*?)</h1>`)
)

// open requests u (a POST sends form, from the page's origin) and reads the page.
func (b *textBrowser) open(method, u string, form url.Values) textPage {
	b.t.Helper()
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	require.NoError(b.t, err)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", req.URL.Scheme+"://"+req.URL.Host) // the app's own page holds the form
	}
	for _, c := range b.cookies {
		req.AddCookie(c)
	}
	resp, err := b.c.Do(req)
	require.NoError(b.t, err)
	defer func() { _ = resp.Body.Close() }()
	page, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	require.NoError(b.t, err)
	return textPage{url: resp.Request.URL, status: resp.StatusCode, body: string(page)}
}

// attrs reads a tag's attributes, unescaped.
func attrs(tag string) map[string]string {
	m := map[string]string{}
	for _, a := range attr.FindAllStringSubmatch(tag, -1) {
		m[a[1]] = html.UnescapeString(a[2])
	}
	return m
}

// submit sends the page's one form as the browser would: its fields to its
// action, resolved against the page's address, with its method.
func (b *textBrowser) submit(p textPage) textPage {
	b.t.Helper()
	forms := formTag.FindAllStringIndex(p.body, -1)
	require.Len(b.t, forms, 1, "the page shows one form:\n%s", p.body)
	form := attrs(p.body[forms[0][0]:forms[0][1]])
	end := strings.Index(p.body[forms[0][1]:], "</form>")
	require.GreaterOrEqual(b.t, end, 0, "the form is closed")
	fields := url.Values{}
	for _, in := range inputTag.FindAllString(p.body[forms[0][1]:forms[0][1]+end], -1) {
		a := attrs(in)
		fields.Add(a["name"], a["value"])
	}
	action, err := p.url.Parse(form["action"])
	require.NoError(b.t, err)
	if strings.EqualFold(form["method"], "post") {
		return b.open(http.MethodPost, action.String(), fields)
	}
	action.RawQuery = fields.Encode()
	return b.open(http.MethodGet, action.String(), nil)
}

func (p textPage) title() string {
	m := heading.FindStringSubmatch(p.body)
	if m == nil {
		return ""
	}
	return html.UnescapeString(strings.TrimSpace(m[1]))
}

// noJSApp is a host app whose provider redirects to the frontend callback
// page, served beside the API on one origin, as the agent's -terminal mode does.
func noJSApp(t *testing.T, o envOptions) (*flowEnv, *oauthflow.Module, string) {
	t.Helper()
	config := o.config
	o.config = nil
	env := newFlowEnv(t, o)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	mod := env.newModule(srv.URL+"/oauth/callback", nil, config)
	mod.Mount(mux)
	mux.Handle("GET /oauth/", mod.FrontendHandler(""))
	t.Cleanup(func() { _ = mod.Close() })
	return env, mod, srv.URL
}

// A user whose browser runs no script follows the sign-in link to the end:
// the provider sends them to the frontend callback page, whose form sends the
// answer to the API callback, whose page says the account is connected.
func TestSignInCompletesWithoutJavaScript(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	b := newTextBrowser(t)
	page := b.open(http.MethodGet, doc.AuthURL, nil)
	require.Equal(t, "/oauth/callback", page.url.Path, "the provider sent the browser to the frontend page")
	require.Equal(t, http.StatusOK, page.status)
	done := b.submit(page)
	require.Equal(t, oauthflow.CallbackPath, done.url.Path)
	require.Equal(t, http.StatusOK, done.status, done.body)
	require.Equal(t, "Demo <Cloud> account connected", done.title())
	_, err = mod.Tokens.GetValidAccessToken(t.Context(), "alice", "demo")
	require.NoError(t, err, "the tokens are stored")

	again := b.submit(page) // the same answer twice: the code is spent
	require.Equal(t, http.StatusBadRequest, again.status)
	require.Equal(t, "This sign-in link has expired or was already used", again.title())
}

// A denial at the provider reaches the run through the same form, and the
// page says the sign-in was not completed.
func TestSignInDenialWithoutJavaScript(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{as: authserver.Options{DenyAll: true}})
	run, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	b := newTextBrowser(t)
	done := b.submit(b.open(http.MethodGet, doc.AuthURL, nil))
	require.Equal(t, oauthflow.CallbackPath, done.url.Path)
	require.Equal(t, "Sign-in not completed", done.title(), done.body)
	var prompt oauthflow.OAuthPromptDocument
	require.NoError(t, mod.Engine.Document(t.Context(), run.ID, oauthflow.PromptDocumentName, &prompt))
	require.Equal(t, oauthflow.PromptError, prompt.Status, "the run knows")
}

// Without script the checks of who may complete a sign-in hold as they do
// for the API callback: Config.VerifyUser refuses another user's browser,
// consuming nothing, and the user who started it then completes it.
func TestSignInWithoutJavaScriptKeepsVerifyUser(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{config: func(c *oauthflow.Config) {
		c.VerifyUser = func(r *http.Request, userID string) error {
			if c, err := r.Cookie(appUserCookie); err == nil && c.Value == userID {
				return nil
			}
			return errors.New("not the app's user " + userID)
		}
	}})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	mallory := newTextBrowser(t, &http.Cookie{Name: appUserCookie, Value: "mallory"})
	page := mallory.open(http.MethodGet, doc.AuthURL, nil)
	refused := mallory.submit(page)
	require.Equal(t, http.StatusForbidden, refused.status)
	require.Equal(t, "This sign-in is not yours", refused.title())
	_, err = mod.Tokens.GetValidAccessToken(t.Context(), "mallory", "demo")
	require.ErrorIs(t, err, oauthflow.ErrNoToken)

	alice := newTextBrowser(t, &http.Cookie{Name: appUserCookie, Value: "alice"})
	done := alice.submit(page) // the answer mallory's browser was shown: nothing was consumed
	require.Equal(t, http.StatusOK, done.status, done.body)
	_, err = mod.Tokens.GetValidAccessToken(t.Context(), "alice", "demo")
	require.NoError(t, err)
}

// A bound sign-in still needs its cookie: the browser that opened it through
// the app's form to POST /start completes it without script; a browser that
// only followed the link is refused.
func TestSignInWithoutJavaScriptKeepsTheBindingCookie(t *testing.T) {
	t.Parallel()
	_, mod, base := noJSApp(t, envOptions{config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)
	require.NotEmpty(t, doc.Binding)

	linkOnly := newTextBrowser(t)
	page := linkOnly.open(http.MethodGet, doc.AuthURL, nil)
	refused := linkOnly.submit(page)
	require.Equal(t, http.StatusForbidden, refused.status)
	require.Equal(t, "This sign-in is not yours", refused.title())

	opener := newTextBrowser(t) // the app's page holds a form that posts to /start
	own := opener.open(http.MethodPost, base+oauthflow.StartPath, url.Values{"state": {doc.State}, "binding": {doc.Binding}})
	require.Equal(t, "/oauth/callback", own.url.Path, "on to the provider and back to the frontend page")
	done := opener.submit(own)
	require.Equal(t, http.StatusOK, done.status, done.body)
	require.Equal(t, "Demo <Cloud> account connected", done.title())
}

// Without script, the frontend page's form carries the redirect's parameters
// the provider keeps with the tokens (QuickBooks' realmId) with the answer,
// and the API keeps them; the redirect's other parameters stay behind.
func TestSignInWithoutJavaScriptKeepsDeclaredFields(t *testing.T) {
	t.Parallel()
	_, mod, _ := noJSApp(t, envOptions{demo: func(c *providers.Config) { c.CallbackFields = []string{"realmId"} }})
	_, doc, err := mod.StartSignIn(t.Context(), "alice", "demo")
	require.NoError(t, err)

	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(doc.AuthURL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	redirect, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	q := redirect.Query()
	q.Set("realmId", "4620816365")
	q.Set("other", "LEAKED")
	redirect.RawQuery = q.Encode()

	b := newTextBrowser(t)
	page := b.open(http.MethodGet, redirect.String(), nil)
	require.Equal(t, "/oauth/callback", page.url.Path)
	require.NotContains(t, page.body, "LEAKED")
	done := b.submit(page)
	require.Equal(t, http.StatusOK, done.status, done.body)
	conns, err := mod.Tokens.Connections(t.Context(), "alice")
	require.NoError(t, err)
	require.Len(t, conns, 1)
	assert.Equal(t, map[string]string{"realmId": "4620816365"}, conns[0].Metadata)
}

// The callback page's script tells a popup's opener the outcome with the page's
// own origin as the target and, when Config.FrontendOrigins lists some, each of
// them, never "*" (which would hand the state to whatever page opened the popup).
// The page is rendered by CallbackHandler and its inline script run under node
// against a stub window whose opener records postMessage.
func TestCallbackPageScriptPostsToItsOwnOriginAndTheFrontends(t *testing.T) {
	t.Parallel()
	node := nodeOrSkip(t)
	env := newFlowEnv(t, envOptions{})
	frontends := []string{"http://localhost:3000", "https://app.example.com"}
	// The API's own origin listed as a frontend too is still posted to once.
	fapi := startFrontendsAPI(t, env, func(own string) []string { return slices.Concat(frontends, []string{own}) })
	apis := []struct {
		name, origin string
		start        func() string // a sign-in's authorization URL
		frontends    []string      // the targets after the page's own origin
	}{
		{"no frontend origins", env.replicas[0].api.URL, func() string {
			_, doc := env.startSignIn(0, "alice")
			return doc.AuthURL
		}, nil},
		{"frontend origins", fapi.url, func() string {
			_, doc, err := fapi.mod.StartSignIn(context.Background(), "alice", "demo")
			require.NoError(t, err)
			return doc.AuthURL
		}, frontends},
	}
	for _, api := range apis {
		t.Run(api.name, func(t *testing.T) {
			authURL := api.start()
			state := mustQuery(t, authURL, "state")
			tests := []struct {
				name, url               string
				status, state, provider string // what the opener is told
				closes                  bool
			}{
				{"success", authorizeRedirect(t, authURL, api.origin), "success", state, "demo", true},
				{"expired link", api.origin + oauthflow.CallbackPath + "?code=c0de&state=" + unknownState, "error", unknownState, "", false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					_, page, _ := get(t, tt.url)
					got := runPageScript(t, node, page, api.origin)
					want := append([]string{api.origin}, api.frontends...)
					require.Len(t, got.Posted, len(want), "the page posts its outcome to its own origin and each frontend, once")
					for i, p := range got.Posted {
						assert.NotEqual(t, "*", p.TargetOrigin, "the outcome is posted to any origin")
						assert.Equal(t, want[i], p.TargetOrigin, "the outcome is posted to the listed origins only")
						assert.Equal(t, "oauthflow:result", p.Data["type"])
						assert.Equal(t, tt.status, p.Data["status"])
						assert.Equal(t, tt.state, p.Data["state"])
						assert.Equal(t, tt.provider, p.Data["provider"])
					}
					assert.Equal(t, tt.closes, got.Closed, "the popup closes itself after a success only")
				})
			}
		})
	}
}

// frontendsAPI is a host app whose module has FrontendOrigins set.
type frontendsAPI struct {
	mod *oauthflow.Module
	url string
}

// startFrontendsAPI serves a module with env's authorization server as its
// "demo" provider and FrontendOrigins from origins(its own URL).
func startFrontendsAPI(t *testing.T, env *flowEnv, origins func(own string) []string) frontendsAPI {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	demo, err := providers.NewOAuth2(providers.Config{ID: "demo", DisplayName: "Demo", AuthURL: env.as.AuthURL(),
		TokenURL: env.as.TokenURL(), Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret", RedirectURL: srv.URL + oauthflow.CallbackPath})
	require.NoError(t, err)
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(demo))
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		Logger: slog.New(slog.DiscardHandler), FrontendOrigins: origins(srv.URL)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close() })
	mod.Mount(mux)
	return frontendsAPI{mod: mod, url: srv.URL}
}

// authorizeRedirect plays the user at the (auto-consenting) authorization
// server and returns where it redirects the browser, on origin.
func authorizeRedirect(t *testing.T, authURL, origin string) string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "authorize answered %d", resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	to, err := url.Parse(origin)
	require.NoError(t, err)
	loc.Scheme, loc.Host = to.Scheme, to.Host
	return loc.String()
}

func mustQuery(t *testing.T, rawURL, name string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	return u.Query().Get(name)
}

type pageScriptRun struct {
	Posted []struct {
		Data         map[string]string `json:"data"`
		TargetOrigin string            `json:"targetOrigin"`
	} `json:"posted"`
	Closed bool `json:"closed"`
}

// pageScriptHarness runs the page's script in a fresh context with a stub
// window (an open opener that records postMessage) and document (the result
// element's dataset), and prints what was posted.
const pageScriptHarness = `
const vm = require("node:vm");
const input = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const posted = [];
const window = {
  location: { origin: input.origin },
  opener: { closed: false, postMessage(data, targetOrigin) { posted.push({ data, targetOrigin }); } },
  closed: false,
  close() { window.closed = true; },
};
const document = { getElementById: (id) => (id === "oauthflow-result" ? { dataset: input.dataset } : null) };
vm.runInNewContext(input.script, { window, document });
console.log(JSON.stringify({ posted, closed: window.closed }));
`

var (
	inlineScript = regexp.MustCompile(`(?s)<script nonce="[^"]*">(.*?)</script>`)
	resultTag    = regexp.MustCompile(`<main id="oauthflow-result"[^>]*>`)
	dataAttr     = regexp.MustCompile(`data-([a-z]+)="([^"]*)"`)
)

// runPageScript runs page's inline script as if the page were served from origin.
func runPageScript(t *testing.T, node, page, origin string) pageScriptRun {
	t.Helper()
	script := inlineScript.FindStringSubmatch(page)
	require.NotNil(t, script, "no inline script in the page:\n%s", page)
	dataset := map[string]string{}
	for _, a := range dataAttr.FindAllStringSubmatch(resultTag.FindString(page), -1) {
		dataset[a[1]] = html.UnescapeString(a[2])
	}
	in, err := json.Marshal(map[string]any{"script": script[1], "origin": origin, "dataset": dataset})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "-e", pageScriptHarness)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node:\n%s", out)
	var run pageScriptRun
	require.NoError(t, json.Unmarshal(out, &run), "node printed:\n%s", out)
	return run
}

// nodeOrSkip returns node's path. Without node the test is skipped, except
// under CI=true, where it fails: CI must not pass with the page's script untested.
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required under CI=true to test the callback page's script")
		}
		t.Skip("node is not installed: the callback page's script is not tested")
	}
	return node
}

// A full-page sign-in (a plain "Connect" link, a phone browser) can return to
// the app: the callback page sends the browser to the sign-in's return
// address with the outcome added, by script and without one. Only the API's
// own origin and Config.FrontendOrigins are return addresses: anything else
// fails the sign-in, never an open redirect.
func TestSignInReturnsToTheApp(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) { c.FrontendOrigins = []string{"https://app.example"} }})
	m := env.mod(0)
	launch := func(user, returnTo string) (*oauthflow.Run, oauthflow.OAuthPromptDocument) {
		t.Helper()
		run, err := m.Engine.Launch(ctx, user, oauthflow.OAuthWorkflowName,
			oauthflow.OAuthWorkflowArgs{Provider: "demo", ReturnTo: returnTo}, oauthflow.RunOptions{})
		require.NoError(t, err)
		var doc oauthflow.OAuthPromptDocument
		require.NoError(t, m.Engine.Document(ctx, run.ID, oauthflow.PromptDocumentName, &doc))
		return run, doc
	}
	api := env.replicas[0].api.URL
	for _, tt := range []struct{ returnTo, want string }{
		{api + "/settings?tab=accounts", api + "/settings?oauth=success&provider=demo&tab=accounts"},
		{"https://app.example/connected", "https://app.example/connected?oauth=success&provider=demo"},
	} {
		_, doc := launch("alice", tt.returnTo)
		status, body, _ := get(t, env.consent(doc.AuthURL, 0))
		require.Equal(t, http.StatusOK, status, body)
		esc := html.EscapeString(tt.want)
		for _, part := range []string{`http-equiv="refresh" content="0;url=` + esc + `"`, `href="` + esc + `"`, `data-return-to="` + esc + `"`} {
			assert.Contains(t, body, part, "the page returns to %s", tt.want)
		}
	}

	_, doc := launch("bob", api+"/settings")
	env.as.DenyNext()
	status, body, _ := get(t, env.consent(doc.AuthURL, 0))
	require.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, html.EscapeString(api+"/settings?oauth=error&provider=demo"), "a denial returns too, saying so")

	for _, bad := range []string{"https://evil.example/x", "javascript:alert(1)", "//evil.example/x", "/relative", "https://user@app.example/x", "http://app.example/x"} {
		_, err := m.Engine.Launch(ctx, "carol", oauthflow.OAuthWorkflowName,
			oauthflow.OAuthWorkflowArgs{Provider: "demo", ReturnTo: bad}, oauthflow.RunOptions{})
		assert.ErrorIs(t, err, oauthflow.ErrInvalidArgument, "return address %q", bad)
	}
}
