// Command mcp connects an agent's user to an OAuth-protected MCP server,
// offline: it starts, on 127.0.0.1, a demo authorization server, an MCP
// server it protects (built with the official Go SDK), and an agent backend
// built on oauthflow and mcpauth. The agent calls the server's whoami tool
// for you; the server answers 401, so the agent asks you to sign in, and
// once you have, it resumes and prints what the server sees.
//
//	go run ./examples/mcp            # then open the link it prints
//	go run ./examples/mcp -port 9000 # or PORT=9000
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
	"strconv"
	"time"

	"github.com/oauthflow/oauthflow"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcp:", err)
		os.Exit(1)
	}
}

func run() error {
	port := flag.Int("port", portFromEnv(8082), "port to listen on, on 127.0.0.1 (or PORT)")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()

	ln, base, err := listen(*port)
	if err != nil {
		return err
	}
	a, err := newApp(ctx, base, log)
	if err != nil {
		return err
	}
	defer a.Close()
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	fmt.Printf("The agent asks the MCP server at %s who you are.\n", a.server)
	r, err := a.mod.Engine.Launch(ctx, "you", "agent", nil, oauthflow.RunOptions{})
	if err != nil {
		return err
	}
	if r.Status == oauthflow.RunWaiting {
		link, err := a.signInURL(ctx, r)
		if err != nil {
			return err
		}
		fmt.Printf("The server wants you to sign in. Open this link in your browser (Ctrl-C to stop):\n\n  %s\n\n", link)
		if r, err = waitRun(ctx, a.mod.Engine, r.ID, signInWait); err != nil {
			return err
		}
	}
	if r.Status != oauthflow.RunCompleted {
		return errors.New("the agent ended " + r.Status + ": " + string(r.Result))
	}
	fmt.Printf("The agent resumed. The MCP server answered: %s\n", r.Result)
	return nil
}

// signInWait is how long the agent waits for you to sign in.
const signInWait = 15 * time.Minute

// waitRun polls the store until run id has ended (completed or failed) and
// returns it, or returns an error once ctx ends or wait has passed. The run
// may resume on any instance that serves the callback, so its end is read
// from the store rather than heard in this process.
func waitRun(ctx context.Context, e *oauthflow.Engine, id string, wait time.Duration) (*oauthflow.Run, error) {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		r, err := e.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if r.Status == oauthflow.RunCompleted || r.Status == oauthflow.RunFailed {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the agent's run: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// portFromEnv returns PORT when it is a port number, def otherwise.
func portFromEnv(def int) int {
	if p, err := strconv.Atoi(os.Getenv("PORT")); err == nil && p > 0 {
		return p
	}
	return def
}

// listen listens on 127.0.0.1:port and returns the listener with the base URL
// the browser reaches it at.
func listen(port int) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, "", err
	}
	return ln, "http://" + ln.Addr().String(), nil
}
