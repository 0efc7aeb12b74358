package oauthflow_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/require"
)

// Rich Authorization Requests (RFC 9396): the authorization details a
// sign-in asks for reach the server however the sign-in is opened, and what
// the server granted is kept with the tokens and listed on the connection.

// Authorization details of the tests: as a caller writes them, and as the
// library sends and keeps them (compact).
const (
	rarPayment = `[ {"type": "payment_initiation", "instructedAmount": {"currency": "EUR", "amount": "123.50"},
		"creditorName": "Merchant A & Co"} ]`
	rarAccounts = `[{"type":"account_information","actions":["list_accounts","read_balances"]}]`
)

// compactJSON is s as the library sends and keeps it: as json.Marshal
// writes it, compact, with <, > and & escaped.
func compactJSON(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(json.RawMessage(s))
	require.NoError(t, err)
	return string(b)
}

// rarConnection is user's connection to the demo provider.
func rarConnection(t *testing.T, env *flowEnv, user string) oauthflow.Connection {
	t.Helper()
	conns, err := env.mod(0).Tokens.Connections(t.Context(), user)
	require.NoError(t, err)
	require.Len(t, conns, 1)
	return conns[0]
}

// rarBuild opens a sign-in for alice through build_oauth_url with args and
// returns its result.
func rarBuild(t *testing.T, env *flowEnv, args string) (*oauthflow.BuildOAuthURLResult, error) {
	t.Helper()
	raw, err := env.mod(0).BuildOAuthURL.Call(t.Context(), oauthflow.ToolContext{UserID: "alice"}, json.RawMessage(args))
	if err != nil {
		return nil, err
	}
	var res oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(raw, &res))
	return &res, nil
}

// rarLaunch opens a sign-in for alice through the "oauth" workflow, asking
// for details, and returns its prompt: the documented way to ask for
// authorization details without build_oauth_url.
func rarLaunch(t *testing.T, env *flowEnv, details string) *oauthflow.OAuthPromptDocument {
	t.Helper()
	run, err := env.mod(0).Engine.Launch(t.Context(), "alice", oauthflow.OAuthWorkflowName,
		oauthflow.OAuthWorkflowArgs{Provider: "demo", AuthorizationDetails: json.RawMessage(details)}, oauthflow.RunOptions{})
	require.NoError(t, err)
	doc, err := env.mod(0).SignInStatus(t.Context(), run.ID)
	require.NoError(t, err)
	return doc
}

// requireDetailsInURL checks that authURL asks for details in its query.
func requireDetailsInURL(t *testing.T, authURL, details string) {
	t.Helper()
	u, err := url.Parse(authURL)
	require.NoError(t, err)
	require.Equal(t, compactJSON(t, details), u.Query().Get("authorization_details"), authURL)
}

// rarApp is the frontend origin of the tests that open a sign-in through POST /start.
const rarApp = "https://app.example"

