package oauthflow_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/providers"
)

// A host app wires the module once, registers its providers and mounts the two
// public endpoints on its own mux. Here a local authorization server stands in
// for GitHub or Google, and an http.Client plays the user's browser.
func Example_mount() {
	ctx := context.Background()
	demo := authserver.Start(authserver.Options{}) // the provider
	defer demo.Close()
	mux := http.NewServeMux()
	api := httptest.NewServer(mux) // the host app
	defer api.Close()

	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV()}) // nil KV: Redis from KVSTORE_*
	if err != nil {
		panic(err)
	}
	defer m.Close()
	p, _ := providers.NewOAuth2(providers.Config{ID: "demo", DisplayName: "Demo",
		AuthURL: demo.AuthURL(), TokenURL: demo.TokenURL(), Scopes: []string{"read"}},
		providers.Credentials{ClientID: "demo-client", ClientSecret: "demo-secret", RedirectURL: api.URL + oauthflow.CallbackPath})
	_ = m.Registry.Register(p)
	m.Mount(mux) // GET /api/v1/oauth/callback and POST /api/v1/oauth/complete

	_, prompt, _ := m.StartSignIn(ctx, "alice", "demo")
	resp, _ := http.Get(prompt.AuthURL) // the user consents; the provider redirects to the callback
	_ = resp.Body.Close()
	fmt.Println("callback page:", resp.StatusCode)

	client := m.Tokens.Client(ctx, "alice", "demo") // sends the bearer token, refreshing it as needed
	resp, _ = client.Get(demo.APIURL())
	_ = resp.Body.Close()
	fmt.Println("protected API:", resp.StatusCode)
	// Output:
	// callback page: 200
	// protected API: 200
}

// A consumer workflow (an agent's task) calls a tool; when the tool reports
// unauthorized, it launches the "oauth" sub-workflow with a callback and waits.
// Once the user has signed in, the callback moves it back to start and the tool
// runs again, now with a token.
func Example_consumerWorkflow() {
	ctx := context.Background()
	demo := authserver.Start(authserver.Options{})
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

	// The tool returns the store's error; ErrNoToken becomes {"error":"unauthorized"}.
	whoami := oauthflow.NewTool("whoami", "Names the signed-in user.", oauthflow.Schema{Type: "object"},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			resp, err := m.Tokens.Client(ctx, tc.UserID, "demo").Get(demo.APIURL())
			if err != nil {
				return nil, err
			}
			defer resp.Body.Close()
			var me authserver.Me
			return me.User, json.NewDecoder(resp.Body).Decode(&me)
		})
	_ = m.Engine.Register(&oauthflow.Workflow{
		Name:   "whoami",
		States: []string{oauthflow.StateStart, oauthflow.StateAwaitingAuth, oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "ask", From: oauthflow.StateStart, To: oauthflow.StateEnd,
				Do: func(ctx context.Context, tc *oauthflow.TransitionContext) error {
					res, err := whoami.Call(ctx, oauthflow.ToolContext{UserID: tc.Run.UserID}, json.RawMessage(`{}`))
					if err != nil {
						return err
					}
					if _, unauthorized := oauthflow.UnauthorizedResult(res); !unauthorized {
						return tc.SetResult(res)
					}
					tc.GoTo(oauthflow.StateAwaitingAuth)
					_, err = tc.Launch(ctx, oauthflow.OAuthWorkflowName, oauthflow.OAuthWorkflowArgs{Provider: "demo"},
						oauthflow.RunOptions{Callback: &oauthflow.Callback{Transition: "authCompleted"}})
					return err
				}},
			{Name: "authCompleted", From: oauthflow.StateAwaitingAuth, To: oauthflow.StateStart, Wait: true,
				Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }},
		},
	})

	run, _ := m.Engine.Launch(ctx, "alice", "whoami", nil, oauthflow.RunOptions{})
	fmt.Println(run.State)
	var prompt oauthflow.OAuthPromptDocument
	_ = m.Engine.Document(ctx, run.Children[0], oauthflow.PromptDocumentName, &prompt)
	resp, _ := http.Get(prompt.AuthURL) // the user signs in
	_ = resp.Body.Close()

	run, _ = m.Engine.Get(ctx, run.ID)
	fmt.Println(run.Status, string(run.Result))
	// Output:
	// awaiting_auth
	// completed "demo-user"
}

// New wires the whole library from one Config, whose zero fields mean the
// defaults: a zero Config takes Redis from KVSTORE_* (memory when it cannot be
// reached) and logs to slog.Default. New checks the Config once and starts the
// module's background worker, which Close stops.
func ExampleNew() {
	ctx := context.Background()
	m, err := oauthflow.New(ctx, oauthflow.Config{
		KV:        oauthflow.NewMemoryKV(), // or oauthflow.NewRedisKV(client), shared by every instance
		KeyPrefix: "myapp:",                // so that several apps can share one Redis
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	for _, tool := range m.Tools() { // what an agent is handed
		fmt.Println(tool.Name)
	}

	_, err = oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), FrontendOrigins: []string{"*"}})
	fmt.Println(err)
	// Output:
	// build_oauth_url
	// exchange_oauth_token
	// oauthflow: invalid argument: Config.FrontendOrigins[0] "*": a wildcard is not allowed; list each origin
}

