package oauthflowtest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

// A lifetime under the library's 60 s margin makes every read refresh; with
// rotation each refresh retires the refresh token before it; a disconnect
// revokes the grant at the server.
func TestRefreshRotationAndDisconnect(t *testing.T) {
	t.Parallel()
	idp := newServer(t, oauthflowtest.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true})
	a := newApp(t, idp, oauthflow.Config{})
	first := oauthflowtest.SignIn(t, a.mod, "alice", "local")

	var info userinfo
	a.getJSON(t, "alice", idp.UserinfoURL(), &info)
	now, err := a.mod.Tokens.GetTokens(t.Context(), "alice", "local")
	if err != nil {
		t.Fatal(err)
	}
	st := idp.Stats()
	if info.Sub != oauthflowtest.DefaultUser || st.Refreshes != 1 || now.AccessToken == first.AccessToken {
		t.Fatalf("user info %+v, stats %+v: the call did not refresh first", info, st)
	}
	if idp.Active(first.RefreshToken) || !idp.Active(now.RefreshToken) {
		t.Fatal("rotation keeps the newest refresh token alone")
	}

	if err := a.mod.Tokens.DeleteTokens(t.Context(), "alice", "local"); err != nil {
		t.Fatal(err)
	}
	if idp.Stats().Revocations < 1 || idp.Active(now.RefreshToken) || idp.Active(now.AccessToken) {
		t.Fatalf("stats %+v: the disconnect did not revoke the grant", idp.Stats())
	}
}

// The server's clock, shared with the Module, expires a token without
// waiting; readers that find it expired at once cause one refresh between them.
func TestSharedClockOneRefresh(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(time.Now())
	idp := newServer(t, oauthflowtest.Options{Now: clock.Now})
	a := newApp(t, idp, oauthflow.Config{Now: clock.Now})
	first := oauthflowtest.SignIn(t, a.mod, "alice", "local")
	clock.Advance(2 * time.Hour)
	if idp.Active(first.AccessToken) {
		t.Fatal("the server's clock did not expire the token")
	}

	const readers = 20
	var wg sync.WaitGroup
	tokens := make([]string, readers)
	errs := make([]error, readers)
	for i := range readers {
		wg.Go(func() { tokens[i], errs[i] = a.mod.Tokens.GetValidAccessToken(t.Context(), "alice", "local") })
	}
	waitfor.Group(t, &wg, "the readers")
	for i := range readers {
		if errs[i] != nil || tokens[i] != tokens[0] || tokens[i] == first.AccessToken {
			t.Fatalf("reader %d: %v, token new %v, the same as the others %v", i, errs[i], tokens[i] != first.AccessToken, tokens[i] == tokens[0])
		}
	}
	if st := idp.Stats(); st.RefreshRequests != 1 || st.Refreshes != 1 {
		t.Fatalf("stats %+v; want exactly one refresh", st)
	}
}

// A refresh the server answers invalid_grant ends the connection; a 503
// keeps it.
func TestFailNextRefresh(t *testing.T) {
	t.Parallel()
	tests := []struct {
		failure oauthflowtest.Failure
		dead    bool
	}{
		{oauthflowtest.Failure{Grant: oauthflowtest.GrantRefreshToken, Status: http.StatusServiceUnavailable}, false},
		{oauthflowtest.Failure{Grant: oauthflowtest.GrantRefreshToken, Error: "invalid_grant"}, true},
	}
	for _, tt := range tests {
		idp := newServer(t, oauthflowtest.Options{AccessTokenTTL: 30 * time.Second})
		a := newApp(t, idp, oauthflow.Config{})
		oauthflowtest.SignIn(t, a.mod, "alice", "local")
		idp.FailNext(tt.failure)
		_, err := a.mod.Tokens.GetValidAccessToken(t.Context(), "alice", "local")
		if err == nil || errors.Is(err, oauthflow.ErrNoToken) != tt.dead {
			t.Fatalf("%+v answered %v; want the grant dead: %v", tt.failure, err, tt.dead)
		}
		if _, err := a.mod.Tokens.GetTokens(t.Context(), "alice", "local"); (err == nil) == tt.dead {
			t.Fatalf("%+v: the tokens kept: %v", tt.failure, err)
		}
		if st := idp.Stats(); st.RefreshRequests != 1 || st.Refreshes != 0 {
			t.Fatalf("%+v: stats %+v; want one refresh request, not answered with tokens", tt.failure, st)
		}
	}
}

