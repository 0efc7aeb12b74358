package main

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// The example as a user runs it: the agent asks the MCP server, waits for a
// sign-in, and once the user has consented it resumes and the server sees
// the demo user; a second run needs no sign-in.
func TestAgentSignsInToTheMCPServer(t *testing.T) {
	ln, base, err := listen(0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := newApp(ctx, base, slog.New(slog.DiscardHandler))
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
	page, err := oauthflowtest.NewBrowser().SignIn(ctx, link) // the user: consent, then the callback page
	if err != nil {
		t.Fatal(err)
	}
	if page.StatusCode != http.StatusOK || page.URL.Path != oauthflow.CallbackPath {
		t.Fatalf("the sign-in ended at %s with HTTP %d: %s", page.URL, page.StatusCode, page.Body)
	}
	run, err = waitRun(ctx, a.mod.Engine, run.ID, time.Minute) // as main waits for it
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
