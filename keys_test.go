package oauthflow_test

import (
	"context"
	"encoding/base64"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordingKV records every key the code under test touches.
type recordingKV struct {
	oauthflow.KV
	mu   sync.Mutex
	seen map[string]bool
}

func (r *recordingKV) touch(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = make(map[string]bool)
	}
	r.seen[key] = true
}

// take returns the keys touched since the last take, sorted.
func (r *recordingKV) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	keys := make([]string, 0, len(r.seen))
	for k := range r.seen {
		keys = append(keys, k)
	}
	r.seen = nil
	slices.Sort(keys)
	return keys
}

func (r *recordingKV) Get(ctx context.Context, k string) ([]byte, error) {
	r.touch(k)
	return r.KV.Get(ctx, k)
}
func (r *recordingKV) Set(ctx context.Context, k string, v []byte, ttl time.Duration) error {
	r.touch(k)
	return r.KV.Set(ctx, k, v, ttl)
}
func (r *recordingKV) SetNX(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	r.touch(k)
	return r.KV.SetNX(ctx, k, v, ttl)
}
func (r *recordingKV) GetDel(ctx context.Context, k string) ([]byte, error) {
	r.touch(k)
	return r.KV.GetDel(ctx, k)
}
func (r *recordingKV) Del(ctx context.Context, k string) error {
	r.touch(k)
	return r.KV.Del(ctx, k)
}
func (r *recordingKV) TTL(ctx context.Context, k string) (time.Duration, error) {
	r.touch(k)
	return r.KV.TTL(ctx, k)
}
func (r *recordingKV) CompareAndDelete(ctx context.Context, k string, v []byte) (bool, error) {
	r.touch(k)
	return r.KV.CompareAndDelete(ctx, k, v)
}
func (r *recordingKV) CompareAndExpire(ctx context.Context, k string, v []byte, ttl time.Duration) (bool, error) {
	r.touch(k)
	return r.KV.CompareAndExpire(ctx, k, v, ttl)
}
func (r *recordingKV) CompareAndSwap(ctx context.Context, k string, old, v []byte, ttl time.Duration) (bool, error) {
	r.touch(k)
	return r.KV.(casKV).CompareAndSwap(ctx, k, old, v, ttl)
}

// hostileUserIDs are user IDs an attacker may choose to reach other records.
var hostileUserIDs = []string{
	"session", "lock:alice", "run:x", "doc:x:y", "lock", "run", "doc", "sys", "lock:run:x",
	"session:acme", ":", "::", "alice:", ":alice", "alice:acme", "~", "~alice",
	"~" + base64.RawURLEncoding.EncodeToString([]byte("session")), // the escaped form of "session", forged
	"ünïcødé ✓", "\x00\xff\xfe", strings.Repeat("x", 512), strings.Repeat(":", 512), strings.Repeat("é", 256),
}

// otherKinds are the key prefixes of records that are not tokens or their locks.
var otherKinds = []string{"oauth:session:", "oauth:run:", "oauth:doc:", "oauth:lock:run:"}

// No user ID, whatever its bytes, makes the token store touch a key that
// another user's tokens or lock use, or a key of another record kind.
func TestHostileUserIDsStayInTheirOwnKeys(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			rec := &recordingKV{KV: be.new(t)}
			f := newStoreFixture(t, rec)
			sessions := oauthflow.NewSessionService(rec)
			require.NoError(t, sessions.Register(ctx, "acme", oauthflow.Session{UserID: "alice", Provider: "acme"}))
			owner := map[string]string{}
			for _, u := range append([]string{"alice"}, hostileUserIDs...) {
				rec.take()
				staleRecord(t, f, u, "rt-"+u)
				_, err := f.store.GetValidAccessToken(ctx, u, "acme") // a refresh: token key and lock key
				require.NoError(t, err, "user %q", u)
				_, err = f.store.GetTokens(ctx, u, "acme")
				require.NoError(t, err, "user %q", u)
				for _, k := range rec.take() {
					if prev, ok := owner[k]; ok && prev != u {
						t.Errorf("users %q and %q share the key %q", prev, u, k)
					}
					owner[k] = u
					for _, kind := range otherKinds {
						assert.False(t, strings.HasPrefix(k, kind), "user %q reached %q", u, k)
					}
				}
			}
			for _, u := range hostileUserIDs {
				require.NoError(t, f.store.DeleteTokens(ctx, u, "acme"))
			}
			got, err := f.store.GetTokens(ctx, "alice", "acme")
			require.NoError(t, err, "alice's tokens survive every hostile user")
			assert.Equal(t, "rt-alice", got.RefreshToken)
			s, err := sessions.Consume(ctx, "acme")
			require.NoError(t, err, "the pending sign-in under state \"acme\" survives user \"session\"")
			assert.Equal(t, "alice", s.UserID)
		})
	}
}

