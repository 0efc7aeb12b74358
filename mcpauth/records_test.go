package mcpauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// An MCP server's records expire when unused: the server record has a time
// to live from its connect; a URL no user signed in to leaves no name
// record; a sign-in writes one, and the registration lives as long.
func TestServerRecordsExpireWhenUnused(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	kv := oauthflow.NewMemoryKV()
	in := newInstance(t, kv, f.srv.Client())
	ctx := context.Background()
	id, err := in.conn.Connect(ctx, f.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	ttl := func(key string) time.Duration {
		t.Helper()
		d, err := kv.TTL(ctx, key)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		return d
	}
	if d := ttl("oauth:mcp:server:" + id); d <= 0 || d > 30*24*time.Hour {
		t.Fatalf("the server record lives %v, want a time to live of at most 30 days", d)
	}
	if _, err := kv.TTL(ctx, "oauth:mcp:url:"+id); !errors.Is(err, oauthflow.ErrNotFound) {
		t.Fatalf("a server no one signed in to has a name record (%v)", err)
	}
	signIn(t, in, "alice", id)
	if d := ttl("oauth:mcp:url:" + id); d <= 0 || d > 400*24*time.Hour {
		t.Fatalf("the name record lives %v, want a time to live", d)
	}
	// Healing a refused registration discovers the server again: the record
	// it writes has a time to live too.
	p, err := in.mod.Registry.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	f.revokeClient(f.lastClientID())
	p.(signInRefusalHearer).SignInRefused(ctx, &oauthflow.ProviderError{ProviderID: id, Code: "invalid_client"})
	if n := f.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations, want 2", n)
	}
	if d := ttl("oauth:mcp:server:" + id); d <= 0 || d > 30*24*time.Hour {
		t.Fatalf("the rediscovered server record lives %v, want a time to live of at most 30 days", d)
	}
	if d := ttl(registrationKeyOf(f.srv.URL)); d <= 0 || d > 400*24*time.Hour {
		t.Fatalf("the registration lives %v, want a time to live", d)
	}
}

// registrationKeyOf is the key of the dynamic registration at issuer.
func registrationKeyOf(issuer string) string {
	sum := sha256.Sum256([]byte(issuer))
	return "oauth:mcp:client:" + hex.EncodeToString(sum[:16])
}

// A server record gone while a user's tokens live is rebuilt: another
// instance's resolver discovers the server again from its name record, and
// sign-ins go on with the same registration. A server no one signed in to
// is forgotten with its record.
func TestServerRecordGoneIsRediscovered(t *testing.T) {
	t.Parallel()
	f, kv, a, b, id := twoInstances(t)
	ctx := context.Background()
	other, err := a.conn.Connect(ctx, f.srv.URL+"/mcp/other", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, a, "alice", id)
	for _, gone := range []string{id, other} {
		if err := kv.Del(ctx, "oauth:mcp:server:"+gone); err != nil { // expired
			t.Fatal(err)
		}
	}
	if _, err := b.mod.Registry.Get(id); err != nil {
		t.Fatalf("the resolver did not rebuild a server whose user's tokens live: %v", err)
	}
	if _, err := kv.Get(ctx, "oauth:mcp:server:"+id); err != nil {
		t.Fatalf("the server record was not rebuilt: %v", err)
	}
	signIn(t, b, "bob", id)
	if n := f.registrations.Load(); n != 1 {
		t.Fatalf("%d registrations, want 1", n)
	}
	if _, err := b.mod.Registry.Get(other); !errors.Is(err, oauthflow.ErrUnknownProvider) {
		t.Fatalf("a server no one signed in to, its record gone: %v, want ErrUnknownProvider", err)
	}
}

