package web

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// noscriptForm is the page's form for a browser that runs no script.
var (
	noscriptForm = regexp.MustCompile(`(?s)<noscript>\s*<form method="get" action="([^"]*)">(.*?)</form>\s*</noscript>`)
	hiddenInput  = regexp.MustCompile(`<input type="hidden" name="([^"]*)" value="([^"]*)">`)
)

// formOf returns the no-script form's action and fields, or ok false.
func formOf(t *testing.T, page string) (action string, fields url.Values, ok bool) {
	t.Helper()
	m := noscriptForm.FindStringSubmatch(page)
	if m == nil {
		return "", nil, false
	}
	fields = url.Values{}
	for _, in := range hiddenInput.FindAllStringSubmatch(m[2], -1) {
		fields.Add(html.UnescapeString(in[1]), html.UnescapeString(in[2]))
	}
	return html.UnescapeString(m[1]), fields, true
}

// A browser that runs no script gets a form that sends the provider's answer
// to the API callback, which completes the sign-in and renders the outcome:
// the answer's six fields as they came, markup escaped, nothing else.
func TestCallbackPageFormCarriesTheAnswerWithoutScript(t *testing.T) {
	t.Parallel()
	answer := url.Values{"code": {`c"><script>alert(1)</script>`}, "state": {"st-1"}, "iss": {"https://as.example"},
		"error": {"access_denied"}, "error_description": {"<b>no</b> & more"}, "error_uri": {"https://as.example/e?x=1"}}
	tests := []struct{ apiBase, action string }{
		{"", "/api/v1/oauth/callback"},
		{"/backend/", "/backend/api/v1/oauth/callback"},
		{"https://api.example.com", "https://api.example.com/api/v1/oauth/callback"},
	}
	for _, tt := range tests {
		t.Run(tt.action, func(t *testing.T) {
			t.Parallel()
			q := url.Values{"extra": {"LEAKED"}, "redirect": {"https://evil.example"}}
			for k, v := range answer {
				q[k] = v
			}
			res := get(t, Handler(Options{APIBase: tt.apiBase}), http.MethodGet, "/oauth/callback?"+q.Encode())
			page := body(t, res)
			action, fields, ok := formOf(t, page)
			require.True(t, ok, "the page holds a no-script form:\n%s", page)
			assert.Equal(t, tt.action, action)
			assert.Equal(t, answer, fields, "exactly the answer's fields, as they came")
			assert.NotContains(t, page, "LEAKED", "a parameter outside the answer is not reflected")
			assert.NotContains(t, page, "evil.example")
			assert.NotContains(t, page, "<script>alert(1)")
			assert.NotContains(t, page, "<b>no")
			assert.Equal(t, 2, strings.Count(page, "<script"), "still only the two external scripts")
			assert.Contains(t, page, `<button type="submit">`, "the user submits it")
		})
	}
}

// A page without a whole answer, or with a field longer than any real one,
// offers no form: there is nothing to send, and nothing is reflected.
func TestCallbackPageWithoutAWholeAnswerHasNoForm(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", maxFieldLen+1)
	for name, query := range map[string]string{
		"no query":         "",
		"no state":         "?code=SECRETCODE",
		"no code or error": "?state=STATE&iss=x",
		"empty state":      "?code=SECRETCODE&state=",
		"code too long":    "?state=STATE&code=" + long,
		"state too long":   "?code=SECRETCODE&state=" + long,
		"iss too long":     "?code=SECRETCODE&state=STATE&iss=" + long,
		"bad escape":       "?code=SECRETCODE&state=%zz",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := get(t, Handler(Options{}), http.MethodGet, "/oauth/callback"+query)
			assert.Equal(t, http.StatusOK, res.StatusCode)
			page := body(t, res)
			_, _, ok := formOf(t, page)
			assert.False(t, ok, "no form")
			assert.NotContains(t, page, "<form")
			assert.NotContains(t, page, "SECRETCODE")
			assert.NotContains(t, page, "STATE")
			assert.NotContains(t, page, long[:64])
			assert.Contains(t, page, "<noscript>", "the page still says what is missing")
		})
	}
}

