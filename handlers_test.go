package oauthflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
				_, err := env.mod(0).Sessions.Peek(context.Background(), doc.State)
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
