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
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
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

// The README's pattern, compiled here: a tool activity that says its user
// must sign in, and an agent workflow that signs the user in and calls the
// tool again. It needs a Temporal server, so it has no output to check.
func ExampleCallWithSignIn() {
	ctx, mux := context.Background(), http.NewServeMux()
	c, err := client.Dial(client.Options{HostPort: "127.0.0.1:7233"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	mod, integ, err := oauthtemporal.Setup(ctx, oauthflow.Config{}, c, oauthtemporal.Options{})
	if err != nil {
		panic(err)
	}
	defer mod.Close()
	mod.Mount(mux) // the callback endpoints, on every instance of the app

	// The tool, an activity: oauthtemporal.Unauthorized when the user must sign in first.
	listRepos := func(ctx context.Context, userID string) (string, error) {
		gh, err := integ.Client(ctx, userID, "github")
		if err != nil {
			return "", err
		}
		resp, err := gh.Get("https://api.github.com/user/repos")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		return resp.Status, nil
	}
	// The agent, a workflow: on Unauthorized it signs the user in as a child workflow, then calls again.
	agent := func(ctx workflow.Context, userID string) (string, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: time.Minute})
		var answer string
		err := oauthtemporal.CallWithSignIn(ctx, userID, func(ctx workflow.Context) error {
			return workflow.ExecuteActivity(ctx, "listRepos", userID).Get(ctx, &answer)
		})
		return answer, err
	}
	w := worker.New(c, "agent", worker.Options{})
	integ.Register(w) // the SignIn workflow and its activities
	w.RegisterActivityWithOptions(listRepos, activity.RegisterOptions{Name: "listRepos"})
	w.RegisterWorkflowWithOptions(agent, workflow.RegisterOptions{Name: "agent"})
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
// (docs/temporal.md) says what ExampleSetup compiles, and the README's one
// block what ExampleCallWithSignIn compiles.
func TestManualShowsTheExample(t *testing.T) {
	t.Parallel()
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	for page, fn := range map[string]string{"../docs/temporal.md": "ExampleSetup", "../README.md": "ExampleCallWithSignIn"} {
		text, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		var found []string
		for _, part := range strings.Split(string(text), "```go\n")[1:] {
			if body, _, _ := strings.Cut(part, "```"); strings.Contains(body, "oauthtemporal.") {
				found = append(found, body)
			}
		}
		if len(found) != 1 {
			t.Fatalf("%d blocks of %s use oauthtemporal, want 1", len(found), page)
		}
		_, body, _ := strings.Cut(string(example), "func "+fn+"() {\n")
		body, _, _ = strings.Cut(body, "\n}\n")
		for _, line := range strings.Split(strings.TrimSpace(found[0]), "\n") {
			if line != "" && !strings.Contains(body+"\n", "\t"+line+"\n") {
				t.Errorf("%s's line %q is not in %s", page, line, fn)
			}
		}
	}
}
