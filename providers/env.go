package providers

import (
	"maps"
	"os"
	"slices"
	"strings"
)

// FromEnv builds a catalog provider from the process environment. For the ID
// "github" it reads:
//
//	GITHUB_CLIENT_ID            required
//	GITHUB_CLIENT_SECRET        required; set it to the empty string for a public (PKCE-only) client
//	GITHUB_OAUTH_REDIRECT_URI   required
//
// and one variable per catalog parameter, named <ID>_<PARAM>: MICROSOFT_TENANT,
// GITLAB_BASE_URL, SHOPIFY_SHOP, OKTA_DOMAIN, OKTA_AUTHORIZATION_SERVER,
// AUTH0_DOMAIN, SALESFORCE_DOMAIN, KEYCLOAK_BASE_URL, KEYCLOAK_REALM,
// SLACK_TOKEN_TYPE. A parameter without a default is required when a URL
// uses it; the error names the missing variable.
func FromEnv(id string, opts ...Option) (*OAuth2, error) {
	return FromLookup(id, os.LookupEnv, opts...)
}

// FromLookup is FromEnv with the variables read through getenv (os.LookupEnv
// in FromEnv), so tests need not touch the process environment.
func FromLookup(id string, getenv func(string) (string, bool), opts ...Option) (*OAuth2, error) {
	e, err := lookup(id)
	if err != nil {
		return nil, err
	}
	prefix := EnvPrefix(id)
	c := Credentials{Params: map[string]string{}}
	var missing []string
	for _, v := range []struct {
		dst          *string
		name         string
		emptyIsUnset bool
	}{
		{&c.ClientID, prefix + "_CLIENT_ID", true},
		{&c.ClientSecret, prefix + "_CLIENT_SECRET", false},
		{&c.RedirectURL, prefix + "_OAUTH_REDIRECT_URI", true},
	} {
		val, ok := getenv(v.name)
		if !ok || (v.emptyIsUnset && strings.TrimSpace(val) == "") {
			missing = append(missing, v.name)
			continue
		}
		*v.dst = strings.TrimSpace(val)
	}
	missing = readParams(e, prefix, getenv, c.Params, missing)
	if len(missing) > 0 {
		return nil, &MissingEnvError{Names: missing}
	}
	return New(id, c, opts...)
}

// readParams reads the entry's template values into dst, and returns missing
// with the required ones that are not set added.
func readParams(e entry, prefix string, getenv func(string) (string, bool), dst map[string]string, missing []string) []string {
	for _, name := range slices.Sorted(maps.Keys(e.Params)) {
		env := prefix + "_" + strings.ToUpper(name)
		if v, ok := getenv(env); ok && strings.TrimSpace(v) != "" {
			dst[name] = v
			continue
		}
		if e.Params[name].Default == "" && usesParam(e.Config, name) {
			missing = append(missing, env+" ("+e.Params[name].Doc+")")
		}
	}
	return missing
}

func usesParam(c Config, name string) bool {
	ph := "{" + name + "}"
	for _, s := range c.templated() {
		if strings.Contains(*s, ph) {
			return true
		}
	}
	return false
}

// EnvPrefix returns the variable prefix FromEnv uses for id: upper case,
// with every character other than a letter or digit replaced by "_".
func EnvPrefix(id string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			return r
		}
		return '_'
	}, id)
}
