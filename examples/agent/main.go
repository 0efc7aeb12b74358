// Command agent shows the agent pattern: a consumer workflow ("list my
// repositories") whose tool finds no token launches the "oauth" sub-workflow
// with a callback, shows its sign-in prompt inline in the run view, and resumes
// on its own once the user has signed in. It needs no credentials and no
// network: a demo authorization server runs beside the app.
//
//	go run ./examples/agent                  # then open http://127.0.0.1:8081/
//	go run ./examples/agent -terminal        # prints a code and where to enter it, waits, prints the repositories
//	go run ./examples/agent -provider github # GitHub's /user/repos instead of the demo's
//
// Web mode: the page's "List my repositories" button starts a run; the demo
// redirects to the API callback (GET /api/v1/oauth/callback). Terminal mode: a
// provider that offers the device grant (RFC 8628), as the demo does, signs the
// user in with a code: the terminal prints the code and the provider's page to
// enter it on (open it on any device), and the Module's worker polls the provider
// until the user allows or denies. A provider without the grant gets a sign-in
// link instead: the provider then redirects to the frontend page /oauth/callback,
// which completes through POST /api/v1/oauth/complete (or, in a browser that runs
// no script such as a text browser, through its form to the API callback). The
// server runs in both modes, to serve those pages, the API and the demo provider.
// For GitHub set GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET and GITHUB_OAUTH_REDIRECT_URI
// (http://127.0.0.1:8081/api/v1/oauth/callback); its terminal mode signs in with
// a code, which needs "Enable Device Flow" ticked in the OAuth app's settings.
// Everything is kept in memory unless KVSTORE_HOST is set (then Redis, with the
// usual fallback to memory).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"time"
)

// terminalUser is the user the terminal mode runs as.
const terminalUser = "terminal"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		os.Exit(1)
	}
}

func run() error {
	port := flag.Int("port", portFromEnv(8081), "port to listen on, on 127.0.0.1 (or PORT)")
	provider := flag.String("provider", demoID, `whose repositories to list: "demo" or "github" (needs GITHUB_* variables)`)
	terminal := flag.Bool("terminal", false, "no browser page: print a sign-in code (or link), wait, print the repositories")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: logLevel(*terminal)}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	ln, base, err := listen(*port)
	if err != nil {
		return err
	}
	app, err := newApp(ctx, appConfig{Base: base, Provider: *provider, Logger: log, Terminal: *terminal,
		UseEnvKV: os.Getenv("KVSTORE_HOST") != ""})
	if err != nil {
		_ = ln.Close()
		return err
	}
	defer app.Close()
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	if *terminal {
		err = runTerminal(ctx, app, terminalUser, os.Stdout)
	} else {
		fmt.Printf("oauthflow agent: open %s/ in your browser (Ctrl-C to stop)\n", base)
		fmt.Println("  no browser? go run ./examples/agent -terminal prints a sign-in code and waits for it")
		select {
		case <-ctx.Done():
		case err := <-served: // the listener failed
			return err
		}
	}
	return errors.Join(err, shutdown(srv, served))
}

func shutdown(srv *http.Server, served <-chan error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(ctx)
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// logLevel keeps the terminal mode's output to what the user must read.
func logLevel(terminal bool) slog.Level {
	if terminal {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}
