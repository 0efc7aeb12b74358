package oauthflow_test

import (
	"context"
	"net/url"
	"testing"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/browsertest"
)

// Chromium with JavaScript turned off, on the frontend callback page of a
// frontend whose API lives on another origin: the page's <noscript> form is
// what the user sees, and submitting it ends on the API's callback page,
// which says the account is connected; the token is stored.
func TestBrowserWithoutJavaScriptCompletesThroughTheForm(t *testing.T) {
	t.Parallel()
	c := startCrossOrigin(t)
	ctx := browsertest.New(t)
	q := browsertest.ConsentOverHTTP(t, c.startSignIn(t, "erin").AuthURL, browsertest.Allow)
	require.NotEmpty(t, q.Get("code"), "the consent redirected with %v", q)

	var button, title, location string
	browsertest.Run(t, ctx, "open the frontend callback page with JavaScript off",
		chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
			_, err := cdp.Call(ctx, tg, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true})
			return err
		}),
		chromedp.Navigate(c.frontend+"/oauth/callback?"+q.Encode()),
		chromedp.WaitVisible(chromedp.CSS(`form button[type="submit"]`)),
		browsertest.Into(chromedp.Text(chromedp.CSS(`form button[type="submit"]`)), &button))
	assert.Equal(t, "Finish signing in", button)
	assert.False(t, c.connected(t, "erin"), "nothing is completed before the user submits")

	browsertest.Run(t, ctx, "submit the form",
		chromedp.Click(chromedp.CSS(`form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#oauthflow-result`)),
		browsertest.Into(chromedp.Text(chromedp.CSS(`#oauthflow-result h1`)), &title),
		browsertest.Into(chromedp.Location(), &location))
	u, err := url.Parse(location)
	require.NoError(t, err)
	assert.Equal(t, c.api+oauthflow.CallbackPath, u.Scheme+"://"+u.Host+u.Path, "the API callback completed it")
	assert.Contains(t, title, "account connected")
	assert.True(t, c.connected(t, "erin"), "the token is stored")
}
