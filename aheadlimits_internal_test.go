package oauthflow

import (
	"testing"
	"time"
)

// documentingProvider is a provider that documents a refresh limit (or, with
// ok false, reports that it documents none).
type documentingProvider struct {
	idOnly
	lim RefreshLimit
	ok  bool
}

func (p documentingProvider) RefreshLimit() (RefreshLimit, bool) { return p.lim, p.ok }

// A provider's refreshes ahead keep to the app's limit for it, else the
// app's limit for every provider, else the limit the provider documents,
// else 100 in flight and no rate.
func TestRefreshLimitWhoseLimit(t *testing.T) {
	t.Parallel()
	documents := documentingProvider{idOnly: "acme", lim: RefreshLimit{Concurrency: 7, PerSecond: 3}, ok: true}
	for _, tt := range []struct {
		name                string
		p                   Provider
		app                 map[string]RefreshLimit
		inFlight, perSecond int
	}{
		{"documented", documents, nil, 7, 3},
		{"documented, the app limits another", documents, map[string]RefreshLimit{"other": {Concurrency: 1}}, 7, 3},
		{"the app's for the provider", documents, map[string]RefreshLimit{"acme": {Concurrency: 2}}, 2, 0},
		{"the app's for every provider", documents, map[string]RefreshLimit{"": {PerSecond: 9}}, 100, 9},
		{"the app's for the provider over its own for all", documents,
			map[string]RefreshLimit{"acme": {PerSecond: 4}, "": {PerSecond: 9}}, 100, 4},
		{"documented rate only", documentingProvider{idOnly: "acme", lim: RefreshLimit{PerSecond: 5}, ok: true}, nil, 100, 5},
		{"documents none", documentingProvider{idOnly: "acme", lim: RefreshLimit{Concurrency: 7}}, nil, 100, 0},
		{"no RefreshLimit method", idOnly("acme"), nil, 100, 0},
	} {
		reg := NewRegistry()
		if err := reg.Register(tt.p); err != nil {
			t.Fatal(err)
		}
		s := NewTokenStore(NewMemoryKV(), reg, withRefreshLimits(tt.app))
		if got := s.ahead.limiter.limit(s.ahead.reg, "acme"); got.Concurrency != tt.inFlight || got.PerSecond != tt.perSecond {
			t.Errorf("%s: %d in flight, %d a second; want %d, %d", tt.name, got.Concurrency, got.PerSecond, tt.inFlight, tt.perSecond)
		}
	}
}

// A provider the registry does not hold (yet) gets the default; one a
// resolver builds gets the limit it documents.
func TestRefreshLimitOfProvidersNotRegistered(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	reg.AddResolver("mcp-", func(id string) (Provider, error) {
		return documentingProvider{idOnly: idOnly(id), lim: RefreshLimit{Concurrency: 6}, ok: true}, nil
	})
	s := NewTokenStore(NewMemoryKV(), reg)
	if got := s.ahead.limiter.limit(s.ahead.reg, "acme"); got.Concurrency != 100 || got.PerSecond != 0 {
		t.Errorf("a provider nobody knows: %+v, want the default", got)
	}
	if got := s.ahead.limiter.limit(s.ahead.reg, "mcp-server"); got.Concurrency != 6 {
		t.Errorf("a provider a resolver builds: %+v, want the 6 in flight it documents", got)
	}
}

// documentingHeld is heldProvider's "acme", documenting a refresh limit.
type documentingHeld struct {
	*heldProvider
	lim RefreshLimit
}

func (p documentingHeld) RefreshLimit() (RefreshLimit, bool) { return p.lim, true }

// The rate a provider documents holds its refreshes ahead across the fleet
// as an app's own limit does; an app's limit for it replaces it.
func TestRefreshAheadKeepsToTheDocumentedRate(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		app  map[string]RefreshLimit
		want int64
	}{
		{"documented", nil, 5},
		{"the app's own", map[string]RefreshLimit{"acme": {PerSecond: 8}}, 8},
	} {
		p := &heldProvider{}
		f := newLimitedFleet(t, documentingHeld{heldProvider: p, lim: RefreshLimit{PerSecond: 5}}, 1, 20, tt.app)
		f.passAll(t)
		if n := p.calls.Load(); n != tt.want {
			t.Errorf("%s: %d refreshes in one second, want %d", tt.name, n, tt.want)
		}
		f.clock.Advance(time.Second)
		f.passAll(t)
		if n := p.calls.Load(); n != 2*tt.want {
			t.Errorf("%s: %d refreshes in two seconds, want %d", tt.name, n, 2*tt.want)
		}
	}
}