// An agent without a browser signs its user in with a code (RFC 8628): it
// shows the prompt's VerificationURI and UserCode, the user approves on any
// device, and the module's worker, polling at the interval the provider asks
// for, stores the tokens and ends the run. Here the local authorization
// server plays the provider, and a clock the example moves stands in for the
// seconds between polls.
func ExampleModule_StartDeviceSignIn() {
	ctx := context.Background()
	clock := fakeclock.New(time.Now())
	demo := authserver.Start(authserver.Options{Now: clock.Now})
	defer demo.Close()
	m, _ := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Now: clock.Now, WorkerInterval: time.Millisecond})
	defer m.Close()
	p, _ := providers.NewOAuth2(providers.Config{ID: "demo", AuthURL: demo.AuthURL(), TokenURL: demo.TokenURL(),
		DeviceAuthURL: demo.DeviceAuthorizationURL()}, providers.Credentials{ClientID: "demo-client", ClientSecret: "demo-secret"})
	_ = m.Registry.Register(p)

	run, prompt, err := m.StartDeviceSignIn(ctx, "alice", "demo")
	if err != nil {
		panic(err)
	}
	fmt.Println(prompt.Status, strings.TrimPrefix(prompt.VerificationURI, demo.URL())) // show it with prompt.UserCode

	_ = demo.ApproveDevice(prompt.UserCode, "") // the user enters the code on their phone
	clock.Advance(authserver.DefaultDeviceInterval)
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	done, err := m.WaitSignIn(wait, run.ID) // it reads the store: any instance may end the sign-in
	if err != nil {
		fmt.Println("the sign-in did not end:", err)
		return
	}
	fmt.Println(done.Status)
	token, err := m.Tokens.GetValidAccessToken(ctx, "alice", "demo")
	fmt.Println(token != "", err)
	// Output:
	// pending /device
	// success
	// true <nil>
}

// Encryption at rest is one Config field. A ring is written as the
// OAUTHFLOW_ENCRYPTION_KEYS variable holds it, "kid:base64key,..." with
// 32-byte keys, the first one sealing; with Config.Encryption nil, New reads
// that variable. Token records and pending sign-ins are then
// stored sealed, and read back as ever.
func ExampleKeyRing() {
	ctx := context.Background()
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	ring, err := oauthflow.ParseKeyRing("2026-11:" + base64.StdEncoding.EncodeToString(key))
	if err != nil {
		panic(err)
	}
	kv := oauthflow.NewMemoryKV()
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: kv, Encryption: ring})
	if err != nil {
		panic(err)
	}
	defer m.Close()

	_ = m.Tokens.StoreTokens(ctx, "alice", "github", oauthflow.StoredTokens{AccessToken: "gho-secret", Scope: "repo"})
	raw, _ := kv.Get(ctx, "oauth:alice:github")
	fmt.Println("token in the stored bytes:", bytes.Contains(raw, []byte("gho-secret")))
	tokens, _ := m.Tokens.GetTokens(ctx, "alice", "github")
	fmt.Println("read back:", tokens.AccessToken)
	// Output:
	// token in the stored bytes: false
	// read back: gho-secret
}

// Rotating a key: put the new key first and keep the old one, so that every
// instance seals with the new key and still opens what the old one sealed;
// then Reencrypt re-seals what is stored, and the old key can leave the ring.
// A walk is safe to run while the app serves, and to run again.
func ExampleReencrypt() {
	ctx := context.Background()
	kv := oauthflow.NewMemoryKV()
	key1, key2 := make([]byte, 32), make([]byte, 32)
	_, _ = rand.Read(key1)
	_, _ = rand.Read(key2)
	k1 := "k1:" + base64.StdEncoding.EncodeToString(key1)
	k2 := "k2:" + base64.StdEncoding.EncodeToString(key2)
	old, _ := oauthflow.ParseKeyRing(k1)
	before := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithEncryption(old))
	_ = before.StoreTokens(ctx, "alice", "github", oauthflow.StoredTokens{AccessToken: "gho-secret", Scope: "repo"})

	rotated, _ := oauthflow.ParseKeyRing(k2 + "," + k1)
	p, err := oauthflow.Reencrypt(ctx, kv, rotated, oauthflow.ReencryptOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println("rewritten:", p.Rewritten, "under unknown keys:", p.Unknown)

	newOnly, _ := oauthflow.ParseKeyRing(k2)
	after := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithEncryption(newOnly))
	tokens, err := after.GetTokens(ctx, "alice", "github")
	if err != nil {
		panic(err)
	}
	fmt.Println("read without k1:", tokens.AccessToken)
	// Output:
	// rewritten: 1 under unknown keys: 0
	// read without k1: gho-secret
}

