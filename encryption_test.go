package oauthflow_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	kvpkg "github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
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

// With OAUTHFLOW_ENCRYPTION_KEYS set, whole flows (a workflow sign-in completed by the callback,
// one left pending and then completed through POST /complete, the two tools,
// a refresh, a disconnect) leave no token, refresh token, code or verifier in
// any value of the keyspace, and every token record and pending sign-in is sealed.
func TestEncryptedKeyspaceHoldsNoSecrets(t *testing.T) {
	t.Setenv("OAUTHFLOW_ENCRYPTION_KEYS", newKey(t, "k1")) // New reads the ring from it
	as := authserver.Start(authserver.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true})
	t.Cleanup(as.Close)
	space := newRedisSpace(t)
	wire := &wireSecrets{secrets: map[string]bool{}}
	m, api := wiredModule(t, as, wire, oauthflow.Config{KV: space.kv, Logger: slog.New(slog.DiscardHandler)})
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
				require.True(t, strings.HasPrefix(v, "enc2:k1:"), "%s is stored plain: %.60q", key, v)
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

// rotationStores are token stores over one KV: one writing plain, and one per ring.
type rotationStores struct {
	kv                 oauthflow.KV
	p                  *fakeProvider
	plain, k1, k21, k2 *oauthflow.TokenStore
	now                time.Time
	k1spec, k2spec     string
}

func newRotationStores(t *testing.T, kv oauthflow.KV) *rotationStores {
	rs := &rotationStores{kv: kv, p: newFakeProvider("demo"), now: time.Now(),
		k1spec: newKey(t, "k1"), k2spec: newKey(t, "k2")}
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(rs.p))
	store := func(ring *oauthflow.KeyRing) *oauthflow.TokenStore {
		return oauthflow.NewTokenStore(kv, reg, oauthflow.WithEncryption(ring), oauthflow.WithLogger(slog.New(slog.DiscardHandler)),
			oauthflow.WithClock(func() time.Time { return rs.now }))
	}
	rs.plain = store(nil)
	rs.k1 = store(keyRing(t, rs.k1spec))
	rs.k21 = store(keyRing(t, rs.k2spec, rs.k1spec))
	rs.k2 = store(keyRing(t, rs.k2spec))
	return rs
}

func (rs *rotationStores) raw(t *testing.T, user string) string {
	t.Helper()
	b, err := rs.kv.Get(context.Background(), "oauth:"+user+":demo")
	require.NoError(t, err)
	return string(b)
}

// Rotation: records written plain or under an old key read under a ring that
// still holds it, and are rewritten under the ring's first key by their next
// write, a refresh included. A record under a key the ring lacks is an error
// that names the key ID, never "no token", and no read (a refresh due
// included) and no disconnect deletes or rewrites it.
func TestEncryptionKeyRotation(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testEncryptionKeyRotation(t, newRotationStores(t, b.new(t)))
		})
	}
}

