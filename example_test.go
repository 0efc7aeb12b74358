package oauthflow_test

import (
	"context"
	"encoding/json"
	"fmt"
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
					if !oauthflow.IsUnauthorized(res) {
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
	done := make(chan *oauthflow.Run, 1)
	m.Engine.OnRunDone(func(_ context.Context, r *oauthflow.Run) { done <- r })

	_, prompt, err := m.StartDeviceSignIn(ctx, "alice", "demo")
	if err != nil {
		panic(err)
	}
	fmt.Println(prompt.Status, strings.TrimPrefix(prompt.VerificationURI, demo.URL())) // show it with prompt.UserCode

	_ = demo.ApproveDevice(prompt.UserCode, "") // the user enters the code on their phone
	clock.Advance(authserver.DefaultDeviceInterval)
	select {
	case run := <-done:
		fmt.Println(run.Status, string(run.Result))
	case <-time.After(time.Minute):
		fmt.Println("the sign-in did not end")
		return
	}
	token, err := m.Tokens.GetValidAccessToken(ctx, "alice", "demo")
	fmt.Println(token != "", err)
	// Output:
	// pending /device
	// completed {"authenticated":true}
	// true <nil>
}
