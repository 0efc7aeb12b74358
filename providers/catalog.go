package providers

import (
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"maps"
	"net"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/suggest"
)

// catalogFiles are the catalog's entries, one JSON array per file, grouped
// by what the providers are for; an ID is unique across them.
//
//go:embed catalog/*.json
var catalogFiles embed.FS

// entry is one catalog provider: its Config (URLs may hold {param}
// placeholders), the parameters it takes, and where it was checked.
type entry struct {
	Config
	Params     map[string]Param `json:"params,omitempty"`
	DeadGrants []deadGrant      `json:"dead_grants,omitempty"`
	Docs       string           `json:"docs"`
	Notes      string           `json:"notes"`
	// DeviceDoc is the documentation of the provider's device authorization
	// grant, with its quirks, when the entry has a DeviceAuthURL.
	DeviceDoc string `json:"device_doc,omitempty"`
	// PARDoc is the page of the provider's documentation that names its
	// pushed authorization request endpoint, when the entry has a
	// PushedAuthURL, with what to know about it.
	PARDoc string `json:"par_doc,omitempty"`
	// FAPIDoc is the page saying the provider supports the FAPI 2.0
	// Security Profile. The entry leaves Config.Profile unset, as the
	// profile asks what an entry cannot give every app (a client signing
	// key, DPoP, the server's issuer); an app that has them builds the
	// provider with WithProfile(ProfileFAPI2).
	FAPIDoc string `json:"fapi_doc,omitempty"`
	// RefreshLimit is the bound the provider documents on the app's token
	// requests, with the page that says so (Config.RefreshLimit).
	RefreshLimit *refreshLimit `json:"refresh_limit,omitempty"`
}

// refreshLimit is a provider's documented bound on the app's token requests:
// how many at once, how many a second, and Doc, the page that documents it.
type refreshLimit struct {
	Concurrency int    `json:"concurrency,omitempty"`
	PerSecond   int    `json:"per_second,omitempty"`
	Doc         string `json:"doc"`
}

// deadGrant is one of the provider's own codes for a dead refresh token
// (Config.DeadGrantCodes) and the documentation that shows it.
type deadGrant struct {
	Code string `json:"code"`
	Doc  string `json:"doc"`
}

// Param is a template value or a variant switch of a catalog entry, given
// in Credentials.Params under its name. A value that lands in a host is
// limited to the provider's own hosts, as a value from a request (Zoho's
// accounts-server, Datadog's site) would otherwise send the app's client
// secret, codes and refresh tokens wherever it names:
//
//   - Values lists the values the parameter may take (a region's domain, or
//     a variant switch such as Slack's token_type);
//   - Hosts lists the provider's domains a tenant's host is a single DNS
//     label under (acme.okta.com under okta.com); a "*" in one stands for
//     any single label (auth.*.amazoncognito.com);
//   - Kind "label" is a single DNS label the URL puts before the provider's
//     domain (a Shopify shop); "labels" is one or more of them.
//
// A value outside them is an error naming the allowed ones. Kind "url" is
// an absolute https base URL and kind "host" a host name, of a server the
// app itself runs or owns (a self-hosted GitLab, its custom domain): any
// host, so it comes from the app's configuration, never from a request.
// Any other value is a plain name (a path segment such as Okta's
// authorization server). TrimSuffix is cut from a given value (a domain
// given with the suffix the URL already has). Example is a value the entry
// is built with in the tests when it has no Default.
type Param struct {
	Default    string   `json:"default,omitempty"`
	Kind       string   `json:"kind,omitempty"`
	Values     []string `json:"values,omitempty"`
	Hosts      []string `json:"hosts,omitempty"`
	TrimSuffix string   `json:"trim_suffix,omitempty"`
	Doc        string   `json:"doc"`
	Example    string   `json:"example,omitempty"`
}

// Entry is a catalog provider as checked: its Config, whose URLs may hold
// {param} placeholders that New fills from Credentials.Params, the Params
// it takes, Docs, the https page of the provider's documentation it was
// checked against, and Notes on its behaviour (token lifetimes, rotation,
// quirks).
type Entry struct {
	Config Config
	Params map[string]Param
	Docs   string
	Notes  string
}

// Lookup returns the catalog entry id; an unknown id wraps
// oauthflow.ErrUnknownProvider, naming the nearest known ID when one is close.
// IDs are lower case and case-sensitive. The entry is a copy: changing it changes
// nothing in the catalog.
func Lookup(id string) (Entry, error) {
	e, err := lookup(id)
	if err != nil {
		return Entry{}, err
	}
	cfg := e.config()
	params := make(map[string]Param, len(e.Params))
	for name, p := range e.Params {
		p.Values, p.Hosts = slices.Clone(p.Values), slices.Clone(p.Hosts)
		params[name] = p
	}
	return Entry{Config: cfg, Params: params, Docs: e.Docs, Notes: e.Notes}, nil
}