func testEncryptionKeyRotation(t *testing.T, rs *rotationStores) {
	ctx := context.Background()
	valid := oauthflow.StoredTokens{AccessToken: "at-valid", RefreshToken: "rt-1", ExpiresAt: rs.now.Add(time.Hour).UnixMilli(), Scope: "read"}
	expired := valid
	expired.AccessToken, expired.ExpiresAt = "at-expired", rs.now.Add(-time.Hour).UnixMilli()

	require.NoError(t, rs.plain.StoreTokens(ctx, "old", "demo", valid))
	require.True(t, strings.HasPrefix(rs.raw(t, "old"), "{"), "written before encryption: plain")
	require.NoError(t, rs.k1.StoreTokens(ctx, "one", "demo", expired))
	require.True(t, strings.HasPrefix(rs.raw(t, "one"), "enc2:k1:"))

	tok, err := rs.k21.GetValidAccessToken(ctx, "old", "demo")
	require.NoError(t, err, "a plain record stays readable")
	require.Equal(t, "at-valid", tok)
	got, err := rs.k21.GetTokens(ctx, "one", "demo")
	require.NoError(t, err, "a record under the old key reads under the new ring")
	require.Equal(t, expired, *got)

	tok, err = rs.k21.GetValidAccessToken(ctx, "one", "demo") // due: a refresh rewrites it
	require.NoError(t, err)
	require.Equal(t, "access-1", tok)
	require.True(t, strings.HasPrefix(rs.raw(t, "one"), "enc2:k2:"), "the refresh wrote under the current key")
	require.NoError(t, rs.k21.StoreTokens(ctx, "old", "demo", valid))
	require.True(t, strings.HasPrefix(rs.raw(t, "old"), "enc2:k2:"), "the next write seals the plain record")

	// k2 alone, or no ring at all, meets a record under k1.
	require.NoError(t, rs.k1.StoreTokens(ctx, "stale", "demo", expired))
	before := rs.raw(t, "stale")
	for name, s := range map[string]*oauthflow.TokenStore{"ring without k1": rs.k2, "no ring": rs.plain} {
		_, err = s.GetValidAccessToken(ctx, "stale", "demo")
		require.ErrorIs(t, err, oauthflow.ErrUnknownKey, name)
		require.NotErrorIs(t, err, oauthflow.ErrNoToken, "%s: the user must not be sent to sign in again", name)
		require.ErrorContains(t, err, `"k1"`, "%s: the error names the key ID", name)
		_, err = s.GetTokens(ctx, "stale", "demo")
		require.ErrorIs(t, err, oauthflow.ErrUnknownKey, name)
		require.ErrorIs(t, s.DeleteTokens(ctx, "stale", "demo"), oauthflow.ErrUnknownKey,
			"%s: a disconnect that cannot revoke the grant refuses, rather than drop it", name)
	}
	require.Equal(t, before, rs.raw(t, "stale"), "the record is neither deleted nor rewritten")
	require.NoError(t, rs.k1.StoreTokens(ctx, "fresh", "demo", valid))
	_, err = rs.k1.GetValidAccessToken(ctx, "fresh", "demo") // MemoryKV keeps what k1 opened beside the value
	require.NoError(t, err)
	_, err = rs.k2.GetValidAccessToken(ctx, "fresh", "demo")
	require.ErrorIs(t, err, oauthflow.ErrUnknownKey, "what another ring opened is not handed to a ring without its key")
	require.EqualValues(t, 1, rs.p.refreshes.Load(), "only the first refresh reached the provider")
	tok, err = rs.k21.GetValidAccessToken(ctx, "stale", "demo")
	require.NoError(t, err, "with k1 back in the ring it reads again")
	require.Equal(t, "access-2", tok)
}

// A sealed record copied under another user's key does not open there: its
// name is bound into it.
func TestSealedRecordMovedToAnotherKeyDoesNotOpen(t *testing.T) {
	t.Parallel()
	rs := newRotationStores(t, oauthflow.NewMemoryKV())
	ctx := context.Background()
	require.NoError(t, rs.k1.StoreTokens(ctx, "victim", "demo", oauthflow.StoredTokens{AccessToken: "victims-token", Scope: "read"}))
	require.NoError(t, rs.kv.Set(ctx, "oauth:mallory:demo", []byte(rs.raw(t, "victim")), 0))
	_, err := rs.k1.GetValidAccessToken(ctx, "mallory", "demo")
	require.ErrorIs(t, err, oauthflow.ErrCorruptRecord)
	require.NotContains(t, err.Error(), "victims-token")
}

// A sign-in registered under one key is consumed by an instance whose ring
// holds it; one whose ring lacks it reports the key ID and puts the sign-in
// back, for an instance that has the key. Plain sessions stay readable.
func TestEncryptedSessions(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			kv := b.new(t)
			ctx := context.Background()
			k1, k2 := newKey(t, "k1"), newKey(t, "k2")
			svc := func(spec ...string) *oauthflow.SessionService {
				var ring *oauthflow.KeyRing
				if len(spec) > 0 {
					ring = keyRing(t, spec...)
				}
				return oauthflow.NewSealedSessionService(kv, ring)
			}
			s := oauthflow.Session{UserID: "alice", Provider: "demo", CodeVerifier: "the-verifier-of-alice"}
			state, plainState := strings.Repeat("a", 43), strings.Repeat("b", 43)
			require.NoError(t, svc(k1).Register(ctx, state, s))
			raw, err := kv.Get(ctx, "oauth:session:"+state)
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(string(raw), "enc2:k1:"))
			require.NotContains(t, string(raw), s.CodeVerifier)

			_, err = svc(k2).Consume(ctx, state)
			require.ErrorIs(t, err, oauthflow.ErrUnknownKey)
			require.ErrorContains(t, err, `"k1"`)
			got, err := svc(k2, k1).Consume(ctx, state)
			require.NoError(t, err, "the sign-in was put back for an instance with the key")
			require.Equal(t, s.CodeVerifier, got.CodeVerifier)
			_, err = svc(k2, k1).Consume(ctx, state)
			require.ErrorIs(t, err, oauthflow.ErrSessionNotFound, "and is still single-use")

			require.NoError(t, svc().Register(ctx, plainState, s))
			got, err = svc(k2).Consume(ctx, plainState)
			require.NoError(t, err, "a plain sign-in stays readable")
			require.Equal(t, s.CodeVerifier, got.CodeVerifier)
		})
	}
}

