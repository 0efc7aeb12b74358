package oauthflow_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// providers.OAuth2 has the optional methods of a Provider that the module
// finds with a type assertion, with the signatures it asserts.
var (
	_ oauthflow.PKCESupporter     = (*providers.OAuth2)(nil)
	_ oauthflow.IssuerReporter    = (*providers.OAuth2)(nil)
	_ oauthflow.DisplayNamer      = (*providers.OAuth2)(nil)
	_ oauthflow.DeadGrantCoder    = (*providers.OAuth2)(nil)
	_ oauthflow.VerifierExchanger = (*providers.OAuth2)(nil)
	_ oauthflow.AccountReader     = (*providers.OAuth2)(nil)
	_ oauthflow.CallbackFielder   = (*providers.OAuth2)(nil)
	_ oauthflow.DPoPProvider      = (*providers.OAuth2)(nil)
	_ oauthflow.DeviceAuthorizer  = (*providers.OAuth2)(nil)
	_ oauthflow.RefreshLimiter    = (*providers.OAuth2)(nil)
)

type panickyProvider struct{ fakeProvider }

func (*panickyProvider) ProviderID() string { panic("no ID") }

func TestRegistry(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	var typedNil *fakeProvider
	for name, p := range map[string]oauthflow.Provider{
		"nil":           nil,
		"typed nil":     typedNil,
		"empty ID":      newFakeProvider(""),
		"ID with colon": newFakeProvider("a:b"),
		"ID too long":   newFakeProvider(fmt.Sprintf("%070d", 0)),
		"panicking ID":  &panickyProvider{},
	} {
		assert.ErrorIs(t, reg.Register(p), oauthflow.ErrInvalidArgument, name)
	}
	gh := newFakeProvider("github")
	require.NoError(t, reg.Register(gh))
	assert.ErrorIs(t, reg.Register(newFakeProvider("github")), oauthflow.ErrInvalidArgument, "duplicate")
	got, err := reg.Get("github")
	require.NoError(t, err)
	assert.Same(t, gh, got)
	assert.True(t, reg.Has("github"))
	assert.False(t, reg.Has("gitlab"))
	_, err = reg.Get("gitlab")
	assert.ErrorIs(t, err, oauthflow.ErrUnknownProvider)
	assert.Equal(t, []string{"github"}, reg.IDs())

	var zero oauthflow.Registry // the zero value works too
	require.NoError(t, zero.Register(newFakeProvider("x")))
	assert.True(t, zero.Has("x"))
}

func TestRegistryConcurrent(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(2)
		go func() { defer wg.Done(); assert.NoError(t, reg.Register(newFakeProvider(fmt.Sprint("p", i)))) }()
		go func() { defer wg.Done(); reg.Has(fmt.Sprint("p", i)); _, _ = reg.Get("p0") }()
	}
	waitfor.Group(t, &wg, "200 registrations and reads")
	assert.Len(t, reg.IDs(), 100)
}

// A resolver builds the providers of its prefix that are not registered yet
// (an MCP server's, on an instance that did not meet it first): once, however
// many callers ask at the same time; other IDs stay unknown, and a resolver's
// error or a provider of another ID is reported, never registered.
func TestRegistryResolver(t *testing.T) {
	t.Parallel()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("github")))
	raced := newFakeProvider("mcp-raced")
	reg.AddResolver("mcp-", func(id string) (oauthflow.Provider, error) {
		switch id {
		case "mcp-gone":
			return nil, fmt.Errorf("%w: %s", oauthflow.ErrUnknownProvider, id)
		case "mcp-liar":
			return newFakeProvider("mcp-other"), nil
		case "mcp-raced":
			require.NoError(t, reg.Register(raced)) // another caller's, registered while this one built
		}
		p := newFakeProvider(id)
		return p, nil
	})

	var wg sync.WaitGroup
	got := make([]oauthflow.Provider, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p, err := reg.Get("mcp-notes")
			assert.NoError(t, err)
			got[i] = p
		}()
	}
	waitfor.Group(t, &wg, "8 resolving reads")
	for _, p := range got {
		assert.Same(t, got[0], p, "every caller gets the one provider registered")
	}
	assert.True(t, reg.Has("mcp-notes"))

	p, err := reg.Get("mcp-raced")
	require.NoError(t, err)
	assert.Same(t, raced, p, "the provider registered first is the one")

	_, err = reg.Get("mcp-gone")
	assert.ErrorIs(t, err, oauthflow.ErrUnknownProvider)
	_, err = reg.Get("mcp-liar")
	assert.ErrorIs(t, err, oauthflow.ErrUnknownProvider)
	assert.False(t, reg.Has("mcp-other"), "a provider of another ID is not registered")
	_, err = reg.Get("slack")
	assert.ErrorIs(t, err, oauthflow.ErrUnknownProvider, "no resolver for the prefix")
	p, err = reg.Get("github")
	require.NoError(t, err)
	assert.Equal(t, "github", p.ProviderID())
}

