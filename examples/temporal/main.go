// Command temporalagent is the agent pattern on Temporal: an agent workflow
// calls a tool, the tool finds no token and says "unauthorized", the
// workflow signs its user in through a child workflow (oauthtemporal.SignIn),
// and, once the user has, calls the tool again, which calls the API with the
// stored token. A demo provider (the test kit's server, at /demo) stands in
// for a real one, so it runs offline and with no credentials.
//
// It needs a Temporal server, the CLI's development server:
//
//	go install github.com/temporalio/cli/cmd/temporal@v1.5.1
//	temporal server start-dev --headless --ip 127.0.0.1 --port 7233 &
//	go -C examples/temporal run .   # open the link it prints, allow, and watch the agent resume
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "temporalagent:", err)
		os.Exit(1)
	}
}

func run() error {
	hostPort := flag.String("temporal", "127.0.0.1:7233", "the Temporal server's address")
	namespace := flag.String("namespace", "default", "the Temporal namespace")
	addr := flag.String("addr", "127.0.0.1:8080", "where the app listens (the callback and the demo provider)")
	user := flag.String("user", "alice", "the app's user the agent acts for")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	c, err := client.DialContext(ctx, client.Options{HostPort: *hostPort, Namespace: *namespace, Logger: sdklog.NewStructuredLogger(log)})
	if err != nil {
		return fmt.Errorf("%w (%v)", errNoTemporal, err)
	}
	defer c.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	a, err := newApp(ctx, "http://"+ln.Addr().String(), c, log)
	if err != nil {
		return err
	}
	defer a.Close()
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	id := fmt.Sprintf("agent-%s-%d", *user, time.Now().UnixMilli())
	fmt.Printf("agent %s started for %s\n", id, *user)
	answer, err := a.ask(ctx, id, *user, func(link string) {
		fmt.Printf("the agent needs you to sign in: open\n\n  %s\n\nand allow; it resumes when you have\n", link)
	})
	if errors.Is(err, context.Canceled) {
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Println("the agent answered:", answer)
	return nil
}
