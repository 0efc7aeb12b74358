package mcpauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// signInRefusalHearer is what the module tells of a sign-in the
// authorization page refused.
type signInRefusalHearer interface {
	SignInRefused(ctx context.Context, e *oauthflow.ProviderError)
}

// refusalCheckKeyOf is the key that paces the token endpoint checks of
// refusals claimed for issuer's client.
func refusalCheckKeyOf(issuer string) string {
	sum := sha256.Sum256([]byte(issuer))
	return "oauth:mcp:refusalcheck:" + hex.EncodeToString(sum[:16])
}

// A sign-in refused at the authorization page for the client heals the
// dynamic registration only when the token endpoint confirms that the
// server refuses the client: the next sign-in then uses a new client, on
// this instance and (from the store) on another. A refusal that is the
// user's (access_denied) is not checked; one the server does not confirm
// (it still knows the client) leaves the registration alone.
func TestSignInRefusedAtAuthorizePageReregisters(t *testing.T) {
	t.Parallel()
	f, kv, a, b, id := twoInstances(t)
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
	if n, checks := f.registrations.Load(), f.refreshes.Load(); n != 1 || checks != 0 {
		t.Fatalf("%d registrations and %d checks at the token endpoint after access_denied, want 1 and 0", n, checks)
	}
	unknownClient := &oauthflow.ProviderError{ProviderID: id, Code: "invalid_request", Description: "Unknown client_id"}
	hearer.SignInRefused(ctx, unknownClient)
	if n, checks := f.registrations.Load(), f.refreshes.Load(); n != 1 || checks != 1 {
		t.Fatalf("%d registrations and %d checks after a refusal the server does not confirm, want 1 and 1", n, checks)
	}

	f.revokeClient(first)
	if err := kv.Del(ctx, refusalCheckKeyOf(f.srv.URL)); err != nil { // the interval passed
		t.Fatal(err)
	}
	hearer.SignInRefused(ctx, unknownClient)
	if n := f.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations after the server refused the client, want 2", n)
	}
	signIn(t, a, "carol", id)
	if now := f.lastClientID(); now == first {
		t.Fatalf("the sign-in after the refusal used the refused client %s", first)
	}
	// b still holds the refused client: its next token request heals from the store
	if status := trySignIn(t, b, "dave", id); status == 200 {
		t.Fatal("instance b's sign-in with the refused client completed")
	}
	signIn(t, b, "dave", id)
	if n := f.registrations.Load(); n != 2 {
		t.Errorf("%d registrations, want 2: instance b takes the new client from the store", n)
	}
}
