package browsertest

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// The keys a keyboard-only user presses, for Press.
const (
	Tab    = kb.Tab
	Enter  = kb.Enter
	Space  = " "
	Escape = kb.Escape
)

// maxTabs bounds TabTo: a page whose control is not among its first maxTabs
// stops in the Tab order fails the test instead of cycling for ever.
const maxTabs = 60

// Press presses key (Tab, Enter, Space, Escape) in the page of ctx, as one
// step: the key goes to whatever has focus, as a keyboard's would.
func Press(t testing.TB, ctx context.Context, step, key string) {
	t.Helper()
	Run(t, ctx, step, chromedp.KeyEvent(key))
}

// TabTo presses Tab in the page of ctx until the focused element matches the
// CSS selector sel, and returns that element's accessible name as a screen
// reader starts from (its aria-label, else its text). It fails t when sel is
// not reached within maxTabs presses: the control cannot be reached with the
// keyboard.
func TabTo(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	quoted, err := json.Marshal(sel)
	if err != nil {
		t.Fatal(err)
	}
	check := `(function () { var e = document.activeElement;
  return e && e.matches(` + string(quoted) + `) ? (e.getAttribute("aria-label") || e.textContent.trim() || "(no name)") : ""; })()`
	for range maxTabs {
		var name string
		Run(t, ctx, "Tab towards "+sel, chromedp.KeyEvent(Tab), Into(chromedp.Evaluate[string](check), &name))
		if name != "" {
			return name
		}
	}
	t.Fatalf("%s cannot be reached with Tab: not focused after %d presses", sel, maxTabs)
	return ""
}

// Focused reports whether the focused element of the page of ctx matches sel.
func Focused(t testing.TB, ctx context.Context, sel string) bool {
	t.Helper()
	quoted, err := json.Marshal(sel)
	if err != nil {
		t.Fatal(err)
	}
	var ok bool
	Run(t, ctx, "read the focus", Into(chromedp.Evaluate[bool](`!!document.activeElement && document.activeElement.matches(`+string(quoted)+`)`), &ok))
	return ok
}

// ConsentWithKeyboard answers the demo provider's consent page in ctx (a popup
// from Popup, or a tab) with d, with the keyboard only: Tab to its button,
// then Enter.
func ConsentWithKeyboard(t testing.TB, ctx context.Context, d Decision) {
	t.Helper()
	Run(t, ctx, "consent: wait for the page", chromedp.WaitVisible(chromedp.CSS(`form[action="authorize/decision"] #`+string(d))))
	TabTo(t, ctx, "#"+string(d))
	Press(t, ctx, "consent: press Enter on "+string(d), Enter)
}
