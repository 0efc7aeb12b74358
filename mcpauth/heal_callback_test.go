package mcpauth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// The authorization server dropped the client and refuses it at its
// authorization page, redirecting to the callback with invalid_client: the
// callback's error reaches the provider, the token endpoint confirms the
// refusal, and the provider registers anew; the next sign-in uses the new
// client.
func TestCallbackErrorForTheClientReregisters(t *testing.T) {
	t.Parallel()
	f, _, in, _, id := twoInstances(t)
	signIn(t, in, "alice", id)
	first := f.lastClientID()
	f.revokeClient(first)
	claimRefusal(t, in, "bob", id)
	if n := f.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations after the server refused the client, want 2", n)
	}
	signIn(t, in, "bob", id)
	if f.lastClientID() == first {
		t.Fatalf("the sign-in after the refusal used the refused client %s", first)
	}
}

// A refusal at the authorization page reaches us through the browser, so any
// user with a sign-in of their own can claim one, as often as they like.
// Each claim the token endpoint is asked about costs the server a request
// for our client, so claims are checked at most once per authorization
// server per interval: three forged refusals in a row make one check, and
// (the server knowing the client) no registration.
func TestClaimedRefusalsAreCheckedOncePerInterval(t *testing.T) {
	t.Parallel()
	f, _, in, _, id := twoInstances(t)
	signIn(t, in, "alice", id)
	for range 3 {
		claimRefusal(t, in, "mallory", id)
	}
	if n, checks := f.registrations.Load(), f.refreshes.Load(); n != 1 || checks != 1 {
		t.Fatalf("%d registrations and %d checks at the token endpoint after three claimed refusals in a row, want 1 and 1", n, checks)
	}
}

// claimRefusal starts user's sign-in to id and brings its callback an
// invalid_client error, as the authorization page would, or as anyone
// holding the sign-in's link can.
func claimRefusal(t *testing.T, in *instance, user, id string) {
	t.Helper()
	_, doc, err := in.mod.StartSignIn(context.Background(), user, id)
	if err != nil {
		t.Fatal(err)
	}
	au, err := url.Parse(doc.AuthURL)
	if err != nil {
		t.Fatal(err)
	}
	refusal := url.Values{"state": {au.Query().Get("state")}, "error": {"invalid_client"}}
	resp, err := http.Get(in.api.URL + oauthflow.CallbackPath + "?" + refusal.Encode())
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
}

// A third user's forged refusal (an invalid_client error redirect to a
// sign-in of their own) ends no other user's grant: the server never
// refused the client, so alice's and bob's next refreshes, with the client
// their refresh tokens were issued to, still work at an honest server
// (which takes a refresh token only from its client), and their records
// are kept.
func TestForgedRefusalEndsNoOnesGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	as := newAuthServer(t, "as1")
	m := newMovingServer(t, as)
	in := newInstance(t, oauthflow.NewMemoryKV(), &http.Client{})
	id := connectAs(t, m, in, "alice")
	signIn(t, in, "alice", id)
	signIn(t, in, "bob", id)

	claimRefusal(t, in, "mallory", id)
	for _, user := range []string{"alice", "bob"} {
		before, err := in.mod.Tokens.GetTokens(ctx, user, id)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.mod.Tokens.GetValidAccessToken(ctx, user, id); err != nil {
			t.Fatalf("%s's refresh after mallory's forged refusal: %v", user, err)
		}
		after, err := in.mod.Tokens.GetTokens(ctx, user, id)
		if err != nil || after.RefreshToken == before.RefreshToken {
			t.Fatalf("%s's record after the refresh: %+v, %v; want it kept, with the rotated refresh token", user, after, err)
		}
	}
	if n := as.registrations.Load(); n != 1 {
		t.Errorf("%d registrations after a refusal the server never made, want 1", n)
	}
}

// The app's own client is never healed (its refusal is a configuration
// fault), so a refusal claimed for it is not checked at the token endpoint
// either: no request goes out with the app's credentials for it.
func TestClaimedRefusalOfTheAppsClientIsNotChecked(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	in := newInstanceWith(t, oauthflow.NewMemoryKV(), f.srv.Client(), map[string]mcpauth.Client{"*": {ID: "app-client", AuthMethod: "none"}})
	id, err := in.conn.Connect(context.Background(), f.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, in, "alice", id)
	claimRefusal(t, in, "mallory", id)
	if n, checks := f.registrations.Load(), f.refreshes.Load(); n != 0 || checks != 0 {
		t.Fatalf("%d registrations and %d checks at the token endpoint after a refusal claimed for the app's client, want none", n, checks)
	}
}
