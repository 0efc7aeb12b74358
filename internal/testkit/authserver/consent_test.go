package authserver_test

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

var consentField = regexp.MustCompile(`name="consent" value="([^"]+)"`)

// consentPage asks for authorization and returns the page and its consent ID.
func consentPage(t *testing.T, srv *authserver.Server, q url.Values) (string, string) {
	t.Helper()
	resp := authorize(t, srv, q)
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("consent page: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	m := consentField.FindStringSubmatch(string(body))
	if m == nil {
		t.Fatalf("no consent field in %s", body)
	}
	return string(body), m[1]
}

// decide posts the consent form the way a browser would, from the page's URL.
func decide(t *testing.T, srv *authserver.Server, consent, decision string) *http.Response {
	t.Helper()
	action, _ := url.Parse(srv.AuthURL())
	action, _ = action.Parse("authorize/decision") // the form's relative action
	form := url.Values{"consent": {consent}, "decision": {decision}}
	resp, err := noFollow.PostForm(action.String(), form)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestConsentPage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		decision  string
		wantError string
	}{
		{"allow", ""},
		{"deny", "access_denied"},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{ConsentPage: true, IssParameter: true})
			verifier := oauth2.GenerateVerifier()
			page, consent := consentPage(t, srv, authParams(verifier))
			if !strings.Contains(page, authserver.DefaultClientID) || !strings.Contains(page, `id="allow"`) {
				t.Fatalf("page lacks client or buttons: %s", page)
			}
			resp := decide(t, srv, consent, tt.decision)
			if resp.StatusCode != http.StatusSeeOther {
				t.Fatalf("decision: %d, want 303", resp.StatusCode)
			}
			got := locationQuery(t, resp)
			if got.Get("error") != tt.wantError || got.Get("state") != "state-123" || got.Get("iss") != srv.URL() {
				t.Fatalf("redirect query %v", got)
			}
			if tt.wantError == "" {
				wantStatus(t, exchange(t, srv, confidential, got.Get("code"), verifier), http.StatusOK)
			}
			// A consent is answered once.
			if again := decide(t, srv, consent, "allow"); again.StatusCode != http.StatusBadRequest {
				t.Fatalf("second decision: %d, want 400", again.StatusCode)
			}
		})
	}
}

func TestConsentPageEscapes(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{ConsentPage: true})
	q := authParams(oauth2.GenerateVerifier())
	q.Set("login_hint", `<img src=x onerror=alert(1)>`)
	q.Set("scope", `"><script>alert(1)</script>`)
	page, _ := consentPage(t, srv, q)
	if strings.Contains(page, "<script>alert") || strings.Contains(page, "<img") {
		t.Fatalf("page echoes markup: %s", page)
	}
}

func TestConsentExpires(t *testing.T) {
	t.Parallel()
	clock := newClock()
	srv := start(t, authserver.Options{ConsentPage: true, Now: clock.Now})
	_, consent := consentPage(t, srv, authParams(oauth2.GenerateVerifier()))
	clock.Advance(authserver.DefaultCodeTTL)
	if resp := decide(t, srv, consent, "allow"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("late decision: %d, want 400", resp.StatusCode)
	}
	if resp := decide(t, srv, "forged", "allow"); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("unknown consent: %d, want 400", resp.StatusCode)
	}
}
