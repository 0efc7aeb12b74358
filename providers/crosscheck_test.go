package providers

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// crossCheck is what two public catalogs list for one entry (Nango's and
// simov/grant's), their placeholders rewritten to the entry's {param}
// names, and, when an endpoint of the entry differs from one of theirs,
// the note that says which page of the provider's own decided and why.
type crossCheck struct {
	Nango catalogEndpoints `json:"nango"`
	Grant catalogEndpoints `json:"grant"`
	Note  string           `json:"note"`
}

// catalogEndpoints are one public catalog's endpoints for a provider, under
// its own key; all empty when that catalog lacks the provider.
type catalogEndpoints struct {
	Key      string `json:"key,omitempty"`
	AuthURL  string `json:"auth_url,omitempty"`
	TokenURL string `json:"token_url,omitempty"`
}

// TestCrossCheck holds every entry's endpoints against the lists compiled
// from two public catalogs (providers/testdata/crosscheck): each entry has a
// record, each catalog that lists the provider agrees on the authorize and
// token URLs, and every disagreement carries its note.
func TestCrossCheck(t *testing.T) {
	t.Parallel()
	records := loadCrossChecks(t)
	cat, err := loadCatalog()
	if err != nil {
		t.Fatal(err)
	}
	listed := 0
	for _, id := range Known() {
		e := cat[id]
		rec, ok := records[id]
		if !ok {
			t.Errorf("%s: no cross-check record", id)
			continue
		}
		delete(records, id)
		for name, c := range map[string]catalogEndpoints{"nango": rec.Nango, "grant": rec.Grant} {
			if c.Key == "" {
				if c != (catalogEndpoints{}) {
					t.Errorf("%s: %s's record names no key", id, name)
				}
				continue
			}
			listed++
			for what, pair := range map[string][2]string{"auth_url": {e.AuthURL, c.AuthURL}, "token_url": {e.TokenURL, c.TokenURL}} {
				if !sameEndpoint(pair[0], pair[1]) && rec.Note == "" {
					t.Errorf("%s: %s %q, but %s lists %q, and no note says why", id, what, pair[0], name, pair[1])
				}
			}
		}
	}
	for id := range records {
		t.Errorf("%s: a cross-check record for no entry", id)
	}
	if listed < len(cat) {
		t.Errorf("only %d of the catalogs' listings cover %d entries: most entries should be in at least one", listed, len(cat))
	}
}

// sameEndpoint compares URLs as catalogs write them: case aside in the
// scheme and host, a trailing slash aside.
func sameEndpoint(a, b string) bool {
	norm := func(s string) string {
		s = strings.TrimSuffix(s, "/")
		if i := strings.Index(s, "://"); i >= 0 {
			rest := s[i+3:]
			host, path, _ := strings.Cut(rest, "/")
			s = strings.ToLower(s[:i+3]+host) + "/" + path
		}
		return s
	}
	return norm(a) == norm(b)
}

func loadCrossChecks(t *testing.T) map[string]crossCheck {
	t.Helper()
	files, err := filepath.Glob("testdata/crosscheck/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no cross-check lists: %v", err)
	}
	all := map[string]crossCheck{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.DisallowUnknownFields()
		var recs map[string]crossCheck
		if err := dec.Decode(&recs); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for id, r := range recs {
			if _, dup := all[id]; dup {
				t.Errorf("%s: %s has a record in another list too", f, id)
			}
			all[id] = r
		}
	}
	return all
}

func TestSameEndpoint(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		same bool
	}{
		{"https://zoom.us/oauth/token", "https://zoom.us/oauth/token/", true},
		{"https://Zoom.US/oauth/token", "https://zoom.us/oauth/token", true},
		{"https://zoom.us/oauth/Token", "https://zoom.us/oauth/token", false},
		{"https://{subdomain}.zendesk.com/oauth/tokens", "https://{subdomain}.zendesk.com/oauth/tokens", true},
		{"https://api.example.com/v2/token", "https://api.example.com/v1/token", false},
	} {
		if got := sameEndpoint(tt.a, tt.b); got != tt.same {
			t.Errorf("sameEndpoint(%q, %q) = %v", tt.a, tt.b, got)
		}
	}
}
