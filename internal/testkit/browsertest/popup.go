package browsertest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/cdproto/target"
	"github.com/chromedp/chromedp"
)

// Decision is a button on the demo provider's consent page.
type Decision string

// The consent page's buttons, by their element IDs.
const (
	Allow Decision = "allow"
	Deny  Decision = "deny"
)

// Popup runs trigger in ctx as one step (a click that makes the page call
// window.open) and returns the context of the window the page opened,
// attached to its new target. The context ends with t.
func Popup(t testing.TB, ctx context.Context, step string, trigger ...chromedp.Action[chromedp.Void]) context.Context {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	opened := chromedp.WaitNewTarget(wctx, func(info *target.Info) bool { return info.Type == "page" })
	Run(t, ctx, step, trigger...)
	var id target.ID
	select {
	case got, ok := <-opened:
		if !ok {
			t.Fatalf("%s: cannot watch for a new window: the page has no target", step)
		}
		id = got
	case <-wctx.Done():
		t.Fatalf("%s: no window opened within %s", step, StepTimeout)
	}
	pctx, pcancel := chromedp.NewContext(ctx, chromedp.WithTargetID(id))
	t.Cleanup(pcancel)
	// Attach with no step timeout: chromedp runs the target's event loop on the
	// context of the first run, and a stopped loop stalls the whole browser
	// connection once the window gets events again (when the page reuses it).
	if err := chromedp.Do(pctx); err != nil {
		t.Fatalf("%s: attach to the new window: %v", step, err)
	}
	return pctx
}

// Consent waits for the demo provider's consent page in ctx (a popup from
// Popup, or a tab) and clicks its Allow or Deny button.
func Consent(t testing.TB, ctx context.Context, d Decision) {
	t.Helper()
	button := "#" + string(d)
	Run(t, ctx, "consent: click "+string(d),
		chromedp.WaitVisible(chromedp.CSS(`form[action="authorize/decision"] `+button)),
		chromedp.Click(chromedp.CSS(button)))
}

// WaitClosed waits until the window of popup, a context from Popup, has
// closed itself (window.close in the page), polling the browser's targets.
func WaitClosed(t testing.TB, ctx, popup context.Context) {
	t.Helper()
	c := chromedp.FromContext(popup)
	if c == nil || c.Target == nil {
		t.Fatal("WaitClosed: popup is not an attached chromedp context")
	}
	id := c.Target.TargetID
	deadline := time.Now().Add(StepTimeout)
	for {
		targets, err := chromedp.Targets(ctx)
		if err != nil {
			t.Fatalf("list targets: %v", err)
		}
		open := slices.ContainsFunc(targets, func(i *target.Info) bool { return i.TargetID == id })
		if !open {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the popup did not close within %s", StepTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