// Reading a valid sealed token from Redis is still one round trip.
func TestEncryptedHotReadIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	c, real := redistest.Any(t)
	hook := &tripHook{}
	c.AddHook(hook)
	var kv oauthflow.KV = oauthflow.NewRedisKV(c)
	if real {
		kv = oauthflow.WithKeyPrefix(kv, redistest.Prefix(t, c))
	}
	s := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithEncryption(keyRing(t, newKey(t, "k1"))))
	ctx := context.Background()
	require.NoError(t, s.StoreTokens(ctx, "alice", "demo", oauthflow.StoredTokens{AccessToken: "at-1", Scope: "read"}))
	n := hook.n.Load()
	tok, err := s.GetValidAccessToken(ctx, "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, "at-1", tok)
	require.Equal(t, []string{"get"}, hook.since(n))
}

// Key rings refuse what would seal badly, and their errors never print a key.
func TestParseKeyRing(t *testing.T) {
	t.Parallel()
	good := newKey(t, "k1")
	secret := strings.SplitN(good, ":", 2)[1]
	for _, tc := range []struct{ spec, want string }{
		{"", "kid:base64key"},
		{"k1", "kid:base64key"},
		{"k1:" + base64.StdEncoding.EncodeToString(make([]byte, 16)), "16 bytes, want 32"},
		{"k1:not*base64", "not base64"},
		{"bad id:" + secret, "encryption key ID"},
		{good + "," + good, "given twice"},
		{"k2:" + secret + ",:" + secret, "encryption key ID"},
	} {
		_, err := oauthflow.ParseKeyRing(tc.spec)
		require.ErrorIs(t, err, oauthflow.ErrInvalidArgument, tc.spec)
		require.ErrorContains(t, err, tc.want, tc.spec)
		require.NotContains(t, err.Error(), secret)
	}
	r, err := oauthflow.ParseKeyRing(" k2:" + base64.RawURLEncoding.EncodeToString(make([]byte, 32)) + " , " + good)
	require.NoError(t, err, "URL-safe and unpadded base64, spaces around items")
	require.Equal(t, "k2", oauthflow.CurrentKeyID(r))
}

// New reads its ring from OAUTHFLOW_ENCRYPTION_KEYS and refuses a bad one.
func TestModuleKeyRingFromEnv(t *testing.T) {
	t.Setenv("OAUTHFLOW_ENCRYPTION_KEYS", "k1:short")
	_, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV()})
	require.ErrorContains(t, err, "OAUTHFLOW_ENCRYPTION_KEYS")
	t.Setenv("OAUTHFLOW_ENCRYPTION_KEYS", newKey(t, "envkey"))
	kv := oauthflow.NewMemoryKV()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	require.NoError(t, m.Tokens.StoreTokens(context.Background(), "alice", "demo", oauthflow.StoredTokens{AccessToken: "at", Scope: "read"}))
	raw, err := kv.Get(context.Background(), "oauth:alice:demo")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "enc2:envkey:"))
}

// Reencrypt seals every token record and pending sign-in under the current
// key, from plain and from older keys, keeps their TTLs, leaves records under
// unknown keys and other kinds of records alone, and resumes from its cursor.
func TestReencrypt(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testReencrypt(t, b.new(t))
		})
	}
}