// Plain user IDs keep the seed's key names, so existing deployments read their data.
func TestPlainUserIDsKeepSeedKeys(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	store := oauthflow.NewTokenStore(kv, nil, oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
	for _, u := range []string{"alice", "user:42", "alice@example.com", "auth0|5f1c", "sessions", "Lock:x", "a~b"} {
		require.NoError(t, store.StoreTokens(ctx, u, "github", oauthflow.StoredTokens{AccessToken: "a", Scope: "s"}))
		_, err := kv.Get(ctx, "oauth:"+u+":github")
		assert.NoError(t, err, "user %q", u)
	}
}

// The public endpoints refuse a state not of the issued form before any store
// access: a state shaped like a provider ID never reaches "oauth:session:github",
// which the seed's keys shared with user "session"'s GitHub tokens.
func TestEndpointsRefuseForeignStateBeforeTheStore(t *testing.T) {
	t.Parallel()
	rec := &recordingKV{KV: oauthflow.NewMemoryKV()}
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: rec, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	mux := http.NewServeMux()
	m.Mount(mux)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	require.NoError(t, m.Tokens.StoreTokens(ctx, "session", "github",
		oauthflow.StoredTokens{AccessToken: "a", RefreshToken: "r", Scope: "repo"}))
	rec.take()
	for _, q := range []string{"code=x&state=github", "error=access_denied&state=github", "code=x&state=" + strings.Repeat("A", 44)} {
		status, body, _ := get(t, srv.URL+oauthflow.CallbackPath+"?"+q)
		assert.Equal(t, http.StatusBadRequest, status, q)
		assert.Contains(t, body, "Invalid callback", q)
		assert.NotContains(t, body, "github", "a foreign state is not echoed")
	}
	resp, err := http.Post(srv.URL+oauthflow.CompletePath, "application/json", strings.NewReader(`{"code":"x","state":"github"}`))
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
	assert.Contains(t, string(body), `"invalid_request"`)
	assert.Empty(t, rec.take(), "no store access for a foreign state")
	got, err := m.Tokens.GetTokens(ctx, "session", "github")
	require.NoError(t, err, "user session's GitHub tokens are untouched")
	assert.Equal(t, "r", got.RefreshToken)
}

// The engine refuses run IDs and document names not of its own form before any
// store access: a run ID with ":" could reach another run's documents.
func TestEngineRefusesForeignRunIDs(t *testing.T) {
	t.Parallel()
	rec := &recordingKV{KV: oauthflow.NewMemoryKV()}
	e := oauthflow.NewEngine(rec)
	const run = "0123456789abcdef0123456789abcdef"
	for _, id := range []string{"x", run + ":oauthPrompt", "RUN", strings.Repeat("a", 33), ""} {
		_, err := e.Get(ctx, id)
		assert.ErrorIs(t, err, oauthflow.ErrRunNotFound, id)
		_, err = e.Fire(ctx, id, "t", nil, "u")
		assert.ErrorIs(t, err, oauthflow.ErrRunNotFound, id)
		_, err = e.GetDocument(ctx, id, "oauthPrompt")
		assert.ErrorIs(t, err, oauthflow.ErrNotFound, id)
	}
	_, err := e.GetDocument(ctx, run, "a:b")
	assert.ErrorIs(t, err, oauthflow.ErrNotFound)
	assert.Empty(t, rec.take(), "no store access for a foreign run ID or document name")
}
