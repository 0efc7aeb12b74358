package mcpauth_test

import (
	"context"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// signInRefusalHearer is what the module tells of a sign-in the
// authorization page refused.
type signInRefusalHearer interface {
	SignInRefused(ctx context.Context, e *oauthflow.ProviderError)
}

// A sign-in refused at the authorization page for the client heals the
// dynamic registration: the next sign-in uses a new client, on this
// instance and (from the store) on another. A refusal that is the user's
// (access_denied) leaves the registration alone.
func TestSignInRefusedAtAuthorizePageReregisters(t *testing.T) {
	t.Parallel()
	f, _, a, b, id := twoInstances(t)
	ctx := context.Background()
	signIn(t, a, "alice", id)
	signIn(t, b, "bob", id)
	first := f.lastClientID()
	p, err := a.mod.Registry.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	hearer, ok := p.(signInRefusalHearer)
	if !ok {
		t.Fatalf("the provider %T hears no refused sign-ins", p)
	}
	hearer.SignInRefused(ctx, &oauthflow.ProviderError{ProviderID: id, Code: "access_denied"})
	if n := f.registrations.Load(); n != 1 {
		t.Fatalf("%d registrations after access_denied, want 1", n)
	}
	hearer.SignInRefused(ctx, &oauthflow.ProviderError{ProviderID: id, Code: "invalid_request",
		Description: "Unknown client_id"})
	if n := f.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations after the client was refused, want 2", n)
	}
	signIn(t, a, "carol", id)
	if now := f.lastClientID(); now == first {
		t.Fatalf("the sign-in after the refusal used the refused client %s", first)
	}
	f.revokeClient(first) // b still holds the refused client: its next token request heals from the store
	if status := trySignIn(t, b, "dave", id); status == 200 {
		t.Fatal("instance b's sign-in with the refused client completed")
	}
	signIn(t, b, "dave", id)
	if n := f.registrations.Load(); n != 2 {
		t.Errorf("%d registrations, want 2: instance b takes the new client from the store", n)
	}
}
