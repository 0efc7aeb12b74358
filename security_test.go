package oauthflow_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/require"
)

// Code injection (RFC 9700 §4.5): a code issued for alice's sign-in, played
// into mallory's callback (his own state), does not connect mallory: the
// code is bound to alice's PKCE challenge, and mallory's session holds his
// own verifier, so the provider refuses the exchange.
func TestInjectedCodeDoesNotConnect(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{})
	_, alice := env.startSignIn(0, "alice")
	stolen, err := url.Parse(env.consent(alice.AuthURL, 0))
	require.NoError(t, err)
	_, mallory := env.startSignIn(0, "mallory")

	injected := env.replicas[0].api.URL + oauthflow.CallbackPath + "?" + url.Values{
		"code": {stolen.Query().Get("code")}, "state": {mallory.State}}.Encode()
	status, _, _ := get(t, injected)
	require.Equal(t, http.StatusBadRequest, status)
	require.Zero(t, env.as.Stats().CodesExchanged, "the provider exchanged nothing")
	_, err = env.mod(0).Tokens.GetTokens(context.Background(), "mallory", "demo")
	require.ErrorIs(t, err, oauthflow.ErrNoToken, "mallory is not connected with alice's account")
}

// Open redirection (RFC 9700 §4.11): no endpoint sends the browser to a URL
// the request names. The callback answers with a page, never a redirect, and
// /start sends a bound sign-in to the authorization URL its session rebuilds.
func TestNoEndpointRedirectsWhereTheRequestSays(t *testing.T) {
	t.Parallel()
	env := newFlowEnv(t, envOptions{config: func(c *oauthflow.Config) { c.BindSignIns = true }})
	api := env.replicas[0].api.URL
	_, doc := env.startSignIn(0, "alice")
	evil := "https://evil.example/landing"
	for _, q := range []url.Values{
		{"state": {doc.State}, "code": {"x"}, "redirect_uri": {evil}, "return_to": {evil}, "next": {evil}},
		{"state": {doc.State}, "error": {"access_denied"}, "error_uri": {evil}, "redirect_uri": {evil}},
	} {
		_, _, h := do(t, http.DefaultClient, newRequest(t, "GET", api+oauthflow.CallbackPath+"?"+q.Encode(), ""))
		require.Empty(t, h.Get("Location"), "the callback never redirects")
	}
	form := url.Values{"state": {doc.State}, "binding": {doc.Binding}, "authUrl": {evil}, "redirect_uri": {evil}}
	status, _, h := do(t, http.DefaultClient, newRequest(t, "POST", api+oauthflow.StartPath, form.Encode(),
		"Content-Type", "application/x-www-form-urlencoded", "Origin", api))
	require.Equal(t, http.StatusSeeOther, status)
	require.Equal(t, doc.AuthURL, h.Get("Location"), "/start goes to the provider its session names, whatever the form says")
}
