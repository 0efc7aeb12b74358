package oauthflow_test

import (
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The hot read over a MemoryKV keeps each stored record decoded beside it. These
// tests hold it to what the general read does: every write is seen at once, an
// expired token is refreshed, a record gone is gone, and nothing is allocated.

func memoryKVs(clock *fakeclock.Clock) map[string]oauthflow.KV {
	return map[string]oauthflow.KV{
		"plain":    oauthflow.NewMemoryKV(oauthflow.WithMemoryClock(clock.Now)),
		"prefixed": oauthflow.WithKeyPrefix(oauthflow.NewMemoryKV(oauthflow.WithMemoryClock(clock.Now)), "app1:"),
	}
}

func TestMemoryReadSeesEveryWrite(t *testing.T) {
	t.Parallel()
	for name, kv := range memoryKVs(fakeclock.New(epoch)) {
		t.Run(name, func(t *testing.T) {
			f := newStoreFixture(t, kv)
			read := func() (string, error) { return f.store.GetValidAccessToken(ctx, "u", "acme") }
			expires := epoch.Add(time.Hour).UnixMilli()
			require.NoError(t, f.store.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "a1", RefreshToken: "r1", ExpiresAt: expires, Scope: "s"}))
			assertRead(t, read, "a1")
			assertRead(t, read, "a1")

			require.NoError(t, f.store.StoreTokens(ctx, "u", "acme", oauthflow.StoredTokens{AccessToken: "a2", RefreshToken: "r1", ExpiresAt: expires, Scope: "s"}))
			assertRead(t, read, "a2")

			raw, err := kv.Get(ctx, "oauth:u:acme")
			require.NoError(t, err)
			a3 := []byte(`{"accessToken":"a3","refreshToken":"r1","expiresAt":` + strconv.FormatInt(expires, 10) + `,"scope":"s"}`)
			swapped, err := kv.CompareAndSwap(ctx, "oauth:u:acme", raw, a3, time.Hour)
			require.NoError(t, err)
			require.True(t, swapped)
			assertRead(t, read, "a3")

			f.clock.Advance(time.Hour) // a3 has expired: the read refreshes
			assertRead(t, read, "access-1")
			assert.EqualValues(t, 1, f.prov.refreshes.Load())
			assertRead(t, read, "access-1")

			require.NoError(t, kv.Del(ctx, "oauth:u:acme"))
			_, err = read()
			assert.ErrorIs(t, err, oauthflow.ErrNoToken)

			require.NoError(t, kv.Set(ctx, "oauth:u:acme", []byte(`{"accessToken":"a4"`), time.Minute))
			_, err = read()
			assert.ErrorIs(t, err, oauthflow.ErrCorruptRecord)
		})
	}
}

// A record whose key has expired in the store is not served from its decoded copy.
func TestMemoryReadHonoursTheStoreTTL(t *testing.T) {
	t.Parallel()
	clock := fakeclock.New(epoch)
	kv := oauthflow.NewMemoryKV(oauthflow.WithMemoryClock(clock.Now))
	f := newStoreFixture(t, kv)
	f.clock = clock
	record := []byte(`{"accessToken":"a1","expiresAt":0,"scope":"s"}`)
	require.NoError(t, kv.Set(ctx, "oauth:u:acme", record, time.Minute))
	assertRead(t, func() (string, error) { return f.store.GetValidAccessToken(ctx, "u", "acme") }, "a1")
	clock.Advance(time.Minute)
	_, err := f.store.GetValidAccessToken(ctx, "u", "acme")
	assert.ErrorIs(t, err, oauthflow.ErrNoToken)
}

func TestValidTokenReadAllocations(t *testing.T) {
	for name, kv := range memoryKVs(fakeclock.New(epoch)) {
		t.Run(name, func(t *testing.T) {
			store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, store.StoreTokens(ctx, "bench-user", "github",
				oauthflow.StoredTokens{AccessToken: "gho_x", RefreshToken: "ghr_y", ExpiresAt: 0, Scope: "repo"}))
			var calls, wrong int
			var last error
			allocs := testing.AllocsPerRun(100, func() {
				tok, err := store.GetValidAccessToken(ctx, "bench-user", "github")
				calls++
				if err != nil || tok != "gho_x" {
					wrong, last = wrong+1, err
				}
			})
			// Measuring a read that fails would measure the error path, not the read.
			require.Zero(t, wrong, "%d of %d measured reads did not return the stored token (last error: %v)", wrong, calls, last)
			assert.Zero(t, allocs, "a valid-token read from memory allocates nothing: not the key, not the token string")
		})
	}
}

func assertRead(t *testing.T, read func() (string, error), want string) {
	t.Helper()
	got, err := read()
	require.NoError(t, err)
	assert.Equal(t, want, got)
}
