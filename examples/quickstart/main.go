// Command quickstart shows the whole flow in a browser with no credentials and no
// network: a host app on 127.0.0.1 with a built-in demo authorization server.
// Connect the demo provider through the oauth-prompt widget, call a protected API
// with the stored token, watch the token refresh when it expires, and disconnect.
// "Sign in with a code" connects it with the device grant (RFC 8628) instead: the
// widget shows a code to enter on the demo's page (/demo/device, in another tab
// or on a phone), and the page polls the sign-in until the user allows or denies.
// Below the cards, "Connected accounts" is the oauth-connections widget on the
// library's connections endpoint (the browser's user is the one its cookie
// names: Config.CurrentUser): reconnect an account that stopped working, or
// disconnect one.
//
//	go run ./examples/quickstart            # then open http://127.0.0.1:8080/
//	go run ./examples/quickstart -port 9000 # or PORT=9000
//
// It keeps everything in memory unless KVSTORE_HOST is set (then Redis, with the
// usual fallback to memory), and registers any real catalog provider whose
// variables are set (GITHUB_CLIENT_ID, GITHUB_CLIENT_SECRET, GITHUB_OAUTH_REDIRECT_URI...).
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

	"github.com/oauthflow/oauthflow"
	"github.com/redis/go-redis/v9"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run() error {
	defaultPort, err := portFromEnv(8080)
	if err != nil {
		return err
	}
	port := flag.Int("port", defaultPort, "port to listen on, on 127.0.0.1 (or PORT)")
	ttl := flag.Duration("demo-token-ttl", 75*time.Second, "lifetime of the demo provider's access tokens")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	redis.SetLogger(oauthflow.RedisLogger(log)) // go-redis's own lines, into the same log
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	ln, base, err := listen(*port)
	if err != nil {
		return err
	}
	app, err := newApp(ctx, appConfig{Base: base, Logger: log, TokenTTL: *ttl, UseEnvKV: os.Getenv("KVSTORE_HOST") != ""})
	if err != nil {
		return err
	}
	defer app.Close()
	srv := &http.Server{Handler: app, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	fmt.Printf("oauthflow quickstart: open %s/ in your browser (Ctrl-C to stop)\n", base)
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
