package oauthflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// rotatingProvider issues a new refresh token with each refresh and refuses
// one used before, counting the refreshes per user, the reuses, and the calls
// made on a reader's behalf (a context that carries readerKey).
type rotatingProvider struct {
	mu      sync.Mutex
	live    map[string]string // user -> the refresh token the provider accepts
	per     map[string]int    // user -> refreshes
	reuses  int
	readers int
}

type readerKey struct{}

func newRotatingProvider() *rotatingProvider {
	return &rotatingProvider{live: map[string]string{}, per: map[string]int{}}
}

func (p *rotatingProvider) ProviderID() string      { return "acme" }
func (p *rotatingProvider) DefaultScopes() []string { return []string{"read"} }
func (p *rotatingProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "https://auth.example/authorize"
}
func (p *rotatingProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return nil, fmt.Errorf("not used")
}

// signIn is the token set of user's sign-in.
func (p *rotatingProvider) signIn(user string) *oauthflow.TokenSet {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.live[user] = "rt-" + user + "-0"
	return &oauthflow.TokenSet{AccessToken: "at-" + user + "-0", RefreshToken: p.live[user], ExpiresIn: 3600}
}

func (p *rotatingProvider) RefreshToken(ctx context.Context, rt string) (*oauthflow.TokenSet, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ctx.Value(readerKey{}) != nil {
		p.readers++
	}
	user := strings.TrimPrefix(rt[:strings.LastIndex(rt, "-")], "rt-")
	if p.live[user] != rt {
		p.reuses++
		return nil, &oauthflow.ProviderError{ProviderID: "acme", StatusCode: 400, Code: "invalid_grant"}
	}
	p.per[user]++
	n := p.per[user]
	p.live[user] = fmt.Sprintf("rt-%s-%d", user, n)
	return &oauthflow.TokenSet{AccessToken: fmt.Sprintf("at-%s-%d", user, n), RefreshToken: p.live[user], ExpiresIn: 3600}, nil
}

func (p *rotatingProvider) counts() (per map[string]int, total, reuses, readers int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	per = make(map[string]int, len(p.per))
	for u, n := range p.per {
		per[u] = n
		total += n
	}
	return per, total, p.reuses, p.readers
}

// aheadFleet is three Modules sharing one store and one clock, refreshing
// ahead by 5 minutes and leaving connections alone after 2.5 hours unread.
type aheadFleet struct {
	t     *testing.T
	clock *fakeclock.Clock
	prov  *rotatingProvider
	mods  []*oauthflow.Module
	kv    oauthflow.KV
}

func newAheadFleet(t *testing.T, kv oauthflow.KV) *aheadFleet {
	f := &aheadFleet{t: t, clock: fakeclock.New(epoch), prov: newRotatingProvider(), kv: kv}
	for range 3 {
		reg := oauthflow.NewRegistry()
		require.NoError(t, reg.Register(f.prov))
		m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Registry: reg, Now: f.clock.Now,
			Logger: slog.New(slog.DiscardHandler), WorkerInterval: time.Hour, // passes are driven by the test
			RefreshAhead: 5 * time.Minute, RefreshAheadIdle: 150 * time.Minute})
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		f.mods = append(f.mods, m)
	}
	return f
}

// work runs passes on every instance at once until none finds work.
func (f *aheadFleet) work() {
	for range 50 {
		var wg sync.WaitGroup
		done := make([]int, len(f.mods))
		for i, m := range f.mods {
			wg.Add(1)
			go func() {
				defer wg.Done()
				done[i] = oauthflow.WorkOnce(context.Background(), m)
			}()
		}
		waitfor.Group(f.t, &wg, "a pass on every instance")
		if done[0]+done[1]+done[2] == 0 {
			return
		}
	}
	f.t.Fatal("the instances still find due work after 50 passes: a job keeps its entry due")
}

// read reads each user's token on every instance, as a reader.
func (f *aheadFleet) read(users []string) {
	rctx := context.WithValue(context.Background(), readerKey{}, true)
	for _, m := range f.mods {
		for _, u := range users {
			_, err := m.Tokens.GetValidAccessToken(rctx, u, "acme")
			require.NoError(f.t, err, u)
		}
	}
}

