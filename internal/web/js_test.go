package web

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestJavaScript runs the widgets' and the callback page's unit tests
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
	cmd := exec.CommandContext(ctx, node, "--test", "testdata/oauth-prompt.test.mjs", "testdata/callback.test.mjs", "testdata/oauth-connections.test.mjs")
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=", "NO_COLOR=1", "OAUTHFLOW_ASSETS_DIR="+embeddedAssets(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("node --test failed: %v\n%s", err, out)
	}
	t.Logf("node --test:\n%s", out)
}

// embeddedAssets writes the assets the package embeds (and so serves) to a
// directory of the test's and returns it: the scripts node tests are the
// ones built in, and a change the build sees (a mutant's overlay) is tested.
func embeddedAssets(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		t.Fatal(err)
	}
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, name)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, name), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}
