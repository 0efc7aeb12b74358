package main

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/oauthflowtest"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	"go.temporal.io/server/temporaltest"
)

// TestAgentSignsInAndAnswers runs the example's logic against an in-process
// Temporal server instead of the CLI's: the agent asks for a sign-in, a
// browser follows the link through the demo provider's consent page, and the
// agent answers with the API's words.
func TestAgentSignsInAndAnswers(t *testing.T) {
	quiet := sdklog.NewStructuredLogger(slog.New(slog.DiscardHandler))
	ts := temporaltest.NewServer(temporaltest.WithT(t), temporaltest.WithBaseClientOptions(client.Options{Logger: quiet}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	a, err := newApp(ctx, "http://"+ln.Addr().String(), ts.GetDefaultClient(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	web := httptest.NewUnstartedServer(a)
	web.Listener.Close()
	web.Listener = ln
	web.Start()
	defer web.Close()

	pages := make(chan *oauthflowtest.Page, 1)
	answer, err := a.ask(ctx, "agent-test", "alice", func(link string) {
		page, err := oauthflowtest.NewBrowser().SignIn(ctx, link)
		if err != nil {
			t.Error(err)
		}
		pages <- page
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case page := <-pages:
		if page == nil || page.StatusCode != http.StatusOK || !strings.Contains(page.Body, "connected") {
			t.Fatalf("the sign-in's page: %+v", page)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the agent answered without a sign-in's page")
	}
	if !strings.HasPrefix(answer, oauthflowtest.DefaultUser+"'s repositories: ") {
		t.Fatalf("the agent answered %q", answer)
	}
}
