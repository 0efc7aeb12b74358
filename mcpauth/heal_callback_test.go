package mcpauth_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// The authorization server refuses the client at its authorization page
// and redirects to the callback with invalid_client: the callback's error
// reaches the provider, which registers anew, and the next sign-in uses the
// new client.
func TestCallbackErrorForTheClientReregisters(t *testing.T) {
	t.Parallel()
	f, _, in, _, id := twoInstances(t)
	signIn(t, in, "alice", id)
	first := f.lastClientID()
	claimRefusal(t, in, "bob", id)
	if n := f.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations after the authorization page refused the client, want 2", n)
	}
	signIn(t, in, "bob", id)
	if f.lastClientID() == first {
		t.Fatalf("the sign-in after the refusal used the refused client %s", first)
	}
}

// A refusal at the authorization page reaches us through the browser, so any
// user with a sign-in of their own can claim one. Each heal replaces the
// client every user's grant belongs to, so claims heal at most once per
// authorization server per interval: the second forged refusal right after
// the first registers nothing.
func TestForgedRefusalsHealOncePerInterval(t *testing.T) {
	t.Parallel()
	f, _, in, _, id := twoInstances(t)
	signIn(t, in, "alice", id)
	for range 3 {
		claimRefusal(t, in, "mallory", id)
	}
	if n := f.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations after three claimed refusals in a row, want 2 (one heal)", n)
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