// A record in its last millisecond keeps an expiry when Reencrypt rewrites
// it, whether it sends a batch in two round trips (its compare-and-swap keeps
// the time to live) or goes one record at a time: Redis answers PTTL 0 for a
// key whose expiry is now (its ttl is clamped to 0, not -1), which RedisKV.TTL
// read as "no expiry", and the re-seal was written without PX, for ever.
// miniredis answers 0 for a key with 500 µs left.
func TestReencryptKeepsAnExpiryInTheLastMillisecond(t *testing.T) {
	t.Parallel()
	for name, wrap := range map[string]func(*oauthflow.RedisKV, redis.UniversalClient) oauthflow.KV{
		"batched": func(kv *oauthflow.RedisKV, _ redis.UniversalClient) oauthflow.KV { return kv },
		"one by one": func(kv *oauthflow.RedisKV, c redis.UniversalClient) oauthflow.KV {
			return unbatched{kv, kvpkg.NewRedis(c)}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			mr, c := redistest.Mini(t)
			kv := oauthflow.NewRedisKV(c)
			store := oauthflow.NewTokenStore(kv, oauthflow.NewRegistry(), oauthflow.WithLogger(slog.New(slog.DiscardHandler)))
			require.NoError(t, store.StoreTokens(ctx, "alice", "demo",
				oauthflow.StoredTokens{AccessToken: "at", ExpiresAt: time.Now().Add(time.Hour).UnixMilli()}))
			const key = "oauth:alice:demo"
			require.True(t, mr.Exists(key))
			mr.SetTTL(key, 500*time.Microsecond)
			left, err := kv.TTL(ctx, key)
			require.NoError(t, err)
			require.Positive(t, left, "a key that expires has time left, not none")

			p, err := oauthflow.Reencrypt(ctx, wrap(kv, c), keyRing(t, newKey(t, "k1")), oauthflow.ReencryptOptions{})
			require.NoError(t, err)
			require.Equal(t, 1, p.Rewritten)
			require.Positive(t, mr.TTL(key), "the re-sealed record keeps an expiry")
		})
	}
}

// unbatched is a KV that sends no batch in one round trip (as an app's own
// KV, or a Redis Cluster), but walks its keys as Redis does.
type unbatched struct {
	oauthflow.KV
	scan kvpkg.Scanner
}

func (u unbatched) ScanPrefix(ctx context.Context, prefix, cursor string, count int) ([]string, string, error) {
	return u.scan.ScanPrefix(ctx, prefix, cursor, count)
}

