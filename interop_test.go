package oauthflow_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Interop: the whole flow through the library's own handlers, against panva's
// oidc-provider, an authorization server this project did not write.

type peerApp struct {
	peer   *oidcpeer.Peer
	mod    *oauthflow.Module
	api    *httptest.Server
	client string
	secret string
	events *eventLog
}

func newPeerApp(t *testing.T, peer *oidcpeer.Peer, client, secret string, style providers.AuthStyle) *peerApp {
	t.Helper()
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	prov, err := providers.Discover(context.Background(), "peer", peer.Issuer(),
		providers.Credentials{ClientID: client, ClientSecret: secret, RedirectURL: api.URL + oauthflow.CallbackPath},
		providers.WithAuthStyle(style))
	require.NoError(t, err, "metadata discovery builds the provider")
	require.Equal(t, peer.Issuer(), prov.Issuer(), "the peer supports RFC 9207 iss")
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(prov))
	events := &eventLog{}
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{KV: sharedRedisAny(t), Registry: reg,
		Logger: slog.New(slog.DiscardHandler), OnEvent: events.hook})
	require.NoError(t, err)
	mod.Mount(mux)
	return &peerApp{peer: peer, mod: mod, api: api, client: client, secret: secret, events: events}
}

// signIn starts a sign-in and returns the run, its prompt and the redirect the
// peer sends the browser to.
func (a *peerApp) signIn(t *testing.T, user string) (*oauthflow.Run, *oauthflow.OAuthPromptDocument, *url.URL) {
	t.Helper()
	run, doc, err := a.mod.StartSignIn(context.Background(), user, "peer", "openid", "offline_access", "read")
	require.NoError(t, err)
	return run, doc, a.peer.Authorize(t, doc.AuthURL, a.api.URL+oauthflow.CallbackPath)
}

func (a *peerApp) prompt(t *testing.T, runID string) oauthflow.OAuthPromptDocument {
	var doc oauthflow.OAuthPromptDocument
	require.NoError(t, a.mod.Engine.Document(context.Background(), runID, oauthflow.PromptDocumentName, &doc))
	return doc
}

func TestInteropClients(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{RTRotate: oidcpeer.RotateAlways})
	for _, c := range []struct {
		name, client, secret string
		style                providers.AuthStyle
	}{
		{"client_secret_basic", oidcpeer.BasicClient, oidcpeer.BasicSecret, ""},
		{"client_secret_post", oidcpeer.PostClient, oidcpeer.PostSecret, providers.AuthStyleParams},
		{"form-encoded secret", oidcpeer.EncClient, oidcpeer.EncSecret, ""},
		{"public client with PKCE", oidcpeer.PublicClient, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			app := newPeerApp(t, peer, c.client, c.secret, c.style)
			run, _, redirect := app.signIn(t, "alice")
			assert.Equal(t, peer.Issuer(), redirect.Query().Get("iss"))
			status, body, _ := get(t, redirect.String())
			require.Equal(t, http.StatusOK, status, "%s\npeer log:\n%s", body, peer.Output())
			assert.Equal(t, oauthflow.PromptSuccess, app.prompt(t, run.ID).Status)
			tok, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
			require.NoError(t, err)
			assert.NotEmpty(t, tok.RefreshToken)
			assert.True(t, peer.Introspect(t, tok.AccessToken, oidcpeer.BasicClient, oidcpeer.BasicSecret) ||
				peer.Introspect(t, tok.AccessToken, c.client, c.secret), "the stored access token is live at the peer")
		})
	}
}

func TestInteropRefresh(t *testing.T) {
	t.Parallel()
	for _, rotate := range []string{oidcpeer.RotateAlways, oidcpeer.RotateNever} {
		t.Run(rotate, func(t *testing.T) {
			t.Parallel()
			// Access tokens live 5 s, inside the 60 s skew: the first read refreshes.
			peer := oidcpeer.Start(t, oidcpeer.Options{RTRotate: rotate})
			app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
			_, _, redirect := app.signIn(t, "alice")
			status, _, _ := get(t, redirect.String())
			require.Equal(t, http.StatusOK, status)
			before, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
			require.NoError(t, err)
			access, err := app.mod.Tokens.GetValidAccessToken(context.Background(), "alice", "peer")
			require.NoError(t, err, "peer log:\n%s", peer.Output())
			assert.NotEqual(t, before.AccessToken, access)
			assert.True(t, peer.Introspect(t, access, oidcpeer.BasicClient, oidcpeer.BasicSecret))
			after, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
			require.NoError(t, err)
			if rotate == oidcpeer.RotateAlways {
				assert.NotEqual(t, before.RefreshToken, after.RefreshToken, "rotation replaces the refresh token")
			} else {
				assert.Equal(t, before.RefreshToken, after.RefreshToken, "no rotation keeps it")
			}
			assert.Contains(t, app.events.kinds(), oauthflow.EventTokensRefreshed)
		})
	}
}

func TestInteropDeleteRevokes(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
	_, _, redirect := app.signIn(t, "alice")
	status, _, _ := get(t, redirect.String())
	require.Equal(t, http.StatusOK, status)
	tok, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	require.NoError(t, err)
	require.True(t, peer.Introspect(t, tok.RefreshToken, oidcpeer.BasicClient, oidcpeer.BasicSecret))
	require.NoError(t, app.mod.Tokens.DeleteTokens(context.Background(), "alice", "peer"))
	assert.False(t, peer.Introspect(t, tok.RefreshToken, oidcpeer.BasicClient, oidcpeer.BasicSecret), "revoked at the peer")
	_, err = app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)
	assert.NotContains(t, app.events.kinds(), oauthflow.EventRevokeFailed)
}

func TestInteropDeniedConsent(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.DenyClient, oidcpeer.DenySecret, "")
	run, _, redirect := app.signIn(t, "alice")
	assert.Equal(t, "access_denied", redirect.Query().Get("error"))
	status, body, _ := get(t, redirect.String())
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "Sign-in not completed")
	doc := app.prompt(t, run.ID)
	assert.Equal(t, oauthflow.PromptError, doc.Status)
	assert.NotEmpty(t, doc.Message)
}

func TestInteropTamperedIssuerRejected(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	app := newPeerApp(t, peer, oidcpeer.BasicClient, oidcpeer.BasicSecret, "")
	run, _, redirect := app.signIn(t, "alice")
	status, body, _ := get(t, setParam(redirect.String(), "iss", "http://127.0.0.1:1/evil"))
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "unexpected issuer")
	_, err := app.mod.Tokens.GetTokens(context.Background(), "alice", "peer")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken, "nothing stored")
	assert.Equal(t, oauthflow.PromptError, app.prompt(t, run.ID).Status)

	// A missing iss is refused too when the provider announces one.
	_, _, redirect = app.signIn(t, "bob")
	status, _, _ = get(t, dropParam(redirect.String(), "iss"))
	assert.Equal(t, http.StatusBadRequest, status)

	// And on an error redirect a mismatched iss records nothing.
	run, doc, err := app.mod.StartSignIn(context.Background(), "carol", "peer", "read")
	require.NoError(t, err)
	u, _ := url.Parse(app.api.URL + oauthflow.CallbackPath)
	u.RawQuery = url.Values{"error": {"access_denied"}, "state": {doc.State}, "iss": {"http://evil.example"}}.Encode()
	status, body, _ = get(t, u.String())
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Contains(t, body, "unexpected issuer")
	assert.Equal(t, oauthflow.PromptPending, app.prompt(t, run.ID).Status)
}
