package oauthflow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"golang.org/x/oauth2"
)

// fakeProvider is a Provider whose refresh answers are scripted by the test.
type fakeProvider struct {
	id        string
	refreshes atomic.Int64
	revoked   atomic.Int64

	mu        sync.Mutex
	onRefresh func(ctx context.Context, rt string, n int64) (*oauthflow.TokenSet, error)
	revokeErr error
}

func newFakeProvider(id string) *fakeProvider {
	return &fakeProvider{id: id, onRefresh: func(_ context.Context, rt string, n int64) (*oauthflow.TokenSet, error) {
		return &oauthflow.TokenSet{AccessToken: fmt.Sprintf("access-%d", n), ExpiresIn: 3600}, nil
	}}
}

func (p *fakeProvider) ProviderID() string      { return p.id }
func (p *fakeProvider) DefaultScopes() []string { return []string{"read"} }
func (p *fakeProvider) BuildAuthURL(scopes []string, state string, _ ...oauth2.AuthCodeOption) string {
	return "https://auth.example/authorize?state=" + state
}
func (p *fakeProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return &oauthflow.TokenSet{AccessToken: "from-code", RefreshToken: "rt-0", ExpiresIn: 3600, Scope: "read"}, nil
}
func (p *fakeProvider) RefreshToken(ctx context.Context, rt string) (*oauthflow.TokenSet, error) {
	n := p.refreshes.Add(1)
	p.mu.Lock()
	fn := p.onRefresh
	p.mu.Unlock()
	return fn(ctx, rt, n)
}
func (p *fakeProvider) RevokeToken(context.Context, string, string) error {
	p.revoked.Add(1)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.revokeErr
}

func (p *fakeProvider) setRefresh(fn func(ctx context.Context, rt string, n int64) (*oauthflow.TokenSet, error)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onRefresh = fn
}

// backend is one KV under test, with a way to read TTLs back from it.
type backend struct {
	name string
	new  func(t *testing.T) oauthflow.KV
}

// backends returns memory, miniredis and the real Redis (required under CI=true).
func backends() []backend {
	return []backend{
		{"memory", func(*testing.T) oauthflow.KV { return oauthflow.NewMemoryKV() }},
		{"miniredis", func(t *testing.T) oauthflow.KV { _, c := redistest.Mini(t); return oauthflow.NewRedisKV(c) }},
		{"redis", func(t *testing.T) oauthflow.KV {
			c := redistest.Real(t)
			return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
		}},
	}
}

// redisBackends are the backends two replicas can share.
func sharedRedis(t *testing.T, real bool) oauthflow.KV {
	if real {
		c := redistest.Real(t)
		return oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), redistest.Prefix(t, c))
	}
	_, c := redistest.Mini(t)
	return oauthflow.NewRedisKV(c)
}

// eventLog records events from a hook.
type eventLog struct {
	mu     sync.Mutex
	events []oauthflow.Event
}

func (l *eventLog) hook(_ context.Context, e oauthflow.Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, e)
}

func (l *eventLog) kinds() []oauthflow.EventKind {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ks []oauthflow.EventKind
	for _, e := range l.events {
		ks = append(ks, e.Kind)
	}
	return ks
}

func (l *eventLog) last(kind oauthflow.EventKind) (oauthflow.Event, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.events) - 1; i >= 0; i-- {
		if l.events[i].Kind == kind {
			return l.events[i], true
		}
	}
	return oauthflow.Event{}, false
}

var errUnreachable = errors.New("dial tcp: connection refused")

var epoch = time.Unix(1_800_000_000, 0)