// A workflow is a small state machine whose runs live in the store, so any
// instance can take a run further. Here a deletion waits for its user to
// confirm: Launch runs the automatic "ask" and leaves the run waiting; Fire
// runs the waiting "confirm" with the user's answer, and the run ends.
func ExampleEngine_Launch() {
	ctx := context.Background()
	engine := oauthflow.NewEngine(oauthflow.NewMemoryKV())
	err := engine.Register(&oauthflow.Workflow{
		Name:   "delete-repo",
		States: []string{oauthflow.StateStart, "confirming", oauthflow.StateEnd},
		Transitions: []oauthflow.Transition{
			{Name: "ask", From: oauthflow.StateStart, To: "confirming",
				Do: func(context.Context, *oauthflow.TransitionContext) error { return nil }},
			{Name: "confirm", From: "confirming", To: oauthflow.StateEnd, Wait: true,
				Do: func(_ context.Context, tc *oauthflow.TransitionContext) error {
					var args, answer struct{ Repo string }
					if err := tc.DecodeArgs(&args); err != nil {
						return err
					}
					if err := tc.DecodeInput(&answer); err != nil {
						return err
					}
					return tc.SetResult(map[string]bool{"deleted": answer.Repo == args.Repo})
				}},
		},
	})
	if err != nil {
		panic(err)
	}

	run, err := engine.Launch(ctx, "alice", "delete-repo", map[string]string{"Repo": "demo"}, oauthflow.RunOptions{})
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.State)

	run, err = engine.Fire(ctx, run.ID, "confirm", map[string]string{"Repo": "demo"}, "alice")
	if err != nil {
		panic(err)
	}
	fmt.Println(run.Status, run.State, string(run.Result))
	// Output:
	// waiting confirming
	// completed end {"deleted":true}
}

// The host app registers each provider once, at setup, under the ID that
// token records and sign-ins name it by. A provider is plain data and the
// app's credentials; an ID can be registered only once.
func ExampleRegistry_Register() {
	reg := oauthflow.NewRegistry()
	acme, err := providers.NewOAuth2(providers.Config{
		ID:       "acme",
		AuthURL:  "https://auth.acme.example/authorize",
		TokenURL: "https://auth.acme.example/token",
		Scopes:   []string{"read"},
	}, providers.Credentials{
		ClientID:     "acme-client",
		ClientSecret: "acme-secret",
		RedirectURL:  "https://app.example/api/v1/oauth/callback",
	})
	if err != nil {
		panic(err)
	}
	if err := reg.Register(acme); err != nil {
		panic(err)
	}
	fmt.Println(reg.IDs())
	fmt.Println(reg.Register(acme))

	_, err = reg.Get("globex")
	fmt.Println("unknown:", errors.Is(err, oauthflow.ErrUnknownProvider))
	// Output:
	// [acme]
	// oauthflow: invalid argument: provider "acme" is already registered
	// unknown: true
}

// A TokenStore's Client carries the user's token to an API: every request
// gets "Authorization: Bearer <token>", refreshed first when it has expired.
// A user who never connected gets ErrNoToken, the cue to send them through
// sign-in (Module.StartSignIn).
func ExampleTokenStore_Client() {
	ctx := context.Background()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the API saw:", r.Header.Get("Authorization"))
	}))
	defer api.Close()

	reg := oauthflow.NewRegistry()
	acme, _ := providers.NewOAuth2(providers.Config{ID: "acme",
		AuthURL: "https://auth.acme.example/authorize", TokenURL: "https://auth.acme.example/token"},
		providers.Credentials{ClientID: "acme-client", RedirectURL: "https://app.example/api/v1/oauth/callback"})
	_ = reg.Register(acme)
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), reg)
	// A sign-in stores the tokens; here they are stored directly.
	err := store.StoreTokens(ctx, "alice", "acme", oauthflow.StoredTokens{AccessToken: "at-alice", Scope: "read"})
	if err != nil {
		panic(err)
	}

	resp, err := store.Client(ctx, "alice", "acme").Get(api.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))

	_, err = store.Client(ctx, "bob", "acme").Get(api.URL)
	fmt.Println("bob must sign in:", errors.Is(err, oauthflow.ErrNoToken))
	// Output:
	// the API saw: Bearer at-alice
	// bob must sign in: true
}

// Connections lists what a user has connected, for a settings page: the
// granted scopes, whether the grant can be refreshed, and its health. It
// never holds a token.
func ExampleTokenStore_Connections() {
	ctx := context.Background()
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), oauthflow.NewRegistry())
	inAnHour := time.Now().Add(time.Hour).UnixMilli()
	_ = store.StoreTokens(ctx, "alice", "github", oauthflow.StoredTokens{AccessToken: "gho-1", Scope: "repo read:user"})
	_ = store.StoreTokens(ctx, "alice", "google", oauthflow.StoredTokens{AccessToken: "ya29-1", RefreshToken: "1//r",
		ExpiresAt: inAnHour, Scope: "openid email"})

	conns, err := store.Connections(ctx, "alice")
	if err != nil {
		panic(err)
	}
	for _, c := range conns {
		fmt.Println(c.ProviderID, c.Scopes, c.HasRefreshToken, c.Health)
	}
	// Output:
	// github [repo read:user] false healthy
	// google [openid email] true healthy
}
