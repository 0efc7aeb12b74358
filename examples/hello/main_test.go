package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// The whole life of a connection, with the test kit playing the provider and
// the user's browser: sign in, call the API (which refreshes the token
// first), disconnect (which revokes it at the provider).
func TestConnectCallRefreshDisconnect(t *testing.T) {
	// A token that lasts 30 s is already inside the library's 60 s margin:
	// every read refreshes it, with rotation.
	idp, mod, app := startHello(t, oauthflowtest.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true})

	page, err := oauthflowtest.NewBrowser().SignIn(t.Context(), app.URL+"/connect/local")
	if err != nil || page.StatusCode != http.StatusOK || page.URL.Path != oauthflow.CallbackPath {
		t.Fatalf("the sign-in ended with %v at %+v", err, page)
	}
	signedIn, err := mod.Tokens.GetTokens(t.Context(), user, "local")
	if err != nil {
		t.Fatal(err)
	}

	status, body := send(t, http.MethodGet, app.URL+"/me/local")
	if status != http.StatusOK || !strings.Contains(body, `"sub":"demo-user"`) {
		t.Fatalf("GET /me/local: %d %s", status, body)
	}
	refreshed, err := mod.Tokens.GetTokens(t.Context(), user, "local")
	if err != nil {
		t.Fatal(err)
	}
	if st := idp.Stats(); st.Refreshes != 1 || refreshed.AccessToken == signedIn.AccessToken || idp.Active(signedIn.RefreshToken) {
		t.Fatalf("stats %+v: the call did not refresh the token first, with rotation", st)
	}

	if status, body := send(t, http.MethodPost, app.URL+"/disconnect/local"); status != http.StatusNoContent {
		t.Fatalf("POST /disconnect/local: %d %s", status, body)
	}
	if idp.Stats().Revocations == 0 || idp.Active(refreshed.RefreshToken) || idp.Active(refreshed.AccessToken) {
		t.Fatalf("stats %+v: the disconnect did not revoke the tokens", idp.Stats())
	}
	if status, _ := send(t, http.MethodGet, app.URL+"/me/local"); status != http.StatusUnauthorized {
		t.Fatalf("GET /me/local after the disconnect: %d, want 401", status)
	}
}

// startHello serves the app's routes over a module on MemoryKV with the test
// kit's server, as opts sets it up, registered as "local"; all of it ends
// with t.
func startHello(t *testing.T, opts oauthflowtest.Options) (*oauthflowtest.Server, *oauthflow.Module, *httptest.Server) {
	t.Helper()
	idp := oauthflowtest.NewServer(opts)
	t.Cleanup(idp.Close)
	mod, err := oauthflow.New(t.Context(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mod.Close() })
	mux := http.NewServeMux()
	app := httptest.NewServer(mux)
	t.Cleanup(app.Close)
	if err := mod.Registry.Register(idp.Provider("local", app.URL+oauthflow.CallbackPath)); err != nil {
		t.Fatal(err)
	}
	routes(mux, mod, map[string]string{"local": idp.UserinfoURL()})
	return idp, mod, app
}

func TestUnknownProvider(t *testing.T) {
	mod, err := oauthflow.New(t.Context(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Close()
	mux := http.NewServeMux()
	routes(mux, mod, nil)
	app := httptest.NewServer(mux)
	defer app.Close()
	for _, path := range []string{"/connect/nope", "/me/nope"} {
		if status, _ := send(t, http.MethodGet, app.URL+path); status != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, status)
		}
	}
}

func send(t *testing.T, method, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}