// Three instances refresh every due connection ahead of its expiry exactly
// once between them, while reads on every instance never call the provider;
// connections nobody reads are left alone after the idle time, and the next
// read brings them back.
func TestRefreshAheadAcrossInstances(t *testing.T) {
	t.Parallel()
	for _, kv := range []struct {
		name string
		new  func(t *testing.T) oauthflow.KV
	}{
		{"redis", func(t *testing.T) oauthflow.KV { return sharedRedis(t, true) }},
		{"memory", func(*testing.T) oauthflow.KV { return oauthflow.NewMemoryKV() }}, // reads served from the decoded record
	} {
		t.Run(kv.name, func(t *testing.T) {
			t.Parallel()
			refreshAheadAcrossInstances(t, newAheadFleet(t, kv.new(t)))
		})
	}
}

func refreshAheadAcrossInstances(t *testing.T, f *aheadFleet) {
	var active, idle []string
	for i := range 24 {
		u := fmt.Sprintf("user-%02d", i)
		require.NoError(t, f.mods[i%3].Tokens.StoreFromTokenSet(context.Background(), u, "acme", f.prov.signIn(u)))
		if i%2 == 0 {
			active = append(active, u)
		} else {
			idle = append(idle, u)
		}
	}
	all := append(append([]string{}, active...), idle...)

	f.clock.Advance(50 * time.Minute)
	f.work()
	_, total, _, _ := f.prov.counts()
	require.Zero(t, total, "nothing is due 10 minutes before expiry")

	f.clock.Advance(6 * time.Minute) // 4 minutes before expiry: all due
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); f.read(all) }() // reads meanwhile
	f.work()
	waitfor.Group(t, &wg, "the reads beside the passes")
	per, total, reuses, readers := f.prov.counts()
	require.Equal(t, 24, total, "each due connection refreshed once: %v", per)
	for _, u := range all {
		assert.Equal(t, 1, per[u], u)
	}
	assert.Zero(t, reuses)
	assert.Zero(t, readers, "reads never call the provider")

	// An entry made due again (a lease that lapsed while its refresh ran, say)
	// finds the connection refreshed and calls nobody.
	for _, u := range all {
		require.NoError(t, f.kv.Schedule(context.Background(), "oauth:sys:due", "ahead:acme:"+u, f.clock.Now()))
	}
	f.work()
	_, total, _, _ = f.prov.counts()
	require.Equal(t, 24, total, "a connection refreshed ahead is not refreshed again")

	f.clock.Advance(9 * time.Minute) // past the first tokens' expiry
	f.read(all)
	_, _, _, readers = f.prov.counts()
	require.Zero(t, readers, "reads after the first expiry find refreshed tokens")

	// Hours go by; only the active half is read. Each hour every connection
	// read within the idle time is refreshed once, and the others stop.
	for range 6 {
		f.clock.Advance(time.Hour)
		f.work()
		f.read(active)
	}
	per, _, reuses, readers = f.prov.counts()
	assert.Zero(t, reuses)
	assert.Zero(t, readers, "active connections never wait on the provider")
	for _, u := range active {
		assert.Equal(t, 7, per[u], "%s: refreshed ahead every hour", u)
	}
	for _, u := range idle {
		assert.Equal(t, 3, per[u], "%s: refreshed while read within the idle time, then left alone", u)
	}

	// The next read of an idle connection refreshes it on read, and brings
	// it back under refresh ahead.
	f.clock.Advance(time.Hour)
	f.work()
	f.read(idle[:1])
	per, _, _, readers = f.prov.counts()
	assert.Equal(t, 1, readers, "the idle connection is refreshed on read")
	f.clock.Advance(56 * time.Minute)
	f.work()
	per2, _, _, _ := f.prov.counts()
	assert.Equal(t, per[idle[0]]+1, per2[idle[0]], "and ahead again after")
	assert.Equal(t, per[idle[1]], per2[idle[1]], "another idle connection stays alone")
}
