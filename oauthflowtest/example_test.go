package oauthflowtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

// A whole sign-in, as an app's test runs it: a Module on memory with the
// server's provider, a sign-in started, the kit's browser following its link
// to the app's callback, and an API called with the stored token.
func Example() {
	ctx := context.Background()
	idp := oauthflowtest.NewServer(oauthflowtest.Options{})
	defer idp.Close()

	mod, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close()
	mux := http.NewServeMux()
	mod.Mount(mux)
	app := httptest.NewServer(mux)
	defer app.Close()
	if err := mod.Registry.Register(idp.Provider("local", app.URL+oauthflow.CallbackPath)); err != nil {
		log.Fatal(err)
	}

	_, prompt, err := mod.StartSignIn(ctx, "alice", "local")
	if err != nil {
		log.Fatal(err)
	}
	page, err := oauthflowtest.NewBrowser().SignIn(ctx, prompt.AuthURL)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("the browser ended on", page.URL.Path, page.StatusCode)

	resp, err := mod.Tokens.Client(ctx, "alice", "local").Get(idp.UserinfoURL())
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("user info: %s", body)
	// Output:
	// the browser ended on /api/v1/oauth/callback 200
	// user info: {"sub":"demo-user","preferred_username":"demo-user"}
}

// A scripted failure answers the next token request of its grant in place of
// the server: here a refresh, first with a 503 (transient: the library keeps
// the tokens), then with invalid_grant (the grant is dead).
func ExampleServer_FailNext() {
	idp := oauthflowtest.NewServer(oauthflowtest.Options{})
	defer idp.Close()
	p := idp.Provider("local", "http://127.0.0.1:8080/callback")

	idp.FailNext(
		oauthflowtest.Failure{Grant: oauthflowtest.GrantRefreshToken, Status: http.StatusServiceUnavailable},
		oauthflowtest.Failure{Grant: oauthflowtest.GrantRefreshToken, Error: "invalid_grant"},
	)
	for range 2 {
		_, err := p.RefreshToken(context.Background(), "a-refresh-token")
		var pe *oauthflow.ProviderError
		if errors.As(err, &pe) {
			fmt.Println(pe.StatusCode, pe.Code)
		}
	}
	fmt.Println("refresh requests:", idp.Stats().RefreshRequests)
	// Output:
	// 503 temporarily_unavailable
	// 400 invalid_grant
	// refresh requests: 2
}

// A sign-in with a code (the device grant, RFC 8628): the Module shows a code,
// the user allows it on the server's page (ApproveDevice stands in for it),
// and the Module's worker, polling the server, stores the tokens.
func ExampleServer_ApproveDevice() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	idp := oauthflowtest.NewServer(oauthflowtest.Options{})
	defer idp.Close()
	mod, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close()
	if err := mod.Registry.Register(idp.Provider("local", "http://127.0.0.1:8080"+oauthflow.CallbackPath)); err != nil {
		log.Fatal(err)
	}

	run, prompt, err := mod.StartDeviceSignIn(ctx, "alice", "local")
	if err != nil {
		log.Fatal(err)
	}
	if err := idp.ApproveDevice(prompt.UserCode); err != nil {
		log.Fatal(err)
	}
	done, err := mod.WaitSignIn(ctx, run.ID)
	if err != nil {
		log.Fatal("the sign-in did not end: ", err)
	}
	fmt.Println("sign-in", done.Status)
	conns, err := mod.Tokens.Connections(ctx, "alice")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("connected to", conns[0].ProviderID, "as", conns[0].Account)
	// Output:
	// sign-in success
	// connected to local as demo-user
}

// In a program, the server runs beside the app's own handlers on one port, at
// a path of its own, as the offline examples run it; ProviderConfig is the
// provider to adjust before building it.
func ExampleMount() {
	mux := http.NewServeMux()
	idp := oauthflowtest.Mount(mux, "http://127.0.0.1:8080/demo", oauthflowtest.Options{ConsentPage: true})
	defer idp.Close()

	cfg := idp.ProviderConfig("demo")
	cfg.DisplayName = "Demo Cloud"
	p, err := providers.NewOAuth2(cfg, idp.Credentials("http://127.0.0.1:8080"+oauthflow.CallbackPath))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(p.DisplayName(), "at", idp.URL)
	fmt.Println(cfg.AuthURL)
	fmt.Println(cfg.UserinfoURL)
	// Output:
	// Demo Cloud at http://127.0.0.1:8080/demo
	// http://127.0.0.1:8080/demo/authorize
	// http://127.0.0.1:8080/demo/userinfo
}