// The device grant: the Module's worker polls until the user allows or
// denies the code, and a code answered once cannot be answered again.
func TestDeviceSignIn(t *testing.T) {
	t.Parallel()
	for _, allow := range []bool{true, false} {
		idp := newServer(t, oauthflowtest.Options{})
		a := newApp(t, idp, oauthflow.Config{})
		run, prompt, err := a.mod.StartDeviceSignIn(t.Context(), "alice", "local")
		if err != nil {
			t.Fatal(err)
		}
		answer, want := idp.DenyDevice, oauthflow.PromptError
		if allow {
			answer, want = idp.ApproveDevice, oauthflow.PromptSuccess
		}
		if err := answer(prompt.UserCode); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		doc, err := a.mod.WaitSignIn(ctx, run.ID)
		cancel()
		if err != nil || doc.Status != want {
			t.Fatalf("allow %v: the prompt ended %v, %v; want %q", allow, doc, err, want)
		}
		if _, err := a.mod.Tokens.GetTokens(t.Context(), "alice", "local"); (err == nil) != allow {
			t.Fatalf("allow %v: tokens stored: %v", allow, err)
		}
		if err := idp.ApproveDevice(prompt.UserCode); err == nil || !strings.Contains(err.Error(), "already answered") {
			t.Fatalf("allow %v: a second answer: %v", allow, err)
		}
	}
	if err := newServer(t, oauthflowtest.Options{}).ApproveDevice("BCDF-GHJK"); err == nil || !strings.Contains(err.Error(), "unknown") {
		t.Fatalf("an unknown code: %v", err)
	}
}

// With RequireDPoP the server's provider proves a key, the tokens are bound
// to it, and the token store's client sends them with proofs.
func TestDPoP(t *testing.T) {
	t.Parallel()
	idp := newServer(t, oauthflowtest.Options{RequireDPoP: true, DPoPNonces: true})
	a := newApp(t, idp, oauthflow.Config{})
	tok := oauthflowtest.SignIn(t, a.mod, "alice", "local")
	if !strings.EqualFold(tok.TokenType, "DPoP") || tok.DPoPKey == "" {
		t.Fatalf("token type %q, key kept %v; want a DPoP-bound token", tok.TokenType, tok.DPoPKey != "")
	}
	var info userinfo
	a.getJSON(t, "alice", idp.UserinfoURL(), &info)
	req, _ := http.NewRequest(http.MethodGet, idp.UserinfoURL(), nil)
	req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if info.Sub != oauthflowtest.DefaultUser || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("with proofs: %+v; as a bearer token: %d, want 401", info, resp.StatusCode)
	}
}

// A mounted server lives on the app's own origin: its issuer carries the
// path, its metadata answers at both RFC 8414 places, and a sign-in through
// it completes.
func TestMount(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	idp := oauthflowtest.Mount(mux, srv.URL+"/idp/", oauthflowtest.Options{ConsentPage: true})
	t.Cleanup(idp.Close)
	if idp.URL != srv.URL+"/idp" {
		t.Fatalf("URL %q, want %q", idp.URL, srv.URL+"/idp")
	}
	for _, path := range []string{"/idp/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/idp"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		var md struct {
			Issuer        string `json:"issuer"`
			TokenEndpoint string `json:"token_endpoint"`
		}
		err = json.NewDecoder(resp.Body).Decode(&md)
		resp.Body.Close()
		if err != nil || md.Issuer != idp.URL || md.TokenEndpoint != idp.URL+"/token" {
			t.Fatalf("GET %s: %d %+v %v", path, resp.StatusCode, md, err)
		}
	}

	mod, err := oauthflow.New(t.Context(), oauthflow.Config{KV: oauthflow.NewMemoryKV()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mod.Close() })
	mod.Mount(mux)
	if err := mod.Registry.Register(idp.Provider("local", srv.URL+oauthflow.CallbackPath)); err != nil {
		t.Fatal(err)
	}
	oauthflowtest.SignIn(t, mod, "alice", "local")
}

func TestMountRefusesABadIssuer(t *testing.T) {
	t.Parallel()
	for _, issuer := range []string{"", "/idp", "ftp://127.0.0.1/idp", "http://127.0.0.1/idp?x=1", "http://127.0.0.1/idp#f"} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Mount(%q) did not panic", issuer)
				}
			}()
			oauthflowtest.Mount(http.NewServeMux(), issuer, oauthflowtest.Options{})
		}()
	}
}