// rarOpen opens a sign-in for alice asking for rarPayment, the way way
// says: "tool" (build_oauth_url), "workflow" (the "oauth" workflow) or
// "start" (the workflow, then POST /start as the widget does). It returns
// the URL the browser goes to, the sign-in's state and the browser.
func rarOpen(t *testing.T, env *flowEnv, way string) (authURL, state string, browser *http.Client) {
	t.Helper()
	if way == "tool" {
		res, err := rarBuild(t, env, `{"provider":"demo","scopes":[],"authorizationDetails":`+rarPayment+`}`)
		require.NoError(t, err)
		return opened(t, res.AuthURL), res.State, http.DefaultClient
	}
	doc := rarLaunch(t, env, rarPayment)
	if way != "start" {
		return opened(t, doc.AuthURL), doc.State, http.DefaultClient
	}
	jar, _ := cookiejar.New(nil)
	browser = &http.Client{Jar: jar}
	status, _, h := do(t, browser, newRequest(t, "POST", env.replicas[0].api.URL+oauthflow.StartPath,
		url.Values{"state": {doc.State}, "binding": {doc.Binding}}.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", rarApp))
	require.Equal(t, http.StatusSeeOther, status)
	return h.Get("Location"), doc.State, browser
}

// opened is where a sign-in's link sends the browser: the link itself, or
// for a pushed sign-in, whose link is the module's start link, where opening
// it redirects (openLink).
func opened(t *testing.T, link string) string {
	t.Helper()
	if u, err := url.Parse(link); err == nil && u.Path == oauthflow.StartPath {
		return openLink(t, link)
	}
	return link
}

// Every way of opening a sign-in sends the details it asks for: the tool,
// the workflow and POST /start, which builds the request again. They travel
// in the URL, or in the pushed request when the provider pushes (and the
// URL then carries none). The server grants what was asked, and the
// connection lists it.
func TestRARDetailsReachTheServer(t *testing.T) {
	t.Parallel()
	for _, pushed := range []bool{false, true} {
		for _, way := range []string{"tool", "workflow", "start"} {
			t.Run(way+map[bool]string{false: " in the URL", true: " pushed"}[pushed], func(t *testing.T) {
				t.Parallel()
				o := envOptions{kv: oauthflow.NewMemoryKV()}
				if pushed {
					o.as, o.demo = authserver.Options{RequirePAR: true}, pushedDemo
				}
				if way == "start" {
					o.config = func(c *oauthflow.Config) { c.BindSignIns, c.FrontendOrigins = true, []string{rarApp} }
				}
				env := newFlowEnv(t, o)
				authURL, state, browser := rarOpen(t, env, way)
				s, err := oauthflow.PeekSession(env.mod(0).Sessions, t.Context(), state)
				require.NoError(t, err)
				require.Equal(t, compactJSON(t, rarPayment), string(s.AuthorizationDetails), "the pending sign-in keeps them")
				if pushed {
					requirePushedURL(t, env, authURL)
				} else {
					requireDetailsInURL(t, authURL, rarPayment)
				}
				status, body, _ := do(t, browser, newRequest(t, "GET", env.consent(authURL, 0), ""))
				require.Equal(t, http.StatusOK, status, body)
				require.Equal(t, compactJSON(t, rarPayment), string(rarConnection(t, env, "alice").AuthorizationDetails))
			})
		}
	}
}

// What is kept is what the server granted, not what was asked: here less.
// A refresh whose answer does not name details keeps them; one that names
// others replaces them. The scope stays as it was throughout.
func TestRARGrantedDetailsKeptAndRefreshed(t *testing.T) {
	t.Parallel()
	var refreshAnswer atomic.Pointer[string]
	env := newFlowEnv(t, envOptions{as: authserver.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true,
		AuthorizationDetails: func(grant string, held []byte) []byte {
			if grant == authserver.GrantAuthorizationCode {
				return []byte(rarAccounts)
			}
			if a := refreshAnswer.Load(); a != nil {
				return []byte(*a)
			}
			return nil
		}}})
	asked := `[{"type":"account_information","actions":["list_accounts","read_balances"]},{"type":"payment_initiation"}]`
	doc := rarLaunch(t, env, asked)
	status, body, _ := get(t, env.consent(opened(t, doc.AuthURL), 0))
	require.Equal(t, http.StatusOK, status, body)
	c := rarConnection(t, env, "alice")
	require.Equal(t, rarAccounts, string(c.AuthorizationDetails), "the details granted, not those asked")
	require.Equal(t, []string{"read"}, c.Scopes)

	refreshed := func() oauthflow.Connection { // a 30 s token is inside the skew: every read refreshes
		t.Helper()
		before := env.as.Stats().Refreshes
		_, err := env.mod(0).Tokens.GetValidAccessToken(t.Context(), "alice", "demo")
		require.NoError(t, err)
		require.Equal(t, before+1, env.as.Stats().Refreshes)
		return rarConnection(t, env, "alice")
	}
	c = refreshed()
	require.Equal(t, rarAccounts, string(c.AuthorizationDetails), "a refresh that names none keeps them")
	payment := compactJSON(t, rarPayment)
	refreshAnswer.Store(&payment)
	c = refreshed()
	require.Equal(t, payment, string(c.AuthorizationDetails), "a refresh that names others replaces them")
	require.Equal(t, []string{"read"}, c.Scopes)
	tok, err := env.mod(0).Tokens.GetTokens(t.Context(), "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, payment, string(tok.AuthorizationDetails))
}

// A sign-in that asks for none sends none and keeps none.
func TestRARNoneAsked(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	for _, args := range []string{`{"provider":"demo","scopes":[]}`, `{"provider":"demo","scopes":[],"authorizationDetails":null}`,
		`{"provider":"demo","scopes":[],"authorizationDetails":[]}`} {
		res, err := rarBuild(t, env, args)
		require.NoError(t, err, args)
		require.NotContains(t, res.AuthURL, "authorization_details", args)
		s, err := oauthflow.PeekSession(env.mod(0).Sessions, t.Context(), res.State)
		require.NoError(t, err)
		require.Nil(t, s.AuthorizationDetails, args)
	}
	c, _ := signInAndList(t, env, "")
	require.Nil(t, c.AuthorizationDetails)
}

// Details that are not a JSON array of objects each with a non-empty
// string "type", or that are larger than 8 KiB, are refused where they come
// in, with ErrInvalidArgument and a message that names them: the tool
// registers no sign-in, the workflow's run fails before any request is
// sent, and the user's connection keeps what it had.
func TestRARBadDetailsRefused(t *testing.T) {
	t.Parallel()
	mem := oauthflow.NewMemoryKV()
	env := newFlowEnv(t, envOptions{kv: mem, as: authserver.Options{RequirePAR: true}, demo: pushedDemo})
	doc := rarLaunch(t, env, rarAccounts)
	status, body, _ := get(t, env.consent(opened(t, doc.AuthURL), 0))
	require.Equal(t, http.StatusOK, status, body)
	pushes, entries := env.as.Stats().PARRequests, oauthflow.MemoryLen(mem)

	large := `[{"type":"t","note":"` + strings.Repeat("x", 8<<10) + `"}]`
	for _, bad := range []string{`{"type":"t"}`, `"[]"`, `[1]`, `[null]`, `[{}]`, `[{"type":""}]`, `[{"type":7}]`,
		`[{"Type":"t"}]`, `[{"type":"t"},{"kind":"t"}]`, large} {
		_, err := rarBuild(t, env, `{"provider":"demo","scopes":[],"authorizationDetails":`+bad+`}`)
		require.ErrorIs(t, err, oauthflow.ErrInvalidArgument, bad)
		require.Contains(t, err.Error(), "authorizationDetails", bad)
		require.Equal(t, entries, oauthflow.MemoryLen(mem), "the tool registered nothing for %s", bad)

		run, err := env.mod(0).Engine.Launch(t.Context(), "alice", oauthflow.OAuthWorkflowName,
			oauthflow.OAuthWorkflowArgs{Provider: "demo", AuthorizationDetails: json.RawMessage(bad)}, oauthflow.RunOptions{})
		require.ErrorIs(t, err, oauthflow.ErrInvalidArgument, bad)
		require.Equal(t, oauthflow.RunFailed, run.Status, bad)
		entries = oauthflow.MemoryLen(mem) // the failed run is kept, for its page
	}
	_, err := env.mod(0).Engine.Launch(t.Context(), "alice", oauthflow.OAuthWorkflowName,
		oauthflow.OAuthWorkflowArgs{Provider: "demo", AuthorizationDetails: json.RawMessage(`[{"type":`)}, oauthflow.RunOptions{})
	require.ErrorIs(t, err, oauthflow.ErrInvalidArgument, "JSON that does not parse is refused by Launch")
	require.Equal(t, pushes, env.as.Stats().PARRequests, "no request was pushed")
	require.Equal(t, rarAccounts, string(rarConnection(t, env, "alice").AuthorizationDetails), "the connection is as it was")
}

// A sign-in with a code (RFC 8628) cannot carry authorization details: it
// is refused rather than sent without them.
func TestRARDeviceSignInRefusesDetails(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{device: true})
	run, err := env.mod(0).Engine.Launch(t.Context(), "alice", oauthflow.OAuthWorkflowName,
		oauthflow.OAuthWorkflowArgs{Provider: "demo", Grant: oauthflow.GrantDevice, AuthorizationDetails: json.RawMessage(rarAccounts)},
		oauthflow.RunOptions{})
	require.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
	require.Equal(t, oauthflow.RunFailed, run.Status)
	require.Zero(t, env.as.Stats().DeviceAuthorizations, "no device code was asked for")
}

// Details the server grants that are not well formed are not kept, and the
// grant is stored all the same: its code is spent.
func TestRARMalformedGrantNotKept(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{as: authserver.Options{AuthorizationDetails: func(string, []byte) []byte {
		return []byte(`[{"type":"account_information"},7]`)
	}}})
	doc := rarLaunch(t, env, rarAccounts)
	status, body, _ := get(t, env.consent(opened(t, doc.AuthURL), 0))
	require.Equal(t, http.StatusOK, status, body)
	c := rarConnection(t, env, "alice")
	require.Nil(t, c.AuthorizationDetails)
	require.Equal(t, oauthflow.HealthHealthy, c.Health)
}

