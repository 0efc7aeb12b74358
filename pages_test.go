package oauthflow_test

import (
	"context"
	"encoding/json"
	"html"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The callback page's script tells a popup's opener the outcome with the page's
// own origin as the target, never "*" (which would hand the state to whatever
// page opened the popup). The page is rendered by CallbackHandler and its inline
// script run under node against a stub window whose opener records postMessage.
func TestCallbackPageScriptPostsToItsOwnOrigin(t *testing.T) {
	t.Parallel()
	node := nodeOrSkip(t)
	env := newFlowEnv(t, envOptions{})
	_, doc := env.startSignIn(0, "alice")
	origin := env.replicas[0].api.URL
	tests := []struct {
		name, url               string
		status, state, provider string // what the opener is told
		closes                  bool
	}{
		{"success", env.consent(doc.AuthURL, 0), "success", doc.State, "demo", true},
		{"expired link", origin + oauthflow.CallbackPath + "?code=c0de&state=" + unknownState, "error", unknownState, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, page, _ := get(t, tt.url)
			got := runPageScript(t, node, page, origin)
			require.Len(t, got.Posted, 1, "the page posts its outcome to the opener once")
			p := got.Posted[0]
			assert.NotEqual(t, "*", p.TargetOrigin, "the outcome is posted to any origin")
			assert.Equal(t, origin, p.TargetOrigin, "the outcome is posted to the page's own origin only")
			assert.Equal(t, "oauthflow:result", p.Data["type"])
			assert.Equal(t, tt.status, p.Data["status"])
			assert.Equal(t, tt.state, p.Data["state"])
			assert.Equal(t, tt.provider, p.Data["provider"])
			assert.Equal(t, tt.closes, got.Closed, "the popup closes itself after a success only")
		})
	}
}

type pageScriptRun struct {
	Posted []struct {
		Data         map[string]string `json:"data"`
		TargetOrigin string            `json:"targetOrigin"`
	} `json:"posted"`
	Closed bool `json:"closed"`
}

// pageScriptHarness runs the page's script in a fresh context with a stub
// window (an open opener that records postMessage) and document (the result
// element's dataset), and prints what was posted.
const pageScriptHarness = `
const vm = require("node:vm");
const input = JSON.parse(require("node:fs").readFileSync(0, "utf8"));
const posted = [];
const window = {
  location: { origin: input.origin },
  opener: { closed: false, postMessage(data, targetOrigin) { posted.push({ data, targetOrigin }); } },
  closed: false,
  close() { window.closed = true; },
};
const document = { getElementById: (id) => (id === "oauthflow-result" ? { dataset: input.dataset } : null) };
vm.runInNewContext(input.script, { window, document });
console.log(JSON.stringify({ posted, closed: window.closed }));
`

var (
	inlineScript = regexp.MustCompile(`(?s)<script nonce="[^"]*">(.*?)</script>`)
	resultTag    = regexp.MustCompile(`<main id="oauthflow-result"[^>]*>`)
	dataAttr     = regexp.MustCompile(`data-([a-z]+)="([^"]*)"`)
)

// runPageScript runs page's inline script as if the page were served from origin.
func runPageScript(t *testing.T, node, page, origin string) pageScriptRun {
	t.Helper()
	script := inlineScript.FindStringSubmatch(page)
	require.NotNil(t, script, "no inline script in the page:\n%s", page)
	dataset := map[string]string{}
	for _, a := range dataAttr.FindAllStringSubmatch(resultTag.FindString(page), -1) {
		dataset[a[1]] = html.UnescapeString(a[2])
	}
	in, err := json.Marshal(map[string]any{"script": script[1], "origin": origin, "dataset": dataset})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "-e", pageScriptHarness)
	cmd.Stdin = strings.NewReader(string(in))
	cmd.Env = append(os.Environ(), "NODE_OPTIONS=")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "node:\n%s", out)
	var run pageScriptRun
	require.NoError(t, json.Unmarshal(out, &run), "node printed:\n%s", out)
	return run
}

// nodeOrSkip returns node's path. Without node the test is skipped, except
// under CI=true, where it fails: CI must not pass with the page's script untested.
func nodeOrSkip(t *testing.T) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("node is required under CI=true to test the callback page's script")
		}
		t.Skip("node is not installed: the callback page's script is not tested")
	}
	return node
}