func testReencrypt(t *testing.T, kv oauthflow.KV) {
	ctx := context.Background()
	k1, k2, k9 := newKey(t, "k1"), newKey(t, "k2"), newKey(t, "k9")
	reg := oauthflow.NewRegistry()
	store := func(spec ...string) *oauthflow.TokenStore {
		var ring *oauthflow.KeyRing
		if len(spec) > 0 {
			ring = keyRing(t, spec...)
		}
		return oauthflow.NewTokenStore(kv, reg, oauthflow.WithEncryption(ring))
	}
	expiry := time.Now().Add(time.Hour).UnixMilli()
	tokens := func(i int) oauthflow.StoredTokens {
		return oauthflow.StoredTokens{AccessToken: fmt.Sprintf("at-%d", i), ExpiresAt: expiry, Scope: "read"}
	}
	users := map[string]*oauthflow.TokenStore{}
	for i := range 12 { // plain, under k1, under k2 already; one user ID that is escaped in keys
		s := []*oauthflow.TokenStore{store(), store(k1), store(k2)}[i%3]
		user := fmt.Sprintf("user-%d", i)
		if i == 11 {
			user = "session:looks-like-a-kind"
		}
		require.NoError(t, s.StoreTokens(ctx, user, "demo", tokens(i)))
		users[user] = s
	}
	require.NoError(t, store(k9).StoreTokens(ctx, "unknown", "demo", tokens(99)))
	sessions := oauthflow.NewSealedSessionService(kv, keyRing(t, k1))
	state := strings.Repeat("s", 43)
	require.NoError(t, sessions.Register(ctx, state, oauthflow.Session{UserID: "alice", Provider: "demo", CodeVerifier: "v"}))
	require.NoError(t, kv.Set(ctx, "oauth:run:r1", []byte(`{"plain":"run"}`), 0))
	require.NoError(t, kv.Set(ctx, "oauth:lock:user-1:demo", []byte("owner"), time.Minute))
	require.NoError(t, kv.Set(ctx, "other:key", []byte("not ours"), 0))
	unknownBefore, err := kv.Get(ctx, "oauth:unknown:demo")
	require.NoError(t, err)

	ring := keyRing(t, k2, k1)
	cctx, cancel := context.WithCancel(ctx)
	var first *oauthflow.ReencryptProgress
	p, err := oauthflow.Reencrypt(cctx, kv, ring, oauthflow.ReencryptOptions{Batch: 4, Progress: func(q oauthflow.ReencryptProgress) {
		if first == nil {
			first = &q
			cancel()
		}
	}})
	rewritten := 0
	if first.Cursor != "" { // miniredis answers SCAN with every key at once
		rewritten = first.Rewritten
		require.ErrorIs(t, err, context.Canceled, "the walk stops with its context")
		require.Equal(t, *first, p, "and says where to resume")
		var last oauthflow.ReencryptProgress
		p, err = oauthflow.Reencrypt(ctx, kv, ring, oauthflow.ReencryptOptions{Cursor: p.Cursor, Batch: 4,
			Progress: func(q oauthflow.ReencryptProgress) { last = q }})
		require.Equal(t, last, p, "the last progress is the result")
	}
	require.NoError(t, err)
	require.Empty(t, p.Cursor)
	require.Equal(t, 9, rewritten+p.Rewritten, "the plain records, those under k1 and the sign-in")
	// Once more from the start: everything is current, nothing is rewritten.
	again, err := oauthflow.Reencrypt(ctx, kv, ring, oauthflow.ReencryptOptions{})
	require.NoError(t, err)
	require.Zero(t, again.Rewritten)
	require.Equal(t, 13, again.Current, "12 token records and the sign-in")
	require.Equal(t, 1, again.Unknown)
	require.GreaterOrEqual(t, again.Scanned, 16, "every key under oauth:, the run and the lock included (and on Redis the connection indexes)")

	for user := range users {
		raw, err := kv.Get(ctx, "oauth:"+userSegment(user)+":demo")
		require.NoError(t, err, user)
		require.True(t, strings.HasPrefix(string(raw), "enc2:k2:"), "%s: %.20q", user, raw)
		ttl, err := kv.TTL(ctx, "oauth:"+userSegment(user)+":demo")
		require.NoError(t, err)
		require.Greater(t, ttl, 59*time.Minute, "%s keeps its time to live", user)
		require.LessOrEqual(t, ttl, time.Hour+time.Second)
	}
	got, err := store(k2, k1).GetTokens(ctx, "user-0", "demo")
	require.NoError(t, err)
	require.Equal(t, tokens(0), *got)
	raw, err := kv.Get(ctx, "oauth:session:"+state)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "enc2:k2:"))
	s, err := oauthflow.NewSealedSessionService(kv, keyRing(t, k2)).Consume(ctx, state)
	require.NoError(t, err)
	require.Equal(t, "v", s.CodeVerifier)
	for key, want := range map[string]string{"oauth:run:r1": `{"plain":"run"}`, "oauth:lock:user-1:demo": "owner",
		"other:key": "not ours", "oauth:unknown:demo": string(unknownBefore)} {
		raw, err := kv.Get(ctx, key)
		require.NoError(t, err)
		require.Equal(t, want, string(raw), "%s is left alone", key)
	}
}

// A record sealed in the text form (enc1, as every record was before the raw
// form) still opens, and Reencrypt rewrites it to the raw form even when it
// is under the current key already, keeping its time to live.
func TestReencryptRewritesTheTextForm(t *testing.T) {
	t.Parallel()
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			testReencryptRewritesTheTextForm(t, b.new(t))
		})
	}
}