// StoreTokens keeps details compact and refuses any that are not well
// formed, before anything is written.
func TestRARStoreTokensChecksDetails(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("demo")))
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), reg)
	ctx := context.Background()
	err := store.StoreTokens(ctx, "alice", "demo", oauthflow.StoredTokens{AccessToken: "a", Scope: "read",
		AuthorizationDetails: json.RawMessage(`[{"kind":"t"}]`)})
	require.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
	_, err = store.GetTokens(ctx, "alice", "demo")
	require.ErrorIs(t, err, oauthflow.ErrNoToken)

	require.NoError(t, store.StoreTokens(ctx, "alice", "demo", oauthflow.StoredTokens{AccessToken: "a", Scope: "read",
		AuthorizationDetails: json.RawMessage(rarPayment)}))
	tok, err := store.GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, compactJSON(t, rarPayment), string(tok.AuthorizationDetails))
}

// A sign-in that asks for authorization details (RFC 9396) is launched with
// Engine.Launch and OAuthWorkflowArgs, since Module.StartSignIn takes scopes
// only, and its prompt read with Module.SignInStatus. Once the user has
// consented, the connection lists what the provider granted.
func ExampleEngine_Launch_authorizationDetails() {
	ctx := context.Background()
	demo := authserver.Start(authserver.Options{}) // grants what is asked
	defer demo.Close()
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	defer api.Close()
	m, _ := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV()})
	defer m.Close()
	p, _ := providers.NewOAuth2(providers.Config{ID: "demo", AuthURL: demo.AuthURL(), TokenURL: demo.TokenURL()},
		providers.Credentials{ClientID: "demo-client", ClientSecret: "demo-secret", RedirectURL: api.URL + oauthflow.CallbackPath})
	_ = m.Registry.Register(p)
	m.Mount(mux)

	details := json.RawMessage(`[{"type": "account_information", "actions": ["list_accounts"]}]`)
	run, err := m.Engine.Launch(ctx, "alice", oauthflow.OAuthWorkflowName,
		oauthflow.OAuthWorkflowArgs{Provider: "demo", AuthorizationDetails: details}, oauthflow.RunOptions{})
	if err != nil {
		panic(err) // details that are not well formed: ErrInvalidArgument
	}
	prompt, _ := m.SignInStatus(ctx, run.ID)
	resp, _ := http.Get(prompt.AuthURL) // the user consents
	_ = resp.Body.Close()

	conns, _ := m.Tokens.Connections(ctx, "alice")
	fmt.Println("granted:", string(conns[0].AuthorizationDetails))
	// Output:
	// granted: [{"type":"account_information","actions":["list_accounts"]}]
}
