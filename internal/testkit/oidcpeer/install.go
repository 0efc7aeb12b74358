package oidcpeer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// InstallTimeout bounds "npm ci" (about 3 s with a warm npm cache).
const InstallTimeout = 3 * time.Minute

// ensureInstalled returns the server directory with its npm packages in
// place, installing them if needed, or ends the test (see unavailable).
func ensureInstalled(t testing.TB) string {
	t.Helper()
	dir, err := serverDir()
	if err != nil {
		t.Fatalf("oidcpeer: %v", err) // a broken checkout, never a reason to skip
	}
	if _, err := exec.LookPath("node"); err != nil {
		unavailable(t, "Node.js is needed to run the oidc-provider peer and node is not on PATH (%v)", err)
	}
	if installed(dir) {
		return dir
	}
	if err := install(dir, t.Logf); err != nil {
		unavailable(t, "the peer's npm packages are missing and could not be installed: %v", err)
	}
	return dir
}

// serverDir finds server/ beside this file's source, or, in a binary built
// with -trimpath, under the module root found from the working directory.
func serverDir() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		if dir := filepath.Join(filepath.Dir(file), "server"); exists(filepath.Join(dir, "server.mjs")) {
			return dir, nil
		}
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, "internal", "oidcpeer", "server")
	if !exists(filepath.Join(dir, "server.mjs")) {
		return "", fmt.Errorf("no server.mjs in %s", dir)
	}
	return dir, nil
}

// moduleRoot walks up from the working directory to the first go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for !exists(filepath.Join(dir, "go.mod")) {
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the peer's server directory: no go.mod above the working directory")
		}
		dir = parent
	}
	return dir, nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// installed reports whether node_modules holds a finished install (npm
// writes node_modules/.package-lock.json last) of the pinned oidc-provider.
func installed(dir string) bool {
	if !exists(filepath.Join(dir, "node_modules", ".package-lock.json")) {
		return false
	}
	var want, got struct {
		Version      string            `json:"version"`
		Dependencies map[string]string `json:"dependencies"`
	}
	if readJSON(filepath.Join(dir, "package.json"), &want) != nil ||
		readJSON(filepath.Join(dir, "node_modules", "oidc-provider", "package.json"), &got) != nil {
		return false
	}
	return got.Version != "" && got.Version == want.Dependencies["oidc-provider"]
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// install runs "npm ci" in dir, once across the tests and test processes
// that need it at the same time: each takes a lock first and re-checks.
func install(dir string, logf func(format string, args ...any)) error {
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("npm is not on PATH (%w)", err)
	}
	unlock, err := lock(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	defer unlock()
	if installed(dir) {
		return nil // another test process installed it while we waited
	}
	logf("oidcpeer: node_modules is missing or stale; running npm ci in %s", dir)
	ctx, cancel := context.WithTimeout(context.Background(), InstallTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, npm, "ci", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	if !installed(dir) {
		return fmt.Errorf("npm ci in %s succeeded but node_modules does not hold the pinned oidc-provider", dir)
	}
	return nil
}
