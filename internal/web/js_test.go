package web

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestJavaScript runs the widget's and the callback page's unit tests
// (testdata/*.test.mjs) with node's built-in runner, in a fake DOM with fake
// timers and no npm dependencies. Without node the test is skipped, except
// under CI=true, where it fails: CI must not pass with the scripts untested.
func TestJavaScript(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required under CI=true to test the widget and the callback page scripts")
		}
		t.Skip("node is not installed: the widget and callback page scripts are not tested")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "--test", "testdata/oauth-prompt.test.mjs", "testdata/callback.test.mjs")
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=", "NO_COLOR=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
}