// loadCatalog parses the embedded catalog once; the result is never modified.
var loadCatalog = sync.OnceValues(func() (map[string]entry, error) {
	files, err := fs.Glob(catalogFiles, "catalog/*.json")
	if err != nil {
		return nil, fmt.Errorf("providers: embedded catalog: %w", err)
	}
	cat := make(map[string]entry)
	for _, name := range files { // sorted
		b, err := catalogFiles.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("providers: embedded catalog: %w", err)
		}
		var list []entry
		if err := json.Unmarshal(b, &list); err != nil {
			return nil, fmt.Errorf("providers: embedded catalog %s: %w", name, err)
		}
		for _, e := range list {
			if err := e.checkDocs(); err != nil {
				return nil, fmt.Errorf("providers: embedded catalog %s: %w", name, err)
			}
			if _, dup := cat[e.ID]; dup {
				return nil, fmt.Errorf("providers: embedded catalog %s: duplicate %q", name, e.ID)
			}
			cat[e.ID] = e
		}
	}
	return cat, nil
})

// Known returns the IDs of the catalog's providers, sorted.
func Known() []string {
	cat, err := loadCatalog()
	if err != nil {
		return nil
	}
	return slices.Sorted(maps.Keys(cat))
}

// New builds a catalog provider. c.Params fills its templates (Entra
// "tenant", GitLab "base_url", Shopify "shop", Okta/Auth0 "domain", Keycloak
// "base_url" and "realm", ...); a missing one is an ErrMissingParam error
// naming it. An unknown id wraps oauthflow.ErrUnknownProvider.
func New(id string, c Credentials, opts ...Option) (*OAuth2, error) {
	e, err := lookup(id)
	if err != nil {
		return nil, err
	}
	cfg, err := e.resolve(c.Params)
	if err != nil {
		return nil, err
	}
	return NewOAuth2(cfg, c, opts...)
}

func lookup(id string) (entry, error) {
	cat, err := loadCatalog()
	if err != nil {
		return entry{}, err
	}
	e, ok := cat[id]
	if !ok {
		return entry{}, fmt.Errorf("%w: %q is not in the catalog%s", oauthflow.ErrUnknownProvider, id, suggest.Hint(id, Known()))
	}
	return e, nil
}

// checkDocs checks what the entry says of the provider's documentation: a
// device authorization or pushed authorization request endpoint comes with
// the page that documents it, and the other way round; a FAPI 2.0 claim
// comes with the PAR endpoint the profile requires (FAPI 2.0 §5.3.3.2); a
// refresh limit comes with its page. Each doc names its https page first,
// then anything more after ": ".
func (e entry) checkDocs() error {
	if (e.DeviceAuthURL != "") != (e.DeviceDoc != "") {
		return invalid("%s: device_auth_url and device_doc each need the other", e.ID)
	}
	if (e.PushedAuthURL != "") != (e.PARDoc != "") {
		return invalid("%s: pushed_auth_url and par_doc each need the other", e.ID)
	}
	if e.FAPIDoc != "" && e.PushedAuthURL == "" {
		return invalid("%s: fapi_doc without pushed_auth_url: FAPI 2.0 pushes every authorization request", e.ID)
	}
	for _, doc := range []string{e.DeviceDoc, e.PARDoc, e.FAPIDoc} {
		if doc != "" && !namesPage(doc) {
			return invalid("%s: doc %q does not name its https page first", e.ID, doc)
		}
	}
	return e.checkRefreshLimit()
}

// checkRefreshLimit checks a documented refresh limit: it bounds something,
// no figure is negative, and its doc names the page that documents it.
func (e entry) checkRefreshLimit() error {
	l := e.RefreshLimit
	switch {
	case l == nil:
		return nil
	case l.Concurrency < 0 || l.PerSecond < 0 || l.Concurrency == 0 && l.PerSecond == 0:
		return invalid("%s: refresh_limit wants concurrency or per_second, and neither negative", e.ID)
	case !namesPage(l.Doc):
		return invalid("%s: refresh_limit doc %q does not name its https page first", e.ID, l.Doc)
	}
	return nil
}

// namesPage reports whether doc begins with an https page, anything more
// set off by ": ".
func namesPage(doc string) bool {
	page, _, _ := strings.Cut(doc, ": ")
	u, err := url.Parse(page)
	return err == nil && u.Scheme == "https" && u.Host != "" && !strings.ContainsAny(page, " \t\n")
}

// config is the entry's Config, unfilled, with its dead-grant codes and its
// refresh limit.
func (e entry) config() Config {
	cfg := cloneConfig(e.Config)
	for _, d := range e.DeadGrants {
		cfg.DeadGrantCodes = append(cfg.DeadGrantCodes, d.Code)
	}
	if l := e.RefreshLimit; l != nil {
		cfg.RefreshLimit = oauthflow.RefreshLimit{Concurrency: l.Concurrency, PerSecond: l.PerSecond}
	}
	return cfg
}

