package main

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests drive the sign-in with a code over HTTP, with Go clients: the
// page's endpoints, and the demo provider's verification page answered as the
// user would answer it on another device.

// waitLimit bounds every wait of a test; nothing asserts on time.
const waitLimit = time.Minute

// client is a browser's cookie jar: one quickstart user.
func client(t *testing.T) *http.Client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	require.NoError(t, err)
	return &http.Client{Jar: jar, Timeout: waitLimit}
}

func send(t *testing.T, c *http.Client, method, url, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.Do(req)
	require.NoError(t, err)
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, b
}

// sendJSON sends body as JSON, requires the status want and decodes the answer into v.
func sendJSON(t *testing.T, c *http.Client, method, url, body string, want int, v any) {
	t.Helper()
	status, b := send(t, c, method, url, "application/json", body)
	require.Equal(t, want, status, string(b))
	require.NoError(t, json.Unmarshal(b, v), string(b))
}

// deviceStarted is POST /app/connect-device's answer.
type deviceStarted struct {
	RunID  string                        `json:"runId"`
	Prompt oauthflow.OAuthPromptDocument `json:"prompt"`
}

type signInAnswer struct {
	Prompt oauthflow.OAuthPromptDocument `json:"prompt"`
}

func startDevice(t *testing.T, c *http.Client, base, provider string) deviceStarted {
	t.Helper()
	var started deviceStarted
	sendJSON(t, c, http.MethodPost, base+"/app/connect-device", `{"provider":"`+provider+`"}`, http.StatusOK, &started)
	return started
}

