package providers

import (
	"context"
	"errors"
	"flag"
	"maps"
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
				"device": cfg.DeviceAuthURL, "par": cfg.PushedAuthURL, "userinfo": cfg.UserinfoURL, "docs": e.Docs} {
				if raw == "" && (name == "refresh" || name == "revocation" || name == "device" || name == "par" || name == "userinfo") {
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
	if err := e.checkDocs(); err != nil {
		t.Error(err)
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

// What an entry says of the provider's documentation is refused unless each
// endpoint comes with its page and each page with its endpoint, a FAPI 2.0
// claim with the PAR endpoint the profile requires, and every doc names its
// https page first.
func TestCatalogDocClaims(t *testing.T) {
	t.Parallel()
	const page = "https://docs.example/par: pushed requests live a minute"
	par := func(doc, fapi string) entry {
		return entry{Config: Config{PushedAuthURL: "https://{domain}/par"}, PARDoc: doc, FAPIDoc: fapi}
	}
	device := func(endpoint, doc string) entry {
		return entry{Config: Config{DeviceAuthURL: endpoint}, DeviceDoc: doc}
	}
	limit := func(concurrency, perSecond int, doc string) entry {
		return entry{RefreshLimit: &refreshLimit{Concurrency: concurrency, PerSecond: perSecond, Doc: doc}}
	}
	const limits = "https://docs.example/limits: 35 token requests at once"
	for _, tt := range []struct {
		name string
		e    entry
		ok   bool
	}{
		{"nothing claimed", entry{}, true},
		{"par endpoint and page", par(page, ""), true},
		{"fapi with par", par(page, "https://docs.example/fapi2"), true},
		{"device endpoint and page", device("https://a.example/device", "https://docs.example/device: one poll in 5s"), true},
		{"par endpoint without page", par("", ""), false},
		{"par page without endpoint", entry{PARDoc: page}, false},
		{"device endpoint without page", device("https://a.example/device", ""), false},
		{"device page without endpoint", device("", "https://docs.example/device"), false},
		{"fapi without par", entry{FAPIDoc: "https://docs.example/fapi2"}, false},
		{"par page not first", par("the PAR endpoint: https://docs.example/par", ""), false},
		{"par page in prose", par("see https://docs.example/par", ""), false},
		{"par page over http", par("http://docs.example/par", ""), false},
		{"fapi page without scheme", par(page, "docs.example/fapi2"), false},
		{"device page over http", device("https://a.example/device", "http://docs.example/device"), false},
		{"refresh concurrency and page", limit(35, 0, limits), true},
		{"refresh rate and page", limit(0, 120, "https://docs.example/quotas"), true},
		{"refresh limit without page", limit(35, 0, ""), false},
		{"refresh limit page over http", limit(35, 0, "http://docs.example/limits"), false},
		{"refresh limit page in prose", limit(0, 120, "see https://docs.example/quotas"), false},
		{"refresh limit bounding nothing", limit(0, 0, limits), false},
		{"negative refresh concurrency", limit(-1, 120, limits), false},
		{"negative refresh rate", limit(35, -1, limits), false},
	} {
		tt.e.ID = "acme"
		err := tt.e.checkDocs()
		if tt.ok != (err == nil) || err != nil && (!errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), "acme")) {
			t.Errorf("%s: checkDocs() = %v, want ok: %v", tt.name, err, tt.ok)
		}
	}
}

// An entry with a documented refresh limit builds a provider that reports
// exactly that limit, with its page; any other reports none. Amazon Cognito
// and Okta document theirs.
func TestCatalogRefreshLimits(t *testing.T) {
	t.Parallel()
	cat, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	limited := map[string]oauthflow.RefreshLimit{}
	for _, id := range Known() {
		e := cat[id]
		c := testCreds
		c.Params = exampleParams(e)
		p, err := New(id, c)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		got, ok := p.RefreshLimit()
		if ok != (e.RefreshLimit != nil) {
			t.Errorf("%s: RefreshLimit() ok = %v with refresh_limit %+v", id, ok, e.RefreshLimit)
		}
		if ok {
			limited[id] = got
			if want := (oauthflow.RefreshLimit{Concurrency: e.RefreshLimit.Concurrency, PerSecond: e.RefreshLimit.PerSecond}); got != want {
				t.Errorf("%s: RefreshLimit() = %+v, want the entry's %+v", id, got, want)
			}
		}
	}
	want := map[string]oauthflow.RefreshLimit{"cognito": {PerSecond: 120}, "okta": {Concurrency: 35}}
	if !maps.Equal(limited, want) {
		t.Errorf("documented refresh limits %v, want %v", limited, want)
	}
	if e, err := Lookup("cognito"); err != nil || e.Config.RefreshLimit != want["cognito"] {
		t.Errorf("Lookup(cognito) refresh limit %+v, %v", e.Config.RefreshLimit, err)
	}
}

// An entry with a PAR endpoint builds a provider that pushes every sign-in
// there, the endpoint's template filled as the other URLs' are: on the
// authorization endpoint's host.
func TestCatalogPushedAuthorization(t *testing.T) {
	t.Parallel()
	cat, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	pushing := 0
	for _, id := range Known() {
		e := cat[id]
		c := testCreds
		c.Params = exampleParams(e)
		p, err := New(id, c)
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if p.PushesAuthorization() != (e.PushedAuthURL != "") {
			t.Errorf("%s: PushesAuthorization() = %v with pushed_auth_url %q", id, p.PushesAuthorization(), e.PushedAuthURL)
		}
		if e.PushedAuthURL == "" {
			continue
		}
		pushing++
		cfg := p.Config()
		auth, _ := url.Parse(cfg.AuthURL)
		par, err := url.Parse(cfg.PushedAuthURL)
		if err != nil || par.Scheme != "https" || par.Host != auth.Host || strings.ContainsAny(cfg.PushedAuthURL, "{}") {
			t.Errorf("%s: PushedAuthURL %q, want a filled https URL on %s", id, cfg.PushedAuthURL, auth.Host)
		}
	}
	if pushing < 3 {
		t.Errorf("%d catalog entries push; Okta, Keycloak and PingOne document their PAR endpoints", pushing)
	}
}

// A Keycloak provider pushes its sign-ins to the realm's PAR endpoint on the
// server its base_url names, and sends the browser to the realm's
// authorization endpoint with the answer's request_uri.
func TestCatalogKeycloakPushes(t *testing.T) {
	t.Parallel()
	f := newFake(t, jsonReply(201, parAnswer))
	c := testCreds
	c.Params = map[string]string{"base_url": f.srv.URL, "realm": "acme"}
	p, err := New("keycloak", c, WithHTTPClient(f.srv.Client()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.PushAuthorization(context.Background(), nil, "state-1")
	if err != nil {
		t.Fatal(err)
	}
	want := f.srv.URL + "/realms/acme/protocol/openid-connect/auth?client_id=client-1&request_uri=" +
		url.QueryEscape("urn:ietf:params:oauth:request_uri:bwc4JK-ESC0w8acc191e-Y1LTC2")
	if got != want {
		t.Errorf("URL %q, want %q", got, want)
	}
	seen := f.last(t)
	if seen.path != "/realms/acme/protocol/openid-connect/ext/par/request" || seen.form.Get("state") != "state-1" || seen.user != "client-1" {
		t.Errorf("pushed to %q as %q: %v", seen.path, seen.user, seen.form)
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

// ownServers are the entries whose host parameter names a server the app
// itself runs or owns, any host: self-hosted software, Descope's custom API
// domain, and Clerk, whose production Frontend API is on the app's domain.
// Their parameters are kind "url" or "host", from the app's configuration.
var ownServers = map[string]bool{"authentik": true, "clerk": true, "descope": true, "forgejo": true, "fusionauth": true,
	"gitea": true, "gitlab": true, "keycloak": true, "mastodon": true, "sentry": true}

// hostParams are the names of e's parameters that land in a URL's host.
func hostParams(e entry) []string {
	cfg := e.config()
	var names []string
	for name := range e.Params {
		for _, s := range cfg.templated() {
			host, _, _ := strings.Cut(strings.TrimPrefix(*s, "https://"), "/")
			if strings.Contains(host, "{"+name+"}") {
				names = append(names, name)
				break
			}
		}
	}
	slices.Sort(names)
	return names
}

// hostsOf are the hosts of cfg's URLs.
func hostsOf(t *testing.T, cfg Config) []string {
	t.Helper()
	var hosts []string
	for _, s := range cfg.templated() {
		if *s == "" {
			continue
		}
		u, err := url.Parse(*s)
		if err != nil {
			t.Fatalf("%q: %v", *s, err)
		}
		hosts = append(hosts, u.Hostname())
	}
	return hosts
}

// Every catalog parameter that lands in a host takes only the provider's own
// hosts (issue 31): a value from a request (Zoho's accounts-server, Datadog's
// site and domain, a Shopify shop) that names another host, or tries to
// smuggle one past a suffix check, is refused with an error naming the
// allowed ones, and each documented one builds. Only the entries whose
// server is the app's own take any host.
func TestCatalogHostParams(t *testing.T) {
	t.Parallel()
	checked := 0
	for _, id := range Known() {
		e := mustLookup(t, id)
		for _, name := range hostParams(e) {
			p := e.Params[name]
			if ownServers[id] {
				if p.Kind != "url" && p.Kind != "host" {
					t.Errorf("%s parameter %q: an own server's parameter is kind url or host, not %q", id, name, p.Kind)
				}
				continue
			}
			if len(p.Values)+len(p.Hosts) == 0 && p.Kind != "label" && p.Kind != "labels" {
				t.Errorf("%s parameter %q lands in a host and takes any value", id, name)
				continue
			}
			checked++
			build := func(v string) (Config, error) {
				ps := exampleParams(e)
				ps[name] = v
				c := testCreds
				c.Params = ps
				p, err := New(id, c)
				if err != nil {
					return Config{}, err
				}
				return p.Config(), nil
			}
			for _, v := range attacks(p) {
				cfg, err := build(v)
				if err == nil {
					for _, h := range hostsOf(t, cfg) {
						if strings.Contains(h, "attacker") && !(p.Kind == "labels" && strings.HasSuffix(h, strings.TrimPrefix(p.TrimSuffix, "."))) {
							t.Errorf("%s parameter %q = %q builds a provider at %s", id, name, v, h)
						}
					}
					continue
				}
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), p.shape()) {
					t.Errorf("%s parameter %q = %q: %v; want an error naming %s", id, name, v, err, p.shape())
				}
			}
			for _, v := range documented(p) {
				if _, err := build(v); err != nil {
					t.Errorf("%s parameter %q: the documented %q does not build: %v", id, name, v, err)
				}
			}
		}
	}
	if checked < 20 {
		t.Errorf("%d host parameters checked; the catalog has more", checked)
	}
}

// attacks are values naming another host, plainly or past a suffix check.
func attacks(p Param) []string {
	out := []string{"attacker.example", "https://attacker.example", "attacker.example/x", "user@attacker.example",
		"attacker.example:443", "attacker.example#", "x.attacker.example"}
	for _, ok := range append(slices.Clone(p.Values), p.Hosts...) {
		_, parent, _ := strings.Cut(ok, ".")
		ok = strings.TrimPrefix(strings.ReplaceAll(ok, "*", "x1"), "https://")
		out = append(out, "attacker.example/"+ok, "attacker.example#."+ok, "https://attacker.example/"+ok)
		if !slices.Contains(p.Hosts, parent) { // attackerus.auth0.com is a tenant under auth0.com
			out = append(out, "attacker"+ok) // attackerokta.com is not under okta.com
		}
	}
	return out
}

// documented are values the provider documents for p, one for each.
func documented(p Param) []string {
	out := slices.Clone(p.Values)
	for _, h := range p.Hosts {
		out = append(out, "acme-1."+strings.ReplaceAll(h, "*", "x1"))
	}
	if p.Kind == "label" || p.Kind == "labels" {
		out = append(out, "acme-1", "ACME-1"+p.TrimSuffix)
	}
	return out
}
