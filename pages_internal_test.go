package oauthflow

import (
	"bytes"
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
