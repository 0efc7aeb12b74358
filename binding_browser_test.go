package oauthflow_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/browsertest"
)

// With BindSignIns, in a real Chromium: the widget on the frontend's origin
// opens the popup through POST /start on the API's origin, the cookie it sets
// comes back with the provider's redirect to the API's callback, and the
// widget hears the success. The same sign-in's link, opened by anyone else,
// is refused first, and that consumes nothing.
func TestBrowserBoundSignIn(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t, func(cfg *oauthflow.Config) { cfg.BindSignIns = true })
	ctx := browsertest.New(t)
	doc := c.startSignIn(t, "alice")
	require.NotEmpty(t, doc.Binding)

	forwarded := browsertest.ConsentOverHTTP(t, doc.AuthURL, browsertest.Allow)
	status, _, _ := get(t, c.api+oauthflow.CallbackPath+"?"+forwarded.Encode())
	require.Equal(t, http.StatusForbidden, status, "the link alone does not complete")
	require.False(t, c.connected(t, "alice"))

	showPrompt(t, ctx, c.frontend, doc)
	connectWithWidget(t, ctx, c)
}