// resolve fills the entry's templates from given and returns a concrete Config.
func (e entry) resolve(given map[string]string) (Config, error) {
	for name := range given {
		if _, ok := e.Params[name]; !ok {
			return Config{}, invalid("%s takes no parameter %q", e.ID, name)
		}
	}
	values := make(map[string]string, len(e.Params))
	for name, p := range e.Params {
		v, err := p.value(e.ID, name, given[name])
		if err != nil {
			return Config{}, err
		}
		values[name] = v
	}
	cfg := e.config()
	if err := fillAll(&cfg, values); err != nil {
		return Config{}, fmt.Errorf("%s: %w", e.ID, err)
	}
	cfg.UserToken = e.UserTokenField != "" && values["token_type"] == "user"
	return cfg, nil
}

var (
	nameRE  = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$`)
	labelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)
)

// value returns the checked value of one parameter; "" when unset and without default.
func (p Param) value(id, name, v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		v = p.Default
	}
	if v == "" {
		return "", nil // reported by fill only if a template uses it
	}
	v = strings.TrimSuffix(v, p.TrimSuffix)
	if p.Kind == "url" {
		u, err := baseURL(id, name, v)
		switch {
		case err == nil:
			v = u
		case len(p.Values) == 0:
			return "", err
		} // else allowed names the values
	}
	switch {
	case len(p.Values) > 0 || len(p.Hosts) > 0:
		return p.allowed(id, name, v)
	case p.Kind == "url":
		return v, nil
	case p.Kind == "label" && !labelRE.MatchString(strings.ToLower(v)),
		p.Kind == "labels" && !allLabels(strings.ToLower(v)):
		return "", invalid("%s parameter %q: %q is not %s", id, name, v, p.shape())
	case !nameRE.MatchString(v):
		return "", invalid("%s parameter %q: %q is not a plain host or name", id, name, v)
	}
	return v, nil
}

// allowed is v when it is one of p.Values (as listed) or a single label
// under one of p.Hosts (lower case), else an error naming them.
func (p Param) allowed(id, name, v string) (string, error) {
	for _, ok := range p.Values {
		if strings.EqualFold(v, ok) {
			return ok, nil
		}
	}
	host := strings.ToLower(v)
	label, rest, _ := strings.Cut(host, ".")
	for _, h := range p.Hosts {
		if labelRE.MatchString(label) && matchesHost(rest, h) {
			return host, nil
		}
	}
	return "", invalid("%s parameter %q: %q is not %s", id, name, v, p.shape())
}

// shape says what values p takes, naming its allowed ones.
func (p Param) shape() string {
	alts := slices.Clone(p.Values)
	for _, h := range p.Hosts {
		alts = append(alts, "<label>."+h)
	}
	switch {
	case len(alts) > 0:
		return "one of " + strings.Join(alts, ", ")
	case p.Kind == "labels":
		return "DNS labels (a-z, 0-9, -) joined by dots"
	}
	return "a single DNS label (a-z, 0-9, -)"
}

// matchesHost reports whether host is pattern, each "*" label of the
// pattern matching any single label.
func matchesHost(host, pattern string) bool {
	hs, ps := strings.Split(host, "."), strings.Split(pattern, ".")
	if len(hs) != len(ps) {
		return false
	}
	for i, p := range ps {
		if p != hs[i] && (p != "*" || !labelRE.MatchString(hs[i])) {
			return false
		}
	}
	return true
}

func allLabels(v string) bool {
	for l := range strings.SplitSeq(v, ".") {
		if !labelRE.MatchString(l) {
			return false
		}
	}
	return true
}

// baseURL accepts an https URL without query or fragment (http only for a
// loopback host, for local development) and drops a trailing slash.
func baseURL(id, name, v string) (string, error) {
	u, err := url.Parse(v)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", invalid("%s parameter %q: %q is not a base URL", id, name, v)
	}
	if u.Scheme != "https" && !(u.Scheme == "http" && isLoopback(u.Hostname())) {
		return "", invalid("%s parameter %q: %q must use https", id, name, v)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

var placeholderRE = regexp.MustCompile(`\{([a-z_]+)\}`)

// templated is the fields of c that may hold {param} placeholders.
func (c *Config) templated() []*string {
	return []*string{&c.AuthURL, &c.TokenURL, &c.RefreshURL, &c.RevocationURL, &c.DeviceAuthURL, &c.PushedAuthURL, &c.Issuer, &c.UserinfoURL}
}

func fillAll(cfg *Config, values map[string]string) error {
	for _, f := range cfg.templated() {
		if err := fill(f, values); err != nil {
			return err
		}
	}
	for k, v := range cfg.AuthParams {
		if err := fill(&v, values); err != nil {
			return err
		}
		cfg.AuthParams[k] = v
	}
	return nil
}

// fill replaces every {name} in *s; a name without a value is ErrMissingParam.
func fill(s *string, values map[string]string) error {
	var missing string
	*s = placeholderRE.ReplaceAllStringFunc(*s, func(m string) string {
		name := m[1 : len(m)-1]
		v := values[name]
		if v == "" && missing == "" {
			missing = name
		}
		return v
	})
	if missing != "" {
		return fmt.Errorf("%w %q (set Credentials.Params[%q])", ErrMissingParam, missing, missing)
	}
	return nil
}