// The form may go to the page's own origin and the API's, nowhere else.
func TestCallbackPageFormActionIsTheAPIOnly(t *testing.T) {
	t.Parallel()
	tests := []struct{ apiBase, formAction string }{
		{"", "form-action 'self';"},
		{"/backend", "form-action 'self';"},
		{"https://api.example.com/svc", "form-action 'self' https://api.example.com;"},
	}
	for _, tt := range tests {
		res := get(t, Handler(Options{APIBase: tt.apiBase}), http.MethodGet, "/oauth/callback?code=c&state=s")
		csp := res.Header.Get("Content-Security-Policy")
		assert.Contains(t, csp, tt.formAction, tt.apiBase)
		assert.Equal(t, 1, strings.Count(csp, "form-action"), csp)
	}
}

// dataCallbackFields is the page's list of the extra fields its script forwards.
var dataCallbackFields = regexp.MustCompile(`data-callback-fields="([^"]*)"`)

// The form and the script carry, besides the answer, the extra fields the
// providers declare (Options.CallbackFields: QuickBooks' realmId, Zoho's
// accounts-server), as the provider sent them, escaped; no other parameter,
// a name that is not one, no value longer than any real one, and no more
// than the API callback keeps, whatever sorts first.
func TestCallbackPageCarriesDeclaredFields(t *testing.T) {
	t.Parallel()
	declared := []string{"realmId", "accounts-server", `bad"name`, "", "code", strings.Repeat("n", 65)}
	for i := range 10 {
		declared = append(declared, fmt.Sprintf("z%02d", i))
	}
	h := Handler(Options{CallbackFields: func() []string { return declared }})
	q := url.Values{"code": {"C1"}, "state": {"S1"}, "realmId": {`4620816365"><b>`},
		"accounts-server": {"https://accounts.zoho.eu"}, "other": {"LEAKED"}, "bad\"name": {"LEAKED"},
		"z00": {strings.Repeat("v", maxFieldLen+1)}}
	for i := range 9 {
		q.Set(fmt.Sprintf("a%02d", i), "LEAKED") // undeclared, sorting first
	}
	for i := 1; i < 10; i++ {
		q.Set(fmt.Sprintf("z%02d", i), "z")
	}
	page := body(t, get(t, h, http.MethodGet, "/oauth/callback?"+q.Encode()))
	_, fields, ok := formOf(t, page)
	require.True(t, ok, page)
	want := url.Values{"code": {"C1"}, "state": {"S1"}, "realmId": {`4620816365"><b>`}, "accounts-server": {"https://accounts.zoho.eu"}}
	for i := 1; len(want) < 4+maxExtraFields-2; i++ {
		want.Set(fmt.Sprintf("z%02d", i), "z")
	}
	assert.Equal(t, want, fields, "the declared fields, in the declared order, at most %d", maxExtraFields)
	assert.NotContains(t, page, "LEAKED")
	assert.NotContains(t, page, `"><b>`)
	assert.NotContains(t, page, strings.Repeat("v", 64))

	m := dataCallbackFields.FindStringSubmatch(page)
	require.NotNil(t, m, "the script learns the names from the page")
	names := strings.Fields(html.UnescapeString(m[1]))
	assert.Equal(t, []string{"realmId", "accounts-server", "z00", "z01"}, names[:4], "only names that are names")
	assert.Len(t, names, 2+10)

	static := body(t, get(t, Handler(Options{}), http.MethodGet, "/oauth/callback?"+q.Encode()))
	_, fields, _ = formOf(t, static)
	assert.Equal(t, url.Values{"code": {"C1"}, "state": {"S1"}}, fields, "none declared: the answer only")
	assert.NotContains(t, static, "data-callback-fields")
}
