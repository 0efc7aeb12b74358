package oauthflow

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"
)

// A success page from the cache is byte for byte what the template renders
// for the same page, whatever nonce and state it carries, and a page cached
// for one provider or title is never served for another.
func TestCachedSuccessPageIsTheTemplates(t *testing.T) {
	t.Parallel()
	var c pageCache
	origins := []string{"https://app.example.com", `https://x.example"</script>`}
	for _, d := range []pageData{
		{Title: "GitHub account connected", ProviderID: "github", Hint: "You can close this window.", Status: "success", FrontendOrigins: origins},
		{Title: "Acme <Corp> & co account connected", ProviderID: "acme", Hint: "You can close this window.", Status: "success"},
		{Title: "GitHub account connected", ProviderID: "github-enterprise", Hint: "You can close this window.", Status: "success"},
	} {
		for _, fill := range [][2]string{{newState(), newState()}, {randomHex(16), newState()}} {
			d.Nonce, d.State = fill[0], fill[1]
			var want bytes.Buffer
			if err := pageTemplate.Execute(&want, d); err != nil {
				t.Fatal(err)
			}
			if got := c.render(d); !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("cached page for %q differs from the template's:\n%s\nwant:\n%s", d.ProviderID, got, want.Bytes())
			}
		}
	}
}

// The success pages kept are those of providers the registry holds: with
// more providers resolved than the registry keeps, the pages of those it let
// go are let go too.
func TestSuccessPagesBoundedWithTheRegistry(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	if err := reg.Register(idOnly("github")); err != nil {
		t.Fatal(err)
	}
	reg.AddResolver("mcp-", func(id string) (Provider, error) { return idOnly(id), nil })
	var c pageCache
	for i := range maxResolved + 300 {
		id := fmt.Sprintf("mcp-server-%d", i)
		if _, err := reg.Get(id); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{id, "github"} {
			c.write(io.Discard, pageData{Title: id + " account connected", ProviderID: id, Status: "success", Nonce: "n", State: "s"}, reg)
		}
	}
	kept := 0
	c.m.Range(func(key, _ any) bool {
		kept++
		if id, _, _ := strings.Cut(key.(string), "\x00"); !reg.Has(id) {
			t.Errorf("a success page is kept for %s, which the registry let go", id)
		}
		return true
	})
	if kept > maxResolved+1 {
		t.Fatalf("%d success pages kept for a registry that holds at most %d providers", kept, maxResolved+1)
	}
}