func testReencryptRewritesTheTextForm(t *testing.T, kv oauthflow.KV) {
	ctx := context.Background()
	k1 := newKey(t, "k1")
	ring, reg := keyRing(t, k1), oauthflow.NewRegistry()
	tokens := oauthflow.StoredTokens{AccessToken: "at-text", RefreshToken: "rt-text", ExpiresAt: time.Now().Add(time.Hour).UnixMilli(), Scope: "read"}
	const key = "oauth:alice:demo"
	require.NoError(t, oauthflow.NewTokenStore(kv, reg).StoreTokens(ctx, "alice", "demo", tokens))
	plain, err := kv.Get(ctx, key)
	require.NoError(t, err)
	require.NoError(t, kv.Set(ctx, key, sealText(t, k1, plain, key), time.Hour))

	got, err := oauthflow.NewTokenStore(kv, reg, oauthflow.WithEncryption(ring)).GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, tokens, *got, "the text form opens")
	p, err := oauthflow.Reencrypt(ctx, kv, ring, oauthflow.ReencryptOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, p.Rewritten, "a record in the text form under the current key is rewritten: %+v", p)
	raw, err := kv.Get(ctx, key)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "enc2:k1:"), "%.20q", raw)
	ttl, err := kv.TTL(ctx, key)
	require.NoError(t, err)
	require.Greater(t, ttl, 59*time.Minute, "the rewrite keeps the time to live")
	got, err = oauthflow.NewTokenStore(kv, reg, oauthflow.WithEncryption(ring)).GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, tokens, *got)
	again, err := oauthflow.Reencrypt(ctx, kv, ring, oauthflow.ReencryptOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, again.Current, "the raw form under the current key is current: %+v", again)
}

// sealText seals plain as the documented text form does, by hand:
// "enc1:{keyID}:{base64url(nonce ‖ ciphertext ‖ tag)}", bound to name; spec
// is the key as newKey gives it.
func sealText(t *testing.T, spec string, plain []byte, name string) []byte {
	t.Helper()
	id, b64, _ := strings.Cut(spec, ":")
	key, err := base64.StdEncoding.DecodeString(b64)
	require.NoError(t, err)
	block, err := aes.NewCipher(key)
	require.NoError(t, err)
	aead, err := cipher.NewGCM(block)
	require.NoError(t, err)
	raw := make([]byte, aead.NonceSize())
	_, _ = rand.Read(raw)
	raw = aead.Seal(raw, raw, plain, []byte(name))
	return []byte("enc1:" + id + ":" + base64.RawURLEncoding.EncodeToString(raw))
}

// userSegment is a user ID as token keys hold it (see the package's keyspace).
func userSegment(user string) string {
	if strings.HasPrefix(user, "session:") {
		return "~" + base64.RawURLEncoding.EncodeToString([]byte(user))
	}
	return user
}

// A refresh whose rotated token could not be written (the store was down) is
// kept in this process; a re-encryption of the record meanwhile changes its
// bytes but not its tokens, so the kept write still lands, and the spent
// refresh token is never used again.
func TestReencryptKeepsARotatedTokenNotYetWritten(t *testing.T) {
	t.Parallel()
	k1, k2 := newKey(t, "k1"), newKey(t, "k2")
	onEveryBackend(t, withFaults, func(t *testing.T, f *storeFixture) {
		kv := f.kv.(*faultKV)
		f.prov.setRefresh(newRotating("rt-1").answer)
		kv.down.Store(true)
		tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
		require.NoError(t, err)
		require.Equal(t, "access-1", tok)
		waitEvent(t, f, oauthflow.EventRefreshUnsaved)
		kv.down.Store(false)

		p, err := oauthflow.Reencrypt(ctx, kv.KV, keyRing(t, k2, k1), oauthflow.ReencryptOptions{})
		require.NoError(t, err)
		require.Equal(t, 1, p.Rewritten, "the record that still holds rt-1 is sealed anew")

		keptTokensWritten(t, f)
	}, oauthflow.WithRefreshTimeout(300*time.Millisecond), oauthflow.WithEncryption(keyRing(t, k1, k2)))
}

// resealMidRetryKV fails the first write of a token record (a store blip),
// and re-encrypts the store just before the second, so that the refresh's
// retried compare-and-swap meets the record sealed anew.
type resealMidRetryKV struct {
	oauthflow.KV
	ring     *oauthflow.KeyRing
	attempts atomic.Int64
	resealed chan oauthflow.ReencryptProgress
	retried  chan struct{}
	down     atomic.Bool // when set, every swap after the re-seal fails too
}

func (r *resealMidRetryKV) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	switch r.attempts.Add(1) {
	case 1:
		return false, errBlip
	case 2:
		p, err := oauthflow.Reencrypt(ctx, r.KV, r.ring, oauthflow.ReencryptOptions{})
		if err != nil {
			return false, err // the test then waits for resealed in vain and says so
		}
		r.resealed <- p
		defer close(r.retried)
	default:
		if r.down.Load() {
			return false, errBlip
		}
	}
	return r.KV.CompareAndSwap(ctx, key, old, v, ttl)
}

