package oauthflow_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/require"
)

// A token type is Bearer ("") or DPoP with the key it is bound to: a record
// that names DPoP without a key could never be used, and any other type is
// not one the store can send.
func TestStoreTokensRefusesATokenTypeItCannotSend(t *testing.T) {
	ctx := context.Background()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("p")))
	s := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), reg)
	for _, tt := range []oauthflow.StoredTokens{
		{AccessToken: "a", TokenType: "DPoP"},
		{AccessToken: "a", TokenType: "mac", DPoPKey: "k"},
		{AccessToken: "a", TokenType: "dpop", DPoPKey: "k"},
	} {
		err := s.StoreTokens(ctx, "u", "p", tt)
		require.ErrorIs(t, err, oauthflow.ErrInvalidArgument, "%+v", tt)
	}
	_, err := s.GetTokens(ctx, "u", "p")
	require.ErrorIs(t, err, oauthflow.ErrNoToken, "nothing was stored")
}

// A provider's answer that says DPoP reaches StoreFromTokenSet only from a
// flow outside the library, which holds no key the token could be sent with.
func TestStoreFromTokenSetRefusesABoundToken(t *testing.T) {
	ctx := context.Background()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(newFakeProvider("p")))
	s := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), reg)
	err := s.StoreFromTokenSet(ctx, "u", "p", &oauthflow.TokenSet{AccessToken: "a", TokenType: "DPoP"})
	var pe *oauthflow.ProviderError
	require.True(t, errors.As(err, &pe), "got %v", err)
	_, err = s.GetTokens(ctx, "u", "p")
	require.ErrorIs(t, err, oauthflow.ErrNoToken)
}

// Outside a call the library makes for a bound grant, DPoPTransport adds
// nothing: a provider may wrap every token request's transport with it.
func TestDPoPTransportOutsideABoundCallIsItsBase(t *testing.T) {
	base := roundTripFunc(func(*http.Request) (*http.Response, error) { return nil, errors.New("base") })
	rt := oauthflow.DPoPTransport(context.Background(), base)
	_, err := rt.RoundTrip(&http.Request{})
	require.EqualError(t, err, "base")
	require.Equal(t, http.DefaultTransport, oauthflow.DPoPTransport(context.Background(), nil))
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// signInBound completes a sign-in of user started on replica 0 through the
// callback of replica i, and returns the authorization URL it went through.
func (env *flowEnv) signInBound(user string, i int) *url.URL {
	env.t.Helper()
	_, doc := env.startSignIn(0, user)
	authURL, err := url.Parse(doc.AuthURL)
	require.NoError(env.t, err)
	status, body, _ := get(env.t, env.consent(setParam(doc.AuthURL, "login_hint", user), i))
	require.Equal(env.t, http.StatusOK, status, body)
	return authURL
}

// callAPI calls the authorization server's demo API as user through replica
// i's Tokens.Client and returns the status.
func (env *flowEnv) callAPI(user string, i int) int {
	env.t.Helper()
	resp, err := env.mod(i).Tokens.Client(context.Background(), user, "demo").Get(env.as.APIURL())
	require.NoError(env.t, err)
	_ = resp.Body.Close()
	return resp.StatusCode
}

// A provider marked DPoP binds the sign-in's grant to a key: the authorization
// request names the key (dpop_jkt), the exchange proves it, the token is
// stored as DPoP with the key sealed in the record, and either instance
// sharing the store sends it with a proof. Sent as a Bearer token, without
// the key, the API refuses it.
func TestDPoPBindsASignInToAKeyEveryInstanceHolds(t *testing.T) {
	ring := keyRing(t, newKey(t, "k1"))
	env := newFlowEnv(t, envOptions{replicas: 2, dpop: true, as: authserver.Options{DPoP: true},
		config: func(c *oauthflow.Config) { c.Encryption = ring }})
	ctx := context.Background()

	authURL := env.signInBound("alice", 1)
	require.NotEmpty(t, authURL.Query().Get("dpop_jkt"), "the authorization request names the key")
	stored, err := env.mod(0).Tokens.GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	require.Equal(t, "DPoP", stored.TokenType)
	require.NotEmpty(t, stored.DPoPKey)
	raw, err := env.kv.Get(ctx, "oauth:alice:demo")
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(raw), "enc2:k1:"), "the record is sealed")
	require.NotContains(t, string(raw), stored.DPoPKey, "the key is not in the store in the clear")

	for i := range 2 {
		require.Equal(t, http.StatusOK, env.callAPI("alice", i), "replica %d sends the bound token with a proof", i)
	}
	st := env.as.Stats()
	require.EqualValues(t, 3, st.DPoPProofsAccepted, "the exchange and two API calls proved the key")
	require.Zero(t, st.DPoPKeyMismatches+st.DPoPProofsInvalid+st.DPoPProofsMissing)

	req, err := http.NewRequest(http.MethodGet, env.as.APIURL(), nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+stored.AccessToken)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "the bound token without its key is refused")
	require.Contains(t, resp.Header.Get("WWW-Authenticate"), "DPoP")
}

