package providers

import (
	"errors"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// sampleParams gives every templated entry the values it needs.
var sampleParams = map[string]map[string]string{
	"auth0":    {"domain": "tenant.us.auth0.com"},
	"keycloak": {"base_url": "https://sso.example.com", "realm": "acme"},
	"okta":     {"domain": "dev-1.okta.com"},
	"shopify":  {"shop": "my-shop"},
}

func TestKnown(t *testing.T) {
	t.Parallel()
	ids := Known()
	if len(ids) < 30 {
		t.Fatalf("catalog has %d providers, want at least 30", len(ids))
	}
	if !sort.StringsAreSorted(ids) || len(slices.Compact(slices.Clone(ids))) != len(ids) {
		t.Errorf("Known() = %v, want sorted and unique", ids)
	}
	for _, must := range []string{"github", "google", "microsoft", "gitlab", "slack", "atlassian", "notion", "discord", "dropbox",
		"salesforce", "hubspot", "linear", "zoom", "spotify", "twitch", "box", "asana", "figma", "bitbucket", "reddit", "strava",
		"xero", "intuit", "linkedin", "x", "shopify", "okta", "auth0", "keycloak"} {
		if !slices.Contains(ids, must) {
			t.Errorf("catalog lacks %q", must)
		}
	}
	ids[0] = "mutated"
	if Known()[0] == "mutated" {
		t.Error("Known returns shared state")
	}
}

var idRE = regexp.MustCompile(`^[a-z0-9]+$`)

func TestCatalogEntries(t *testing.T) {
	t.Parallel()
	cat, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range Known() {
		e := cat[id]
		t.Run(id, func(t *testing.T) {
			t.Parallel()
			checkEntryData(t, e)
			c := testCreds
			c.Params = sampleParams[id]
			p, err := New(id, c)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			cfg := p.Config()
			for name, raw := range map[string]string{"auth": cfg.AuthURL, "token": cfg.TokenURL, "refresh": cfg.RefreshURL, "revocation": cfg.RevocationURL, "docs": e.Docs} {
				if raw == "" && (name == "refresh" || name == "revocation") {
					continue
				}
				if u, err := url.Parse(raw); err != nil || u.Scheme != "https" || u.Host == "" || strings.ContainsAny(raw, "{}") {
					t.Errorf("%s URL %q: want a filled https URL", name, raw)
				}
			}
			checkAuthURL(t, p)
		})
	}
}

func checkEntryData(t *testing.T, e entry) {
	t.Helper()
	if !idRE.MatchString(e.ID) || e.DisplayName == "" || e.Notes == "" {
		t.Errorf("id %q display name %q notes %q", e.ID, e.DisplayName, e.Notes)
	}
	if e.AuthStyle == AuthStyleAuto || e.PKCE == PKCEDefault {
		t.Errorf("auth style %q and PKCE %q must be explicit", e.AuthStyle, e.PKCE)
	}
	if err := e.Config.validateEnums(); err != nil {
		t.Error(err)
	}
	used := map[string]bool{}
	for _, s := range []string{e.AuthURL, e.TokenURL, e.RefreshURL, e.RevocationURL, e.Issuer} {
		for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
			used[m[1]] = true
			if _, ok := e.Params[m[1]]; !ok {
				t.Errorf("placeholder {%s} is not a declared parameter", m[1])
			}
		}
	}
	for name, p := range e.Params {
		if !used[name] && len(p.Values) == 0 {
			t.Errorf("parameter %q is declared but no URL uses it", name)
		}
		if p.Doc == "" {
			t.Errorf("parameter %q has no doc", name)
		}
	}
}

func checkAuthURL(t *testing.T, p *OAuth2) {
	t.Helper()
	q := authQuery(t, p.BuildAuthURL(nil, "state-1"))
	if q.Get("client_id") != "client-1" || q.Get("response_type") != "code" || q.Get("state") != "state-1" || q.Get("redirect_uri") != testCreds.RedirectURL {
		t.Errorf("authorize query %v", q)
	}
	cfg := p.Config()
	if want := strings.Join(cfg.Scopes, cfg.separator()); q.Get("scope") != want {
		t.Errorf("scope = %q, want %q", q.Get("scope"), want)
	}
}

// TestDocListsCatalog keeps the package doc's provider list equal to the catalog.
func TestDocListsCatalog(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile(`(?m)^//   - ([a-z0-9]+): (.+)$`)
	var got, want []string
	for _, m := range line.FindAllStringSubmatch(string(src), -1) {
		got = append(got, m[1]+": "+m[2])
	}
	for _, id := range Known() {
		e := cat[id]
		s := id + ": " + e.DisplayName
		if len(e.Params) > 0 {
			names := make([]string, 0, len(e.Params))
			for n := range e.Params {
				names = append(names, n)
			}
			slices.Sort(names)
			s += " (params: " + strings.Join(names, ", ") + ")"
		}
		want = append(want, s)
	}
	if !slices.Equal(got, want) {
		t.Errorf("doc.go lists\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestNewUnknown(t *testing.T) {
	t.Parallel()
	_, err := New("myspace", testCreds)
	if !errors.Is(err, oauthflow.ErrUnknownProvider) || !strings.Contains(err.Error(), "myspace") {
		t.Fatalf("err = %v", err)
	}
}

func TestNewWithScopes(t *testing.T) {
	t.Parallel()
	p, err := New("github", testCreds, WithScopes("repo"))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.DefaultScopes(); !slices.Equal(got, []string{"repo"}) {
		t.Errorf("DefaultScopes = %v", got)
	}
	p.DefaultScopes()[0] = "mutated"
	q, _ := New("github", testCreds)
	if p.DefaultScopes()[0] != "repo" || q.DefaultScopes()[0] != "read:user" {
		t.Error("DefaultScopes leaks shared state")
	}
}
