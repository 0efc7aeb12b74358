package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// passing are the client auth scenarios of @modelcontextprotocol/conformance
// 0.1.16, all 22 of them, by the suite's groups.
var passing = []string{
	// core
	"auth/metadata-default", "auth/metadata-var1", "auth/metadata-var2", "auth/metadata-var3",
	"auth/basic-cimd",
	"auth/scope-from-www-authenticate", "auth/scope-from-scopes-supported", "auth/scope-omitted-when-undefined",
	"auth/scope-step-up", "auth/scope-retry-limit",
	"auth/token-endpoint-auth-basic", "auth/token-endpoint-auth-post", "auth/token-endpoint-auth-none",
	"auth/pre-registration",
	// 2025-03-26 back-compat
	"auth/2025-03-26-oauth-metadata-backcompat", "auth/2025-03-26-oauth-endpoint-fallback",
	// extensions
	"auth/client-credentials-basic", "auth/client-credentials-jwt", "auth/cross-app-access-complete-flow",
	// draft
	"auth/resource-mismatch", "auth/offline-access-scope", "auth/offline-access-not-supported",
}

var passed = regexp.MustCompile(`Passed: (\d+)/(\d+), 0 failed`)

// The official suite runs each scenario against this client: it starts the
// scenario's MCP server and authorization server, runs the client, and
// checks every request the client made.
func TestConformanceSuite(t *testing.T) {
	suite := suiteEntry(t)
	bin := filepath.Join(t.TempDir(), "mcpconformance")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, scenario := range passing {
		t.Run(scenario, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, "node", suite, "client", "--command", bin, "--scenario", scenario)
			cmd.Env = append(os.Environ(), "NO_COLOR=1")
			out, err := cmd.CombinedOutput()
			m := passed.FindSubmatch(out)
			if err != nil || m == nil || string(m[1]) != string(m[2]) {
				t.Fatalf("scenario %s: %v\n%s", scenario, err, out)
			}
			t.Logf("%s: %s checks passed", scenario, m[1])
		})
	}
}

// suiteEntry is the installed suite's program, installing it first when
// npm can; under CI=true a suite that cannot be had fails the test.
func suiteEntry(t *testing.T) string {
	t.Helper()
	entry := filepath.Join("suite", "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
	if _, err := os.Stat(entry); err == nil {
		return entry
	}
	if _, err := exec.LookPath("npm"); err == nil {
		if out, err := exec.Command("bash", filepath.Join("suite", "install.sh")).CombinedOutput(); err == nil {
			return entry
		} else {
			t.Logf("suite/install.sh: %v\n%s", err, out)
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("the MCP conformance suite is required under CI=true: run internal/mcpconformance/suite/install.sh")
	}
	t.Skip("the MCP conformance suite is not installed (internal/mcpconformance/suite/install.sh needs npm)")
	return ""
}
