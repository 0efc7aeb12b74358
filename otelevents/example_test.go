package otelevents_test

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/otelevents"
	"go.opentelemetry.io/otel"
)

// The README's example, compiled here: the root module does not require
// OpenTelemetry, so its own README test leaves this block to this module.
func ExampleHook() {
	ctx, audit := context.Background(), slog.Default()
	hook, err := otelevents.Hook(otel.Meter("oauthflow"))
	if err != nil {
		panic(err)
	}
	m, err := oauthflow.New(ctx, oauthflow.Config{OnEvent: oauthflow.AllEvents(hook, oauthflow.LogEvents(audit))})
	if err != nil {
		panic(err)
	}
	defer m.Close()
}

// TestReadmeShowsTheExample: the README's one block that uses this module
// says what ExampleHook compiles.
func TestReadmeShowsTheExample(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, part := range strings.Split(string(readme), "```go\n")[1:] {
		if body, _, _ := strings.Cut(part, "```"); strings.Contains(body, "otelevents.") {
			found = append(found, body)
		}
	}
	example, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 {
		t.Fatalf("%d README blocks use otelevents, want 1", len(found))
	}
	for _, line := range strings.Split(strings.TrimSpace(found[0]), "\n") {
		if !strings.Contains(string(example), "\t"+line+"\n") {
			t.Errorf("the README's line %q is not in ExampleHook", line)
		}
	}
}
