package dpop_test

import (
	"fmt"
	"net/url"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow/internal/dpop"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

func mustURL(t testing.TB, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestNoncesPerOrigin(t *testing.T) {
	t.Parallel()
	var n dpop.Nonces
	n.Set(mustURL(t, "https://as.example/token?x=1"), "n-as")
	n.Set(mustURL(t, "https://as.example:8443/token"), "n-8443")
	for target, want := range map[string]string{
		"https://as.example/token":       "n-as",
		"https://AS.example:443/other":   "n-as", // one origin, however it is spelled
		"https://as.example:8443/":       "n-8443",
		"http://as.example/token":        "", // another scheme
		"https://rs.example/token":       "", // another host
		"https://sub.as.example/token":   "",
		"https://as.example:444/token":   "",
		"/token":                         "", // no origin at all
		"https://as.example.evil/token":  "",
		"https://as.example@evil/token":  "",
		"https://evil/as.example/token/": "",
	} {
		if got := n.Get(mustURL(t, target)); got != want {
			t.Errorf("Get(%s) = %q, want %q", target, got, want)
		}
	}
	n.Set(mustURL(t, "https://as.example/"), "")
	if got := n.Get(mustURL(t, "https://as.example/")); got != "n-as" {
		t.Fatalf("an empty nonce replaced the last one: %q", got)
	}
	n.Set(mustURL(t, "https://as.example/"), "n-as-2")
	if got := n.Get(mustURL(t, "https://as.example/token")); got != "n-as-2" {
		t.Fatalf("Get after a new nonce = %q, want n-as-2", got)
	}
	n.Set(mustURL(t, "/relative"), "n-none")
	if got := n.Get(mustURL(t, "/relative")); got != "" {
		t.Fatalf("a URL without an origin was remembered: %q", got)
	}
}

func TestNoncesNilRemembersNothing(t *testing.T) {
	t.Parallel()
	var n *dpop.Nonces
	n.Set(mustURL(t, "https://as.example/"), "n-1")
	if got := n.Get(mustURL(t, "https://as.example/")); got != "" {
		t.Fatalf("nil Nonces returned %q", got)
	}
}

func TestNoncesEvictOldest(t *testing.T) {
	t.Parallel()
	origin := func(i int) *url.URL { return mustURL(t, fmt.Sprintf("https://as%d.example/", i)) }
	n := dpop.Nonces{Max: 2}
	n.Set(origin(1), "a")
	n.Set(origin(2), "b")
	n.Set(origin(1), "a2") // origin 1 is now the most recently set
	n.Set(origin(3), "c")  // so origin 2 goes
	for i, want := range map[int]string{1: "a2", 2: "", 3: "c"} {
		if got := n.Get(origin(i)); got != want {
			t.Errorf("origin %d: %q, want %q", i, got, want)
		}
	}

	var unbounded dpop.Nonces // the zero value: DefaultMaxNonces
	for i := range dpop.DefaultMaxNonces + 1 {
		unbounded.Set(origin(i), fmt.Sprint(i))
	}
	kept := 0
	for i := range dpop.DefaultMaxNonces + 1 {
		if unbounded.Get(origin(i)) != "" {
			kept++
		}
	}
	if kept != dpop.DefaultMaxNonces || unbounded.Get(origin(0)) != "" || unbounded.Get(origin(dpop.DefaultMaxNonces)) == "" {
		t.Fatalf("kept %d origins (first %q, last %q), want the last %d", kept,
			unbounded.Get(origin(0)), unbounded.Get(origin(dpop.DefaultMaxNonces)), dpop.DefaultMaxNonces)
	}
}

// TestNoncesConcurrent: goroutines setting and reading their own origins
// lose nothing (run with -race to also check the locking).
func TestNoncesConcurrent(t *testing.T) {
	t.Parallel()
	const workers, each = 8, 100
	var n dpop.Nonces
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				u := &url.URL{Scheme: "https", Host: fmt.Sprintf("w%d-%d.example", w, i), Path: "/"}
				n.Set(u, "first")
				n.Set(u, fmt.Sprintf("n-%d-%d", w, i))
				n.Get(u)
			}
		}()
	}
	waitfor.Group(t, &wg, "the goroutines setting nonces")
	wrong := 0
	for w := range workers {
		for i := range each {
			if n.Get(mustURL(t, fmt.Sprintf("https://w%d-%d.example/", w, i))) != fmt.Sprintf("n-%d-%d", w, i) {
				wrong++
			}
		}
	}
	if wrong != 0 {
		t.Fatalf("%d of %d origins lost their last nonce", wrong, workers*each)
	}
}
