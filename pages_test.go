package oauthflow_test

import (
	"context"
	"encoding/json"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The callback page's script tells a popup's opener the outcome with the page's
// own origin as the target and, when Config.FrontendOrigins lists some, each of
// them, never "*" (which would hand the state to whatever page opened the popup).
// The page is rendered by CallbackHandler and its inline script run under node
// against a stub window whose opener records postMessage.
func TestCallbackPageScriptPostsToItsOwnOriginAndTheFrontends(t *testing.T) {
	t.Parallel()
	node := nodeOrSkip(t)
	env := newFlowEnv(t, envOptions{})
	frontends := []string{"http://localhost:3000", "https://app.example.com"}
	// The API's own origin listed as a frontend too is still posted to once.
	fapi := startFrontendsAPI(t, env, func(own string) []string { return slices.Concat(frontends, []string{own}) })
	apis := []struct {
		name, origin string
		start        func() string // a sign-in's authorization URL
		frontends    []string      // the targets after the page's own origin
	}{
		{"no frontend origins", env.replicas[0].api.URL, func() string {
			_, doc := env.startSignIn(0, "alice")
			return doc.AuthURL
		}, nil},
		{"frontend origins", fapi.url, func() string {
			_, doc, err := fapi.mod.StartSignIn(context.Background(), "alice", "demo")
			require.NoError(t, err)
			return doc.AuthURL
		}, frontends},
	}
	for _, api := range apis {
		t.Run(api.name, func(t *testing.T) {
			authURL := api.start()
			state := mustQuery(t, authURL, "state")
			tests := []struct {
				name, url               string
				status, state, provider string // what the opener is told
				closes                  bool
			}{
				{"success", authorizeRedirect(t, authURL, api.origin), "success", state, "demo", true},
				{"expired link", api.origin + oauthflow.CallbackPath + "?code=c0de&state=" + unknownState, "error", unknownState, "", false},
			}
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					_, page, _ := get(t, tt.url)
					got := runPageScript(t, node, page, api.origin)
					want := append([]string{api.origin}, api.frontends...)
					require.Len(t, got.Posted, len(want), "the page posts its outcome to its own origin and each frontend, once")
					for i, p := range got.Posted {
						assert.NotEqual(t, "*", p.TargetOrigin, "the outcome is posted to any origin")
						assert.Equal(t, want[i], p.TargetOrigin, "the outcome is posted to the listed origins only")
						assert.Equal(t, "oauthflow:result", p.Data["type"])
						assert.Equal(t, tt.status, p.Data["status"])
						assert.Equal(t, tt.state, p.Data["state"])
						assert.Equal(t, tt.provider, p.Data["provider"])
					}
					assert.Equal(t, tt.closes, got.Closed, "the popup closes itself after a success only")
				})
			}
		})
	}
}

// frontendsAPI is a host app whose module has FrontendOrigins set.
type frontendsAPI struct {
	mod *oauthflow.Module
	url string
}

// startFrontendsAPI serves a module with env's authorization server as its
// "demo" provider and FrontendOrigins from origins(its own URL).
func startFrontendsAPI(t *testing.T, env *flowEnv, origins func(own string) []string) frontendsAPI {
	t.Helper()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	demo, err := providers.NewOAuth2(providers.Config{ID: "demo", DisplayName: "Demo", AuthURL: env.as.AuthURL(),
		TokenURL: env.as.TokenURL(), Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret", RedirectURL: srv.URL + oauthflow.CallbackPath})
	require.NoError(t, err)
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(demo))
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		Logger: slog.New(slog.DiscardHandler), FrontendOrigins: origins(srv.URL)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mod.Close() })
	mod.Mount(mux)
	return frontendsAPI{mod: mod, url: srv.URL}
}

// authorizeRedirect plays the user at the (auto-consenting) authorization
// server and returns where it redirects the browser, on origin.
func authorizeRedirect(t *testing.T, authURL, origin string) string {
	t.Helper()
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(authURL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusFound, resp.StatusCode, "authorize answered %d", resp.StatusCode)
	loc, err := url.Parse(resp.Header.Get("Location"))
	require.NoError(t, err)
	to, err := url.Parse(origin)
	require.NoError(t, err)
	loc.Scheme, loc.Host = to.Scheme, to.Host
	return loc.String()
}

func mustQuery(t *testing.T, rawURL, name string) string {
	t.Helper()
	u, err := url.Parse(rawURL)
	require.NoError(t, err)
	return u.Query().Get(name)
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
