package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/dpop"
)

// apiToken is the access token the client figures send.
const apiToken = "gho_16C7e42F292c6912E7710c838347Ae178B4a"

// clientRequests: a GET through Tokens.Client to a local API that answers 200
// at once, with a DPoP-bound token beside a Bearer one. Both come from one
// memory store, so the token's read is free and the difference is what a
// bound request adds: a fresh proof signed with the grant's key, its header,
// and the nonce map's lookup. Each op is a loopback round trip, which swings
// as a Redis one does, so the two alternate in blocks (see alternating), with
// blocks of Key.Proof alone between them, to set the difference beside.
func clientRequests(e *env) (*table, error) {
	t := &table{title: "Calling an API as the user (Tokens.Client)"}
	api := httptest.NewServer(http.HandlerFunc(apiEndpoint))
	defer api.Close()
	bearer, bound, key, err := clientPair(e)
	if err != nil {
		return t, err
	}
	bearerGet := func() error { return apiGet(bearer, api.URL+"/bearer") }
	boundGet := func() error { return apiGet(bound, api.URL+"/dpop") }
	proofAlone := func() error {
		_, err := key.Proof(http.MethodGet, api.URL+"/dpop", time.Now(), apiToken, "")
		return err
	}
	s, err := interleaved(e.opts.rounds, 1, e.opts.blocks, bearerGet, boundGet, proofAlone)
	if err != nil {
		return t, err
	}
	lim, ours, proof := s[0], s[1], s[2]
	cost := make(sample, len(ours))
	for i := range ours {
		cost[i] = ours[i] - lim[i]
	}
	limAllocs, ourAllocs := allocsPerGet(bearerGet), allocsPerGet(boundGet)
	t.rows = []row{
		{figure: "Client request, DPoP-bound", value: ours.format(" ns/op", 0) + ", " + ourAllocs, limit: "Client request, Bearer",
			limitValue: lim.format(" ns/op", 0) + ", " + limAllocs, ratio: ratios(ours, lim), target: "reported"},
		{figure: "Client request, DPoP-bound: what the proof adds", value: cost.scaled(1e-3).format(" µs", 1), limit: "Key.Proof alone (ES256)",
			limitValue: proof.scaled(1e-3).format(" µs", 1), ratio: ratios(cost, proof), target: "reported"},
	}
	t.prose = fmt.Sprintf("A GET from 1 goroutine over keep-alive on loopback, to an API in this process that answers 200 at once and verifies nothing; "+
		"%d blocks of 250 per round, the two requests and Key.Proof alone interleaved; allocations count both ends.", e.opts.blocks)
	return t, nil
}

// clientPair is a Client for a user with a Bearer token and one for a user
// with a DPoP-bound token, on one memory store, and the bound token's key.
func clientPair(e *env) (bearer, bound *http.Client, key *dpop.Key, err error) {
	ctx := context.Background()
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), oauthflow.NewRegistry(), oauthflow.WithLogger(e.log))
	key, enc, err := newBoundKey()
	if err != nil {
		return nil, nil, nil, err
	}
	tokens := oauthflow.StoredTokens{AccessToken: apiToken, RefreshToken: "ghr_x", ExpiresAt: 4102444800000}
	if err := store.StoreTokens(ctx, userID, provID, tokens); err != nil {
		return nil, nil, nil, err
	}
	tokens.TokenType, tokens.DPoPKey = "DPoP", enc
	if err := store.StoreTokens(ctx, boundUserID, provID, tokens); err != nil {
		return nil, nil, nil, err
	}
	return store.Client(ctx, userID, provID), store.Client(ctx, boundUserID, provID), key, nil
}

// apiEndpoint answers 200 to a request carrying the token as its path names
// it (/bearer: "Bearer <token>"; /dpop: "DPoP <token>" and a proof), 401 to
// any other, so a request sent the wrong way fails the figure.
func apiEndpoint(w http.ResponseWriter, r *http.Request) {
	ok := r.URL.Path == "/bearer" && r.Header.Get("Authorization") == "Bearer "+apiToken ||
		r.URL.Path == "/dpop" && r.Header.Get("Authorization") == "DPoP "+apiToken && r.Header.Get("DPoP") != ""
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
	}
}

// apiGet GETs url and reads the answer to its end, so the connection is reused.
func apiGet(c *http.Client, url string) error {
	resp, err := c.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: the API answered %d", url, resp.StatusCode)
	}
	return nil
}

// allocsPerGet is the allocations of one get, both ends (the API runs in this
// process), as "N allocs/op". get's errors were seen by the timed runs.
func allocsPerGet(get func() error) string {
	n := testing.AllocsPerRun(200, func() { _ = get() })
	return fmt.Sprintf("%.0f allocs/op", n)
}

// newBoundKey is a fresh DPoP key and its encoding as a token record keeps it.
func newBoundKey() (*dpop.Key, string, error) {
	k, err := dpop.NewKey()
	if err != nil {
		return nil, "", err
	}
	b, err := k.MarshalBinary()
	if err != nil {
		return nil, "", err
	}
	return k, base64.RawURLEncoding.EncodeToString(b), nil
}

// boundRecord is record bound to the encoded key (DPoP), as the library
// stores a bound grant: the token type and the key follow the scope.
func boundRecord(key string) string {
	return strings.TrimSuffix(record, "}") + `,"tokenType":"DPoP","dpopKey":"` + key + `"}`
}