// The same, when the store then stays down until the refresh gives up: the
// swap that met the re-sealed record is not the end of the write, and the
// rotated tokens it kept are all that is left of rt-2, for the next read.
func TestReencryptDuringARefreshRetryThenAnOutage(t *testing.T) {
	t.Parallel()
	k1, k2 := newKey(t, "k1"), newKey(t, "k2")
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			kv := &resealMidRetryKV{KV: b.new(t), ring: keyRing(t, k2, k1), resealed: make(chan oauthflow.ReencryptProgress, 1),
				retried: make(chan struct{})}
			kv.down.Store(true)
			f := newStoreFixture(t, kv, oauthflow.WithEncryption(keyRing(t, k1, k2)), oauthflow.WithRefreshTimeout(300*time.Millisecond))
			staleRecord(t, f, "u", "rt-1")
			f.prov.setRefresh(newRotating("rt-1").answer)
			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			require.NoError(t, err)
			require.Equal(t, "access-1", tok)
			within(t, kv.resealed, "the re-encryption before the retried write")
			waitEvent(t, f, oauthflow.EventRefreshUnsaved) // the refresh gave up; rt-2 is kept in the process
			kv.down.Store(false)

			keptTokensWritten(t, f)
		})
	}
}

// The same, when the re-encryption lands while the refresh still retries its
// write: the retry finds the record changed, and the rotated tokens must
// outlive that, for the next read to write them.
func TestReencryptDuringARefreshRetry(t *testing.T) {
	t.Parallel()
	k1, k2 := newKey(t, "k1"), newKey(t, "k2")
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			kv := &resealMidRetryKV{KV: b.new(t), ring: keyRing(t, k2, k1), resealed: make(chan oauthflow.ReencryptProgress, 1),
				retried: make(chan struct{})}
			f := newStoreFixture(t, kv, oauthflow.WithEncryption(keyRing(t, k1, k2)))
			staleRecord(t, f, "u", "rt-1")
			f.prov.setRefresh(newRotating("rt-1").answer)
			tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
			require.NoError(t, err)
			require.Equal(t, "access-1", tok)
			require.Equal(t, 1, within(t, kv.resealed, "the re-encryption before the retried write").Rewritten)
			within(t, kv.retried, "the retried write")

			keptTokensWritten(t, f)
		})
	}
}

// keptTokensWritten checks that the next read writes and hands out the
// tokens a refresh of rt-1 kept unwritten, without sending rt-1 again.
func keptTokensWritten(t *testing.T, f *storeFixture) {
	t.Helper()
	tok, err := f.store.GetValidAccessToken(ctx, "u", "acme")
	require.NoError(t, err)
	require.Equal(t, "access-1", tok, "the kept tokens are written and handed out")
	got, err := f.store.GetTokens(ctx, "u", "acme")
	require.NoError(t, err)
	require.Equal(t, "rt-2", got.RefreshToken)
	require.EqualValues(t, 1, f.prov.refreshes.Load(), "the spent rt-1 was not sent again")
}

// A zero KeyRing cannot seal: New refuses it, and so do the options and
// Reencrypt, rather than store records plain or fail at the first write.
func TestZeroKeyRingIsRefused(t *testing.T) {
	t.Parallel()
	_, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Encryption: &oauthflow.KeyRing{}})
	require.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
	require.Panics(t, func() { oauthflow.WithEncryption(&oauthflow.KeyRing{}) })
	require.Panics(t, func() { oauthflow.NewSealedSessionService(oauthflow.NewMemoryKV(), &oauthflow.KeyRing{}) })
	_, err = oauthflow.Reencrypt(context.Background(), oauthflow.NewMemoryKV(), &oauthflow.KeyRing{}, oauthflow.ReencryptOptions{})
	require.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
}

// A walk meets records of every length: one shorter than the sealed mark is
// a plain record like any other and is sealed as it is, never a panic.
func TestReencryptSealsAShortRecord(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	require.NoError(t, kv.Set(context.Background(), "oauth:alice:github", []byte("{}"), 0))
	p, err := oauthflow.Reencrypt(context.Background(), kv, keyRing(t, newKey(t, "k1")), oauthflow.ReencryptOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, p.Rewritten)
	b, err := kv.Get(context.Background(), "oauth:alice:github")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(b), "enc2:k1:"), "%s", b)
}
