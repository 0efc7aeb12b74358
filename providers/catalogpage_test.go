package providers

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestProvidersPage keeps docs/providers.md equal to the catalog: one row
// per provider with its parameters, PKCE, refresh, device grant, pushed
// authorization requests, DPoP, revocation, account and quirks, then each
// entry's endpoints, refresh limit, notes and documentation. Run it with -update to rewrite
// the page after changing the catalog.
func TestProvidersPage(t *testing.T) {
	t.Parallel()
	const path = "../docs/providers.md"
	cat, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	want := providersPage(cat)
	got, err := os.ReadFile(path)
	if err != nil && !*updateDoc {
		t.Fatal(err)
	}
	if string(got) == want {
		return
	}
	if *updateDoc {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s is out of date; run go test ./providers -run TestProvidersPage -update", path)
}

// providersPage renders the catalog as Markdown.
func providersPage(cat map[string]entry) string {
	var b strings.Builder
	ids := Known()
	fmt.Fprintf(&b, "# Providers\n\n")
	fmt.Fprintf(&b, "The catalog's %d providers, as `providers.New(id, credentials)` builds them; `providers.Lookup(id)` returns an\n", len(ids))
	b.WriteString("entry as checked and `providers.Known()` lists the IDs. Each entry was checked against the provider's own\n")
	b.WriteString("documentation (linked below) and against two public catalogs. Parameters fill the URLs' `{param}` templates\n")
	b.WriteString("(`Credentials.Params`, or `<ID>_<PARAM>` for `providers.FromEnv`). This page is generated from the catalog\n")
	b.WriteString("(`go test ./providers -run TestProvidersPage -update`); a test keeps it equal.\n\n")
	b.WriteString("| ID | Provider | Parameters | PKCE | Refresh | Device grant | PAR | DPoP | Revocation | Account | Quirks |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, id := range ids {
		e := cat[id]
		fmt.Fprintf(&b, "| [%s](#%s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", id, id, cell(e.DisplayName),
			orDash(strings.Join(slices.Sorted(maps.Keys(e.Params)), ", ")), cmpOr(string(e.PKCE), "supported"), refreshCell(e),
			yes(e.DeviceAuthURL != ""), parCell(e), yes(e.DPoP), yes(e.RevocationURL != ""), accountCell(e), orDash(strings.Join(quirks(e), "; ")))
	}
	for _, id := range ids {
		e := cat[id]
		fmt.Fprintf(&b, "\n## %s\n\n%s. ", id, e.DisplayName)
		if e.Notes != "" {
			b.WriteString(e.Notes)
		}
		b.WriteString("\n\n")
		item := func(format string, args ...any) { fmt.Fprintf(&b, "- "+format+"\n", args...) }
		item("Authorize: `%s`", e.AuthURL)
		item("Token: `%s`", e.TokenURL)
		if e.RefreshURL != "" {
			item("Refresh: `%s`", e.RefreshURL)
		}
		if e.RevocationURL != "" {
			item("Revocation (RFC 7009): `%s`", e.RevocationURL)
		}
		if e.DeviceAuthURL != "" {
			item("Device authorization (RFC 8628): `%s` (%s)", e.DeviceAuthURL, e.DeviceDoc)
		}
		if e.PushedAuthURL != "" {
			item("Pushed authorization requests (RFC 9126), every sign-in: `%s` (%s)", e.PushedAuthURL, e.PARDoc)
		}
		if e.FAPIDoc != "" {
			item("FAPI 2.0 Security Profile, with `providers.WithProfile(providers.ProfileFAPI2)`: %s", e.FAPIDoc)
		}
		if l := e.RefreshLimit; l != nil {
			item("Refresh limit, which refresh ahead keeps to: at most %s (%s)", refreshLimitText(l), l.Doc)
		}
		if e.UserinfoURL != "" {
			item("Account: `%s` from %s `%s`", e.AccountField, cmpOr(e.UserinfoMethod, "GET"), e.UserinfoURL)
		}
		sep := cmpOr(e.ScopeSeparator, " ")
		item("Default scopes: %s, joined with `%q`", orDash(codeList(e.Scopes)), sep)
		auth := map[AuthStyle]string{AuthStyleHeader: "HTTP Basic", AuthStyleParams: "client_id and client_secret in the form",
			AuthStyleAuto: "tried as HTTP Basic, then in the form"}[e.AuthStyle]
		if e.JSONTokenRequest {
			auth += ", JSON token requests"
		}
		item("Client authentication: %s", auth)
		for _, name := range slices.Sorted(maps.Keys(e.Params)) {
			p := e.Params[name]
			def := ""
			if p.Default != "" {
				def = " (default `" + p.Default + "`)"
			}
			allowed := ""
			if len(p.Values)+len(p.Hosts) > 0 {
				allowed = "; " + codeAlts(p.shape())
			}
			item("Parameter `%s` (env `%s_%s`)%s: %s%s", name, EnvPrefix(id), strings.ToUpper(name), def, p.Doc, allowed)
		}
		for _, d := range e.DeadGrants {
			item("Dead grant: `%s`: %s", d.Code, d.Doc)
		}
		item("Documentation: %s", e.Docs)
	}
	return b.String()
}

// quirks names what the entry does differently from RFC 6749.
func quirks(e entry) []string {
	var q []string
	add := func(ok bool, s string) {
		if ok {
			q = append(q, s)
		}
	}
	add(e.ScopeSeparator != "" && e.ScopeSeparator != " ", "scopes joined with `"+e.ScopeSeparator+"`")
	add(e.JSONTokenRequest, "JSON token requests")
	add(e.ClientIDParam != "", "client_id named `"+e.ClientIDParam+"`")
	add(e.ClientSecretParam != "", "client_secret named `"+e.ClientSecretParam+"`")
	add(len(e.AuthParams) > 0, "authorize params "+codeList(slices.Sorted(maps.Keys(e.AuthParams))))
	add(len(e.TokenParams) > 0, "token params "+codeList(slices.Sorted(maps.Keys(e.TokenParams))))
	add(len(e.RefreshParams) > 0, "refresh params "+codeList(slices.Sorted(maps.Keys(e.RefreshParams))))
	add(e.TokenPath != "", "token under `"+e.TokenPath+"`")
	add(e.ExpiresField != "", "lifetime in `"+e.ExpiresField+"`")
	add(e.ExpiresUnit == "ms", "lifetime in milliseconds")
	add(len(e.KeepFields) > 0, "keeps "+codeList(e.KeepFields))
	add(len(e.CallbackFields) > 0, "keeps callback "+codeList(e.CallbackFields))
	add(len(e.TokenTypes) > 0, "token types "+codeList(e.TokenTypes))
	add(e.UserTokenField != "", "user token under `"+e.UserTokenField+"`")
	add(e.ErrorCodeField != "", "error code in `"+e.ErrorCodeField+"`")
	add(len(e.DeadGrants) > 0, "dead-grant codes")
	return q
}

// refreshLimitText says what a documented refresh limit bounds.
func refreshLimitText(l *refreshLimit) string {
	var parts []string
	if l.Concurrency > 0 {
		parts = append(parts, fmt.Sprintf("%d token requests at once", l.Concurrency))
	}
	if l.PerSecond > 0 {
		parts = append(parts, fmt.Sprintf("%d token requests a second", l.PerSecond))
	}
	return strings.Join(parts, " and ")
}

func refreshCell(e entry) string {
	if e.RefreshURL != "" {
		return "own endpoint"
	}
	return "token endpoint"
}

// parCell says whether the entry pushes its sign-ins, whether the server
// refuses any other, and whether the provider documents FAPI 2.0.
func parCell(e entry) string {
	s := yes(e.PushedAuthURL != "")
	if e.RequirePAR {
		s = "required"
	}
	if e.FAPIDoc != "" {
		s += ", FAPI 2.0"
	}
	return s
}

func accountCell(e entry) string {
	switch {
	case e.UserinfoURL != "":
		return "`" + e.AccountField + "`"
	case e.IDTokenField != "":
		return "ID token `" + e.IDTokenField + "`"
	}
	return "—"
}

func codeList(s []string) string {
	out := make([]string, len(s))
	for i, v := range s {
		out[i] = "`" + v + "`"
	}
	return strings.Join(out, ", ")
}

// codeAlts is "one of a, b" with each alternative in code.
func codeAlts(shape string) string {
	alts, ok := strings.CutPrefix(shape, "one of ")
	if !ok {
		return shape
	}
	return "one of " + codeList(strings.Split(alts, ", "))
}

func cell(s string) string { return strings.ReplaceAll(s, "|", "\\|") }

func orDash(s string) string { return cmpOr(s, "—") }

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "—"
}