// waitSignIn polls GET /app/signins/{id}, as the page does, until the sign-in
// is no longer pending.
func waitSignIn(t *testing.T, c *http.Client, base, runID string) oauthflow.OAuthPromptDocument {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		var a signInAnswer
		sendJSON(t, c, http.MethodGet, base+"/app/signins/"+runID, "", http.StatusOK, &a)
		if a.Prompt.Status != oauthflow.PromptPending {
			return a.Prompt
		}
		select {
		case <-ctx.Done():
			t.Fatal("the sign-in stayed pending:", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

var (
	userCodeField  = regexp.MustCompile(`name="user_code" value="([^"]*)"`)
	loginHintField = regexp.MustCompile(`name="login_hint" value="([^"]*)"`)
)

// decide opens the verification URI, types code into its form, and answers it
// with decision ("allow" or "deny"), as the user would on another device.
func decide(t *testing.T, verificationURI, code, decision string) {
	t.Helper()
	c := client(t)
	status, page := send(t, c, http.MethodGet, verificationURI, "", "")
	require.Equal(t, http.StatusOK, status, string(page))
	require.Regexp(t, userCodeField, string(page), "the page asks for the code")
	hint := loginHintField.FindSubmatch(page)
	require.NotNil(t, hint)
	action, err := url.Parse(verificationURI)
	require.NoError(t, err)
	action, err = action.Parse("device") // the form's action
	require.NoError(t, err)
	form := url.Values{"user_code": {code}, "login_hint": {html.UnescapeString(string(hint[1]))}, "decision": {decision}}
	status, page = send(t, c, http.MethodPost, action.String(), "application/x-www-form-urlencoded", form.Encode())
	require.Equal(t, http.StatusOK, status, string(page))
}

// demoView is the demo provider's entry in GET /app/session.
func demoView(t *testing.T, c *http.Client, base string) providerView {
	t.Helper()
	var session struct{ Providers []providerView }
	sendJSON(t, c, http.MethodGet, base+"/app/session", "", http.StatusOK, &session)
	for _, v := range session.Providers {
		if v.ID == "demo" {
			return v
		}
	}
	t.Fatal("no demo provider in the session")
	return providerView{}
}

func TestDeviceSignInConnects(t *testing.T) {
	t.Parallel()
	_, base := serveApp(t, time.Hour)
	c := client(t)
	require.True(t, demoView(t, c, base).Device, "the page offers the demo a sign-in with a code")

	started := startDevice(t, c, base, "demo")
	p := started.Prompt
	assert.Equal(t, oauthflow.PromptPending, p.Status)
	assert.Equal(t, base+"/demo/device", p.VerificationURI)
	assert.Equal(t, p.VerificationURI+"?"+url.Values{"user_code": {p.UserCode}}.Encode(), p.VerificationURIComplete)
	assert.Greater(t, p.ExpiresAt, time.Now().UnixMilli())
	assert.Empty(t, p.AuthURL, "no link to follow")
	var polled signInAnswer
	sendJSON(t, c, http.MethodGet, base+"/app/signins/"+started.RunID, "", http.StatusOK, &polled)
	assert.Equal(t, p, polled.Prompt, "pending until the user acts")

	decide(t, p.VerificationURI, p.UserCode, "allow")
	done := waitSignIn(t, c, base, started.RunID)
	assert.Equal(t, oauthflow.PromptSuccess, done.Status)
	assert.True(t, demoView(t, c, base).Connected)
	status, body := send(t, c, http.MethodPost, base+"/app/call", "application/json", `{"provider":"demo"}`)
	assert.Equal(t, http.StatusOK, status, string(body))
}

func TestDeviceSignInDenied(t *testing.T) {
	t.Parallel()
	_, base := serveApp(t, time.Hour)
	c := client(t)
	started := startDevice(t, c, base, "demo")
	decide(t, started.Prompt.VerificationURI, started.Prompt.UserCode, "deny")
	done := waitSignIn(t, c, base, started.RunID)
	assert.Equal(t, oauthflow.PromptError, done.Status)
	assert.Contains(t, done.Message, "denied")
	assert.False(t, demoView(t, c, base).Connected)
}

// A sign-in's document is its user's alone.
func TestDeviceSignInBelongsToItsUser(t *testing.T) {
	t.Parallel()
	_, base := serveApp(t, time.Hour)
	started := startDevice(t, client(t), base, "demo")
	for _, id := range []string{started.RunID, "nope"} {
		status, body := send(t, client(t), http.MethodGet, base+"/app/signins/"+id, "", "")
		assert.Equal(t, http.StatusNotFound, status, id)
		assert.NotContains(t, string(body), started.Prompt.UserCode)
	}
}

func TestDeviceSignInRefusals(t *testing.T) {
	t.Parallel()
	a, base := serveApp(t, time.Hour)
	linkOnly := a.demo.ProviderConfig("linkonly")
	linkOnly.DeviceAuthURL = ""
	p, err := providers.NewOAuth2(linkOnly, a.demo.Credentials(base+oauthflow.CallbackPath))
	require.NoError(t, err)
	require.NoError(t, a.mod.Registry.Register(p))

	c := client(t)
	var session struct{ Providers []providerView }
	sendJSON(t, c, http.MethodGet, base+"/app/session", "", http.StatusOK, &session)
	for _, v := range session.Providers {
		assert.Equal(t, v.ID == "demo", v.Device, v.ID)
	}
	tests := []struct {
		name, contentType, body string
		want                    int
		wantError               string
	}{
		{"a provider without the grant", "application/json", `{"provider":"linkonly"}`, http.StatusBadRequest, "no sign-in with a code"},
		{"an unknown provider", "application/json", `{"provider":"nope"}`, http.StatusBadRequest, "unknown provider"},
		{"no provider", "application/json", `{}`, http.StatusBadRequest, "send"},
		{"a form", "application/x-www-form-urlencoded", "provider=demo", http.StatusUnsupportedMediaType, "application/json"},
	}
	for _, tt := range tests {
		status, body := send(t, c, http.MethodPost, base+"/app/connect-device", tt.contentType, tt.body)
		assert.Equal(t, tt.want, status, tt.name)
		assert.Contains(t, string(body), tt.wantError, tt.name)
	}
}

// PORT is read when it is set: a malformed one is an error naming it, not a
// silent fall back to the default port.
func TestPortFromEnv(t *testing.T) {
	for _, tt := range []struct {
		env     string
		want    int
		wantErr bool
	}{
		{"", 8080, false}, {"9000", 9000, false}, {"65535", 65535, false},
		{"abc", 0, true}, {"0", 0, true}, {"70000", 0, true}, {"-1", 0, true}, {" 9000", 0, true},
	} {
		t.Setenv("PORT", tt.env)
		got, err := portFromEnv(8080)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("PORT=%q: %d, %v; want %d, error %v", tt.env, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "PORT") {
			t.Errorf("PORT=%q: the error %q does not name PORT", tt.env, err)
		}
	}
}

// A disconnect starts the connection's refresh count again: the page counts
// the refreshes of the connection it shows, not of every one before it.
func TestRefreshCountStartsAgainAfterADisconnect(t *testing.T) {
	a := &app{refreshes: make(map[string]int)}
	ctx := context.Background()
	a.onEvent(ctx, oauthflow.Event{Kind: oauthflow.EventTokensRefreshed, UserID: "u", ProviderID: "demo"})
	a.onEvent(ctx, oauthflow.Event{Kind: oauthflow.EventTokensRefreshed, UserID: "u", ProviderID: "demo"})
	a.onEvent(ctx, oauthflow.Event{Kind: oauthflow.EventTokensRefreshed, UserID: "v", ProviderID: "demo"})
	if n := a.refreshCount("u", "demo"); n != 2 {
		t.Fatalf("refreshes = %d, want 2", n)
	}
	a.onEvent(ctx, oauthflow.Event{Kind: oauthflow.EventTokensDeleted, UserID: "u", ProviderID: "demo"})
	if n := a.refreshCount("u", "demo"); n != 0 {
		t.Errorf("refreshes after a disconnect = %d, want 0", n)
	}
	if n := a.refreshCount("v", "demo"); n != 1 {
		t.Errorf("another user's count = %d, want 1 (untouched)", n)
	}
}