// A mistyped or unregistered provider is not "sign in again": reads answer
// ErrUnknownProvider, never ErrNoToken, so the agent pattern does not send
// the user to a sign-in that cannot work, and a tool fails saying so.
func TestUnknownProviderIsNotASignIn(t *testing.T) {
	ctx := context.Background()
	reg := oauthflow.NewRegistry()
	if err := reg.Register(newFakeProvider("github")); err != nil {
		t.Fatal(err)
	}
	s := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), reg)

	_, err := s.GetValidAccessToken(ctx, "alice", "githbu")
	if !errors.Is(err, oauthflow.ErrUnknownProvider) || errors.Is(err, oauthflow.ErrNoToken) {
		t.Errorf("GetValidAccessToken for an unknown provider: %v, want ErrUnknownProvider and not ErrNoToken", err)
	}
	_, err = s.GetValidAccessToken(ctx, "alice", "github")
	if !errors.Is(err, oauthflow.ErrNoToken) {
		t.Errorf("GetValidAccessToken for a known provider never connected: %v, want ErrNoToken", err)
	}

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer api.Close()
	resp, err := s.Client(ctx, "alice", "githbu").Get(api.URL)
	if err == nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, oauthflow.ErrUnknownProvider) {
		t.Errorf("Client for an unknown provider: %v, want ErrUnknownProvider", err)
	}

	tool := oauthflow.NewTool("whoami", "", oauthflow.Schema{Type: "object"},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			return s.GetValidAccessToken(ctx, tc.UserID, "githbu")
		})
	res, err := tool.Call(ctx, oauthflow.ToolContext{UserID: "alice"}, []byte(`{}`))
	if _, unauthorized := oauthflow.UnauthorizedResult(res); unauthorized || !errors.Is(err, oauthflow.ErrUnknownProvider) {
		t.Errorf("a tool reading an unknown provider's token: %s, %v; want ErrUnknownProvider, not unauthorized", res, err)
	}
}

// A mistyped provider ID gets the nearest registered one in its error.
func TestRegistryGetSuggestsTheNearestID(t *testing.T) {
	reg := oauthflow.NewRegistry()
	for _, id := range []string{"github", "gitlab", "google"} {
		if err := reg.Register(newFakeProvider(id)); err != nil {
			t.Fatal(err)
		}
	}
	for typo, want := range map[string]string{"githb": `did you mean "github"`, "GitHub": `did you mean "github"`, "gogle": `did you mean "google"`} {
		_, err := reg.Get(typo)
		if !errors.Is(err, oauthflow.ErrUnknownProvider) || !strings.Contains(err.Error(), want) {
			t.Errorf("Get(%q) = %v, want ErrUnknownProvider saying %s", typo, err, want)
		}
	}
	if _, err := reg.Get("salesforce"); err == nil || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("Get of an ID near nothing = %v, want ErrUnknownProvider without a guess", err)
	}
}

// Every method taking a provider ID answers ErrUnknownProvider for one that
// is not registered and has nothing stored, DeleteTokens included, naming
// the nearest registered ID; a record left by a provider the app no longer
// registers can still be deleted.
func TestUnknownProviderEverywhere(t *testing.T) {
	ctx := context.Background()
	kv := oauthflow.NewMemoryKV()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("github")))
	ts := oauthflow.NewTokenStore(kv, reg)
	for name, call := range map[string]func() error{
		"DeleteTokens":        func() error { return ts.DeleteTokens(ctx, "alice", "githubb") },
		"GetTokens":           func() error { _, err := ts.GetTokens(ctx, "alice", "githubb"); return err },
		"GetValidAccessToken": func() error { _, err := ts.GetValidAccessToken(ctx, "alice", "githubb"); return err },
	} {
		err := call()
		if !errors.Is(err, oauthflow.ErrUnknownProvider) || !strings.Contains(err.Error(), `did you mean "github"`) {
			t.Errorf("%s with a mistyped provider: %v, want ErrUnknownProvider suggesting github", name, err)
		}
	}

	// An orphan: stored while "gitlab" was registered, which it is no more.
	old := oauthflow.NewRegistry()
	require.NoError(t, old.Register(newFakeProvider("gitlab")))
	require.NoError(t, oauthflow.NewTokenStore(kv, old).StoreTokens(ctx, "alice", "gitlab", oauthflow.StoredTokens{AccessToken: "at"}))
	require.NoError(t, ts.DeleteTokens(ctx, "alice", "gitlab"), "a record of a provider no longer registered is deleted")
	_, err := oauthflow.NewTokenStore(kv, old).GetTokens(ctx, "alice", "gitlab")
	require.ErrorIs(t, err, oauthflow.ErrNoToken, "the orphan record is gone")
}

// A provider whose redirect URI names a path this module does not serve (a
// typo in GITHUB_OAUTH_REDIRECT_URI) is reported when New finds it in its
// registry and when it is registered later, naming the path expected: the
// browser would land on a 404 and the sign-in stay pending.
func TestMistypedRedirectPathIsReported(t *testing.T) {
	mk := func(id, redirect string) oauthflow.Provider {
		p, err := providers.NewOAuth2(providers.Config{ID: id, AuthURL: "https://as.example/authorize", TokenURL: "https://as.example/token"},
			providers.Credentials{ClientID: "c", ClientSecret: "s", RedirectURL: redirect})
		require.NoError(t, err)
		return p
	}
	var logs bytes.Buffer
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(mk("early", "https://app.example/api/v1/oauth/callbak")))
	require.NoError(t, reg.Register(mk("fine", "https://app.example/api/v1/oauth/callback")))
	require.NoError(t, reg.Register(mk("page", "https://app.example/oauth/callback")))
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	require.NoError(t, err)
	defer m.Close()
	require.NoError(t, m.Registry.Register(mk("late", "https://app.example/oauth/calback")))
	for _, want := range []string{`provider=early`, `/api/v1/oauth/callbak`, `provider=late`, `/oauth/calback`, oauthflow.CallbackPath} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the log does not say %q:\n%s", want, logs.String())
		}
	}
	for _, quiet := range []string{`provider=fine`, `provider=page`} {
		if strings.Contains(logs.String(), quiet) {
			t.Errorf("a redirect this module serves was reported (%s):\n%s", quiet, logs.String())
		}
	}
}