// A server record's discovery older than a day is done again when an
// instance builds the provider from it.
func TestStaleDiscoveryIsRedone(t *testing.T) {
	t.Parallel()
	_, kv, _, b, id := twoInstances(t)
	ctx := context.Background()
	key := "oauth:mcp:server:" + id
	saved := func() time.Time {
		t.Helper()
		raw, err := kv.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var rec map[string]any
		if err := json.Unmarshal(raw, &rec); err != nil {
			t.Fatal(err)
		}
		at, _ := time.Parse(time.RFC3339Nano, rec["saved"].(string))
		return at
	}
	raw, _ := kv.Get(ctx, key)
	var rec map[string]any
	_ = json.Unmarshal(raw, &rec)
	rec["saved"] = time.Now().Add(-48 * time.Hour).Format(time.RFC3339Nano)
	raw, _ = json.Marshal(rec)
	if err := kv.Set(ctx, key, raw, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := b.mod.Registry.Get(id); err != nil {
		t.Fatal(err)
	}
	if at := saved(); time.Since(at) > time.Hour {
		t.Fatalf("the record's discovery is from %v: not done again", at)
	}
}

// A provider ID carries 128 bits of the server URL's hash, and fits a
// provider ID with the longest suffix.
func TestProviderIDHas128Bits(t *testing.T) {
	t.Parallel()
	id, err := mcpauth.ProviderID("https://a-very-long-host-name.subdomain.example.com/mcp")
	if err != nil {
		t.Fatal(err)
	}
	hash := id[len(id)-32:]
	for _, c := range hash {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			t.Fatalf("%s does not end in 32 hex digits", id)
		}
	}
	if id[len(id)-33] != '-' || len(id)+len("-xaa") > 64 {
		t.Fatalf("%s: want the host, '-', 32 hex digits, within 60 characters", id)
	}
}

// A URL no one signed in to leaves no registration past its server record:
// the registration discovery made lives no longer than the record (7
// days), and the first grant issued to it keeps it as long as the server's
// name (90 days).
func TestUnusedRegistrationExpiresWithTheServerRecord(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	kv := oauthflow.NewMemoryKV()
	in := newInstance(t, kv, f.srv.Client())
	ctx := context.Background()
	id, err := in.conn.Connect(ctx, f.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	server, err := kv.TTL(ctx, "oauth:mcp:server:"+id)
	if err != nil {
		t.Fatal(err)
	}
	reg, err := kv.TTL(ctx, registrationKeyOf(f.srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if reg <= 0 || reg > server+time.Minute {
		t.Fatalf("the registration of a server no one signed in to lives %v, its server record %v: want no longer", reg, server)
	}
	signIn(t, in, "alice", id)
	name, _ := kv.TTL(ctx, "oauth:mcp:url:"+id)
	if reg, err := kv.TTL(ctx, registrationKeyOf(f.srv.URL)); err != nil || reg < name-time.Minute {
		t.Fatalf("the registration after a sign-in lives %v (%v), the server's name %v: want as long", reg, err, name)
	}
}

// A registration that expired unused while an instance still holds it is
// stored again by the first grant issued to it, so that every instance
// refreshes that grant with the client it was issued to: another instance
// takes it from the store instead of registering another.
func TestExpiredRegistrationIsKeptByItsFirstGrant(t *testing.T) {
	t.Parallel()
	f, kv, a, b, id := twoInstances(t)
	ctx := context.Background()
	if _, err := a.mod.Registry.Get(id); err != nil {
		t.Fatal(err)
	}
	if err := kv.Del(ctx, registrationKeyOf(f.srv.URL)); err != nil { // expired, unused
		t.Fatal(err)
	}
	signIn(t, a, "alice", id)
	first := f.lastClientID()
	if _, err := kv.TTL(ctx, registrationKeyOf(f.srv.URL)); err != nil {
		t.Fatalf("the registration alice's grant was issued to is not stored again: %v", err)
	}
	signIn(t, b, "bob", id)
	if n, now := f.registrations.Load(), f.lastClientID(); n != 1 || now != first {
		t.Fatalf("%d registrations, bob's grant issued to %s and alice's to %s: want 1, one client", n, now, first)
	}
}
