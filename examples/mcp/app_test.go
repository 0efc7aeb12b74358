package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/demo"
)

// The example as a user runs it: the agent asks the MCP server, waits for a
// sign-in, and once the user has consented it resumes and the server sees
// the demo user; a second run needs no sign-in.
func TestAgentSignsInToTheMCPServer(t *testing.T) {
	ln, base, err := demo.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := newApp(ctx, base, true, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	srv := &http.Server{Handler: a, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })

	run, err := a.mod.Engine.Launch(ctx, "you", "agent", nil, oauthflow.RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	link, err := a.signInURL(ctx, run)
	if err != nil {
		t.Fatalf("%v (result %s)", err, run.Result)
	}
	jar, _ := cookiejar.New(nil)
	resp, err := (&http.Client{Jar: jar}).Get(link) // the browser: consent, then the callback page
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Request.URL.Path != oauthflow.CallbackPath {
		t.Fatalf("the sign-in ended at %s with HTTP %d: %s", resp.Request.URL, resp.StatusCode, page)
	}
	run, err = a.mod.Engine.Get(ctx, run.ID)
	if err != nil {
		t.Fatal(err)
	}
	if run.Status != oauthflow.RunCompleted || string(run.Result) != `{"user":"demo-user"}` {
		t.Fatalf("the agent ended %s with %s", run.Status, run.Result)
	}

	again, err := a.mod.Engine.Launch(ctx, "you", "agent", nil, oauthflow.RunOptions{})
	if err != nil || again.Status != oauthflow.RunCompleted {
		t.Fatalf("a second run: %v %s %s", err, again.Status, again.Result)
	}
}
