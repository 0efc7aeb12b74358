package oauthflow_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/authserver"
	"github.com/oauthflow/oauthflow/internal/redistest"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
)

// newKey returns a random key ring entry "id:base64key".
func newKey(t testing.TB, id string) string {
	t.Helper()
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return id + ":" + base64.StdEncoding.EncodeToString(k)
}

func keyRing(t testing.TB, spec ...string) *oauthflow.KeyRing {
	t.Helper()
	r, err := oauthflow.ParseKeyRing(strings.Join(spec, ","))
	require.NoError(t, err)
	return r
}

// redisSpace is a Redis keyspace under a prefix of the test's own, with a
// client to read it raw.
type redisSpace struct {
	c      redis.UniversalClient
	prefix string
	kv     oauthflow.KV
}

func newRedisSpace(t *testing.T) *redisSpace {
	c, real := redistest.Any(t)
	prefix := "test:"
	if real {
		prefix = redistest.Prefix(t, c)
	}
	return &redisSpace{c: c, prefix: prefix, kv: oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), prefix)}
}

// dump returns every key under the prefix (without it) with its value, of
// whatever type the key holds, as text.
func (s *redisSpace) dump(t *testing.T) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := make(map[string]string)
	iter := s.c.Scan(ctx, 0, s.prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		key := iter.Val()
		var v string
		switch typ := s.c.Type(ctx, key).Val(); typ {
		case "string":
			v = s.c.Get(ctx, key).Val()
		case "zset":
			v = fmt.Sprint(s.c.ZRangeWithScores(ctx, key, 0, -1).Val())
		case "hash":
			v = fmt.Sprint(s.c.HGetAll(ctx, key).Val())
		case "list":
			v = fmt.Sprint(s.c.LRange(ctx, key, 0, -1).Val())
		case "set":
			v = fmt.Sprint(s.c.SMembers(ctx, key).Val())
		case "none":
			continue // gone since the scan saw it
		default:
			t.Fatalf("key %s has type %s, which the test cannot read", key, typ)
		}
		out[strings.TrimPrefix(key, s.prefix)] = v
	}
	require.NoError(t, iter.Err())
	return out
}

// With a key ring, whole flows (a workflow sign-in completed by the callback,
// one left pending and then completed through POST /complete, the two tools,
// a refresh, a disconnect) leave no token, refresh token, code or verifier in
// any value of the keyspace, and every token record and pending sign-in is sealed.
func TestEncryptedKeyspaceHoldsNoSecrets(t *testing.T) {
	t.Parallel()
	as := authserver.Start(authserver.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true})
	t.Cleanup(as.Close)
	space := newRedisSpace(t)
	wire := &wireSecrets{secrets: map[string]bool{}}
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	demo, err := providers.NewOAuth2(providers.Config{ID: "demo", AuthURL: as.AuthURL(), TokenURL: as.TokenURL(),
		RevocationURL: as.RevokeURL(), Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: "demo-secret", RedirectURL: api.URL + oauthflow.CallbackPath},
		providers.WithHTTPClient(&http.Client{Transport: wire}))
	require.NoError(t, err)
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(demo))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: space.kv, Registry: reg,
		Logger: slog.New(slog.DiscardHandler), Encryption: keyRing(t, newKey(t, "k1"))})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	m.Mount(mux)
	ctx := context.Background()
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	consent := func(authURL, user string) url.Values {
		resp, err := noRedirect.Get(setParam(authURL, "login_hint", user))
		require.NoError(t, err)
		_ = resp.Body.Close()
		require.Equal(t, http.StatusFound, resp.StatusCode)
		loc, err := url.Parse(resp.Header.Get("Location"))
		require.NoError(t, err)
		wire.keep(loc.Query().Get("code"))
		return loc.Query()
	}

	// A workflow sign-in through the callback page, and one left pending.
	_, doc, err := m.StartSignIn(ctx, "alice", "demo")
	require.NoError(t, err)
	q := consent(doc.AuthURL, "alice")
	status, _, _ := get(t, api.URL+oauthflow.CallbackPath+"?"+q.Encode())
	require.Equal(t, http.StatusOK, status)
	_, pending, err := m.StartSignIn(ctx, "bob", "demo")
	require.NoError(t, err)
	// The tools: build_oauth_url, then exchange_oauth_token with the code.
	raw, err := m.BuildOAuthURL.Call(ctx, oauthflow.ToolContext{UserID: "carol"}, json.RawMessage(`{"provider":"demo","scopes":[]}`))
	require.NoError(t, err)
	var built oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(raw, &built))
	cq := consent(built.AuthURL, "carol")
	args, _ := json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: "demo", Code: cq.Get("code"),
		State: cq.Get("state"), ExpectedState: built.State})
	_, err = m.ExchangeOAuthToken.Call(ctx, oauthflow.ToolContext{UserID: "carol"}, args)
	require.NoError(t, err)
	// A refresh (30 s is inside the skew), with a rotated refresh token.
	_, err = m.Tokens.GetValidAccessToken(ctx, "alice", "demo")
	require.NoError(t, err)
	before := space.dump(t)

	// The pending sign-in completes through POST /complete; carol disconnects.
	bq := consent(pending.AuthURL, "bob")
	resp, err := http.Post(api.URL+oauthflow.CompletePath, "application/json",
		strings.NewReader(fmt.Sprintf(`{"code":%q,"state":%q}`, bq.Get("code"), bq.Get("state"))))
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.NoError(t, m.Tokens.DeleteTokens(ctx, "carol", "demo"))
	after := space.dump(t)

	sealed := 0
	for _, dump := range []map[string]string{before, after} {
		for key, v := range dump {
			if isTokenOrSessionKey(key) {
				require.True(t, strings.HasPrefix(v, "enc1:k1:"), "%s is stored plain: %.60q", key, v)
				sealed++
			}
		}
	}
	require.GreaterOrEqual(t, sealed, 5, "the dumps hold token records and a pending sign-in")
	wire.mu.Lock()
	defer wire.mu.Unlock()
	require.Greater(t, len(wire.secrets), 10, "the wire carried codes, verifiers and tokens")
	for _, dump := range []map[string]string{before, after} {
		for key, v := range dump {
			for s := range wire.secrets {
				if strings.Contains(v, s) || strings.Contains(key, s) {
					t.Errorf("%s holds a secret seen on the wire: %q", key, s)
				}
			}
		}
	}
}

// isTokenOrSessionKey reports whether a key (without the app prefix) is a
// token record's or a pending sign-in's.
func isTokenOrSessionKey(key string) bool {
	rest, ok := strings.CutPrefix(key, "oauth:")
	if !ok {
		return false
	}
	first, _, _ := strings.Cut(rest, ":")
	switch first {
	case "session":
		return true
	case "run", "doc", "lock", "sys", "due", "idx", "mcp", "conn", "meta":
		return false
	}
	return true
}
