package oauthtemporal_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	oauthtemporal "github.com/oauthflow/oauthflow/temporal"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
)

// The manual's example (docs/temporal.md), compiled here: the root module
// does not require Temporal, so its own manual test leaves this block to
// this module. It needs a Temporal server, so it has no output to check.
func ExampleSetup() {
	ctx, mux := context.Background(), http.NewServeMux()
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	mod, integ, err := oauthtemporal.Setup(ctx, oauthflow.Config{SignInTTL: 10 * time.Minute}, c, oauthtemporal.Options{})
	if err != nil {
		panic(err)
	}
	defer mod.Close()
	mod.Mount(mux) // the callback endpoints, on every instance of the app

	w := worker.New(c, "agent", worker.Options{})
	integ.Register(w) // the SignIn workflow and its activities
	if err := w.Run(worker.InterruptCh()); err != nil {
		panic(err)
	}
}

// A tool activity says its user must sign in; the workflow, which receives
// the error wrapped in an ActivityError, reads back which sign-in.
func ExampleAsUnauthorized() {
	err := fmt.Errorf("list repositories: %w", oauthtemporal.Unauthorized("github", "repo"))
	need, ok := oauthtemporal.AsUnauthorized(err)
	fmt.Println(ok, need.Provider, need.Scopes)
	// Output: true github [repo]
}

// TestManualShowsTheExample: the manual's one block that uses this module
// says what ExampleSetup compiles.
func TestManualShowsTheExample(t *testing.T) {
	t.Parallel()
	page, err := os.ReadFile("../docs/temporal.md")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, part := range strings.Split(string(page), "```go\n")[1:] {
		if body, _, _ := strings.Cut(part, "```"); strings.Contains(body, "oauthtemporal.") {
			found = append(found, body)
		}
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%d blocks of docs/temporal.md use oauthtemporal, want 1", len(found))
	}
	for _, line := range strings.Split(strings.TrimSpace(found[0]), "\n") {
		if line != "" && !strings.Contains(string(example), "\t"+line+"\n") {
			t.Errorf("the manual's line %q is not in ExampleSetup", line)
		}
	}
}