// An expired bound token read at once by many callers on two instances is
// refreshed by one provider call, which proves the grant's key; the grant
// keeps its key, and the new token is bound to it.
func TestDPoPRefreshStormMakesOneProviderCall(t *testing.T) {
	clock := fakeclock.New(time.Now())
	env := newFlowEnv(t, envOptions{replicas: 2, dpop: true, as: authserver.Options{DPoP: true},
		config: func(c *oauthflow.Config) { c.Now = clock.Now }})
	ctx := context.Background()
	env.signInBound("alice", 0)
	before, err := env.mod(0).Tokens.GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	clock.Advance(2 * time.Hour) // past the token's hour, for the store

	const callers = 16
	var wg sync.WaitGroup
	errs := make(chan error, callers)
	for n := range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := env.mod(n%2).Tokens.GetValidAccessToken(ctx, "alice", "demo")
			errs <- err
		}()
	}
	waitfor.Group(t, &wg, "the readers of the expired token")
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st := env.as.Stats()
	require.EqualValues(t, 1, st.RefreshRequests, "one refresh between every caller and both instances")
	require.EqualValues(t, 1, st.Refreshes, "the refresh proved the key the grant is bound to")
	after, err := env.mod(1).Tokens.GetTokens(ctx, "alice", "demo")
	require.NoError(t, err)
	require.NotEqual(t, before.AccessToken, after.AccessToken)
	require.Equal(t, "DPoP", after.TokenType)
	require.Equal(t, before.DPoPKey, after.DPoPKey, "a refresh keeps the grant's key")
	require.Equal(t, http.StatusOK, env.callAPI("alice", 1))
}

// A server that demands nonces gets one retry per challenge: the exchange's
// first proof is challenged and retried with the nonce; the store then
// remembers the server's nonce, so the API call needs no retry until the
// server rotates it, and then exactly one.
func TestDPoPNonceChallengesGetOneRetryEach(t *testing.T) {
	env := newFlowEnv(t, envOptions{dpop: true, as: authserver.Options{DPoPNonces: true}})
	env.signInBound("alice", 0)
	require.EqualValues(t, 1, env.as.Stats().DPoPNonceChallenges, "the exchange was challenged once")

	require.Equal(t, http.StatusOK, env.callAPI("alice", 0))
	require.EqualValues(t, 1, env.as.Stats().DPoPNonceChallenges, "the nonce the token endpoint gave is remembered for its origin")
	env.as.RotateDPoPNonce()
	require.Equal(t, http.StatusOK, env.callAPI("alice", 0))
	require.Equal(t, http.StatusOK, env.callAPI("alice", 0))
	st := env.as.Stats()
	require.EqualValues(t, 2, st.DPoPNonceChallenges, "one challenge after the rotation, none after")
	require.Zero(t, st.DPoPProofsInvalid+st.DPoPProofsReplayed, "the retry's proof is a fresh one")
}

// A bound token and its proof go only to the origin the caller asked: a
// redirect to another origin is followed without either.
func TestDPoPProofDoesNotFollowARedirectElsewhere(t *testing.T) {
	env := newFlowEnv(t, envOptions{dpop: true, as: authserver.Options{DPoP: true}})
	env.signInBound("alice", 0)
	seen := make(chan http.Header, 1)
	elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
	}))
	t.Cleanup(elsewhere.Close)
	origin := httptest.NewServer(http.RedirectHandler(elsewhere.URL+"/landing", http.StatusFound))
	t.Cleanup(origin.Close)

	resp, err := env.mod(0).Tokens.Client(context.Background(), "alice", "demo").Get(origin.URL)
	require.NoError(t, err)
	_ = resp.Body.Close()
	h := waitfor.Recv(t, seen, "the request at the other origin")
	require.Empty(t, h.Get("Authorization"))
	require.Empty(t, h.Get("DPoP"))
}
