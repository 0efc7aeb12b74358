package oauthflow_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// The edges of a refresh (issue 21): a re-encryption or a disconnect between a
// refresh's read and its write. Each runs on memory, miniredis and the real Redis.

// A Reencrypt walk that re-seals the record while a refresh is at the provider
// changes the record's bytes, not its tokens: that is not a newer record, and
// the rotated refresh token is written, never dropped.
func TestRefreshSurvivesReencrypt(t *testing.T) {
	t.Parallel()
	k1, k2 := newKey(t, "k1"), newKey(t, "k2")
	onEveryBackend(t, nil, func(t *testing.T, f *storeFixture) {
		res, release := inFlight(t, f, newRotating("rt-1").answer)
		p, err := oauthflow.Reencrypt(ctx, f.kv, keyRing(t, k2, k1), oauthflow.ReencryptOptions{})
		require.NoError(t, err)
		require.Equal(t, 1, p.Rewritten, "the walk re-seals the record mid-refresh")
		release()
		r := within(t, res, "the read's answer")
		require.NoError(t, r.err)
		assert.Equal(t, "access-1", r.tok, "the caller gets the refreshed token")
		got, err := f.store.GetTokens(ctx, "u", "acme")
		require.NoError(t, err)
		assert.Equal(t, "rt-2", got.RefreshToken, "the rotated refresh token is stored")

		f.clock.Advance(2 * time.Hour) // the next refresh presents rt-2, the live one
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err, "the user stays connected")
		assert.Equal(t, "access-2", tok)
	}, oauthflow.WithEncryption(keyRing(t, k1, k2)))
}

// liveProvider rotates refresh tokens and counts the tokens it would still
// accept: a refresh spends the one presented and issues the next; a revocation
// ends the one named. It rotates before it answers, and its answer waits for
// release, so a disconnect can land while the new token is only in flight.
type liveProvider struct {
	mu      sync.Mutex
	live    map[string]bool
	n       int
	started chan string
	release chan struct{}
}

func newLiveProvider(first string) *liveProvider {
	return &liveProvider{live: map[string]bool{first: true}, started: make(chan string, 8), release: make(chan struct{})}
}

func (p *liveProvider) ProviderID() string      { return "acme" }
func (p *liveProvider) DefaultScopes() []string { return nil }
func (p *liveProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "https://auth.example/authorize"
}
func (p *liveProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return nil, fmt.Errorf("not used")
}

func (p *liveProvider) RefreshToken(ctx context.Context, rt string) (*oauthflow.TokenSet, error) {
	p.mu.Lock()
	if !p.live[rt] {
		p.mu.Unlock()
		return nil, errInvalidGrant
	}
	delete(p.live, rt)
	p.n++
	next := fmt.Sprintf("rt-%d", p.n+1)
	p.live[next] = true
	p.mu.Unlock()
	p.started <- next
	select {
	case <-p.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &oauthflow.TokenSet{AccessToken: "access-" + next, RefreshToken: next, ExpiresIn: 3600}, nil
}

func (p *liveProvider) RevokeToken(_ context.Context, token, _ string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.live, token)
	return nil
}

func (p *liveProvider) liveTokens() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for tok := range p.live {
		out = append(out, tok)
	}
	return out
}

// A disconnect while a refresh is at the provider leaves no token valid
// there: the disconnect revokes the refresh token it deleted, which the
// provider has already rotated away, and the refresh, finding its record
// gone, revokes the token it got.
func TestDisconnectDuringRefreshLeavesNothingLive(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			kv, prov := be.new(t), newLiveProvider("rt-1")
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(prov))
			store := oauthflow.NewTokenStore(kv, reg, oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, store.StoreFromTokenSet(ctx, "u", "acme",
				&oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "rt-1", ExpiresIn: 30}))

			res := goRead(ctx, store, "u")
			within(t, prov.started, "the provider's rotation")
			require.NoError(t, store.DeleteTokens(ctx, "u", "acme"))
			close(prov.release)
			r := within(t, res, "the read's answer")
			assert.ErrorIs(t, r.err, oauthflow.ErrNoToken, "the user is disconnected")
			_, err := store.GetTokens(ctx, "u", "acme")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken, "the refresh does not write the record back")
			assert.Empty(t, prov.liveTokens(), "no token of the connection stays valid at the provider")
		})
	}
}

// A refresh that lands between a disconnect's read and its delete is not
// deleted unrevoked: the disconnect deletes only the record it read, and
// revokes what it deletes.
func TestDisconnectRevokesTheRecordItDeletes(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			prov := newLiveProvider("rt-1")
			close(prov.release)
			reg := oauthflow.NewRegistry()
			require.NoError(t, reg.Register(prov))
			kv := &refreshAfterRead{KV: be.new(t)}
			store := oauthflow.NewTokenStore(kv, reg, oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, store.StoreFromTokenSet(ctx, "u", "acme",
				&oauthflow.TokenSet{AccessToken: "stale", RefreshToken: "rt-1", ExpiresIn: 30}))
			kv.refresh = func() {
				_, err := store.GetValidAccessToken(ctx, "u", "acme")
				assert.NoError(t, err, "the refresh between the disconnect's read and its delete")
			}
			require.NoError(t, store.DeleteTokens(ctx, "u", "acme"))
			_, err := store.GetTokens(ctx, "u", "acme")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken)
			assert.Equal(t, 1, kv.refreshed, "the refresh ran inside the disconnect")
			assert.Empty(t, prov.liveTokens(), "the refreshed token is revoked with the record")
		})
	}
}

// refreshAfterRead runs refresh once, right after the next read of the token
// record (the disconnect's): a refresh elsewhere writing in between.
type refreshAfterRead struct {
	oauthflow.KV
	refresh   func()
	refreshed int
}

func (k *refreshAfterRead) Get(ctx context.Context, key string) ([]byte, error) {
	b, err := k.KV.Get(ctx, key)
	if key == "oauth:u:acme" && k.refresh != nil {
		run := k.refresh
		k.refresh = nil // the refresh's own reads pass
		run()
		k.refreshed++
	}
	return b, err
}
