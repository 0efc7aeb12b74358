package oauthflow_test

import (
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/browsertest"
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
	popup := browsertest.Popup(t, ctx, "click Connect", chromedp.Click(chromedp.CSS(`oauth-prompt [data-action="connect"]`)))
	browsertest.Consent(t, popup, browsertest.Allow)
	browsertest.WaitClosed(t, ctx, popup)
	seen := widgetDone(t, ctx)
	require.Len(t, seen, 1, "the widget reported %+v", seen)
	assert.Equal(t, crossOriginDone{Status: "success", Message: "Connected to Demo Cloud."}, seen[0])
	assert.True(t, c.connected(t, "alice"), "the token is stored")
}
