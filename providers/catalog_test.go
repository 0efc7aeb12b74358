package providers

import (
	"errors"
	"flag"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
)

func TestKnown(t *testing.T) {
	t.Parallel()
	ids := Known()
	if len(ids) < 150 {
		t.Fatalf("catalog has %d providers, want at least 150", len(ids))
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

// exampleParams are the parameters the tests build entry e with: its
// params' examples.
func exampleParams(e entry) map[string]string {
	ps := map[string]string{}
	for name, p := range e.Params {
		if p.Example != "" {
			ps[name] = p.Example
		}
	}
	return ps
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
			c.Params = exampleParams(e)
			p, err := New(id, c)
			if err != nil {
				t.Fatalf("New: %v", err)
			}
			cfg := p.Config()
			for name, raw := range map[string]string{"auth": cfg.AuthURL, "token": cfg.TokenURL, "refresh": cfg.RefreshURL, "revocation": cfg.RevocationURL,
				"device": cfg.DeviceAuthURL, "userinfo": cfg.UserinfoURL, "docs": e.Docs} {
				if raw == "" && (name == "refresh" || name == "revocation" || name == "device" || name == "userinfo") {
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
	if (e.DeviceAuthURL != "") != strings.HasPrefix(e.DeviceDoc, "https://") {
		t.Errorf("device_auth_url %q with device_doc %q: each needs the other, the doc naming its page first", e.DeviceAuthURL, e.DeviceDoc)
	}
	used := map[string]bool{}
	for _, s := range e.Config.templated() {
		for _, m := range placeholderRE.FindAllStringSubmatch(*s, -1) {
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
		if p.Default == "" && p.Example == "" {
			t.Errorf("parameter %q has neither a default nor an example to build the entry with", name)
		}
	}
}

func checkAuthURL(t *testing.T, p *OAuth2) {
	t.Helper()
	q := authQuery(t, p.BuildAuthURL(nil, "state-1"))
	if q.Get(cmpOr(p.Config().ClientIDParam, "client_id")) != "client-1" || q.Get("response_type") != "code" || q.Get("state") != "state-1" || q.Get("redirect_uri") != testCreds.RedirectURL {
		t.Errorf("authorize query %v", q)
	}
	cfg := p.Config()
	if want := strings.Join(cfg.Scopes, cfg.separator()); q.Get("scope") != want {
		t.Errorf("scope = %q, want %q", q.Get("scope"), want)
	}
}

var updateDoc = flag.Bool("update", false, "rewrite docs/providers.md from the catalog")

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

func TestLookup(t *testing.T) {
	t.Parallel()
	e, err := Lookup("okta")
	if err != nil {
		t.Fatal(err)
	}
	if e.Config.AuthURL != "https://{domain}/oauth2/{authorization_server}/v1/authorize" || e.Params["authorization_server"].Default != "default" ||
		e.Params["domain"].Doc == "" || !strings.HasPrefix(e.Docs, "https://") || e.Notes == "" {
		t.Errorf("okta: %+v", e)
	}
	gh, err := Lookup("github")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(gh.Config.DeadGrantCodes, "bad_refresh_token") {
		t.Errorf("github's dead-grant codes %v", gh.Config.DeadGrantCodes)
	}
	gh.Config.Scopes[0], gh.Config.DeadGrantCodes[0] = "mutated", "mutated"
	again, _ := Lookup("github")
	if again.Config.Scopes[0] == "mutated" || again.Config.DeadGrantCodes[0] == "mutated" {
		t.Error("Lookup returns shared state")
	}
	if _, err := Lookup("nope"); !errors.Is(err, oauthflow.ErrUnknownProvider) {
		t.Errorf("unknown: %v", err)
	}
}
