package mcpauth_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/oauthflow/oauthflow/mcpauth"
)

// commandKV logs each store command it is given (one KV call is one
// command, as on Redis), and can fail the next write of a key under a
// prefix.
type commandKV struct {
	oauthflow.KV
	mu   sync.Mutex
	log  []string // "SET oauth:mcp:url:…"
	fail string   // the next Set of a key under this prefix fails
}

var errStoreDown = errors.New("the store is down")

func (k *commandKV) note(cmd, key string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.log = append(k.log, cmd+" "+key)
}

// take returns the commands logged since the last take.
func (k *commandKV) take() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	l := k.log
	k.log = nil
	return l
}

// failNextSet has the next Set of a key under prefix fail.
func (k *commandKV) failNextSet(prefix string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fail = prefix
}

func (k *commandKV) Get(ctx context.Context, key string) ([]byte, error) {
	k.note("GET", key)
	return k.KV.Get(ctx, key)
}

func (k *commandKV) Set(ctx context.Context, key string, v []byte, ttl time.Duration) error {
	k.note("SET", key)
	k.mu.Lock()
	fail := k.fail != "" && strings.HasPrefix(key, k.fail)
	if fail {
		k.fail = ""
	}
	k.mu.Unlock()
	if fail {
		return errStoreDown
	}
	return k.KV.Set(ctx, key, v, ttl)
}

func (k *commandKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	k.note("SETNX", key)
	return k.KV.SetNX(ctx, key, v, ttl)
}

func (k *commandKV) GetDel(ctx context.Context, key string) ([]byte, error) {
	k.note("GETDEL", key)
	return k.KV.GetDel(ctx, key)
}

func (k *commandKV) Del(ctx context.Context, key string) error {
	k.note("DEL", key)
	return k.KV.Del(ctx, key)
}

func (k *commandKV) TTL(ctx context.Context, key string) (time.Duration, error) {
	k.note("TTL", key)
	return k.KV.TTL(ctx, key)
}

func (k *commandKV) CompareAndDelete(ctx context.Context, key string, v []byte) (bool, error) {
	k.note("CAD", key)
	return k.KV.CompareAndDelete(ctx, key, v)
}

func (k *commandKV) CompareAndExpire(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	k.note("CAE", key)
	return k.KV.CompareAndExpire(ctx, key, v, ttl)
}

func (k *commandKV) CompareAndSwap(ctx context.Context, key string, old, v []byte, ttl time.Duration) (bool, error) {
	k.note("CAS", key)
	return k.KV.CompareAndSwap(ctx, key, old, v, ttl)
}

func (k *commandKV) Schedule(ctx context.Context, index, member string, due time.Time) error {
	k.note("SCHEDULE", index)
	return k.KV.Schedule(ctx, index, member, due)
}

func (k *commandKV) Unschedule(ctx context.Context, index, member string) error {
	k.note("UNSCHEDULE", index)
	return k.KV.Unschedule(ctx, index, member)
}

func (k *commandKV) Claim(ctx context.Context, index string, now time.Time, lease time.Duration, n int) ([]string, error) {
	k.note("CLAIM", index)
	return k.KV.Claim(ctx, index, now, lease, n)
}

// keepCommands are those of cmds on the records a provider keeps alive:
// the server's name record and its dynamic registration.
func keepCommands(cmds []string) []string {
	var keeps []string
	for _, c := range cmds {
		if strings.Contains(c, " oauth:mcp:url:") || strings.Contains(c, " oauth:mcp:client:") {
			keeps = append(keeps, c)
		}
	}
	return keeps
}

// keepClock is a provider's clock, moved by the test.
type keepClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *keepClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *keepClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// keptServer is an MCP server with a dynamic registration, connected on an
// instance whose store logs its commands, its provider on a clock the test
// moves, and users signed in to it whose every read refreshes.
type keptServer struct {
	kv    *commandKV
	in    *instance
	id    string
	as    *authServer
	clock *keepClock
}

func newKeptServer(t *testing.T, users ...string) *keptServer {
	t.Helper()
	as := newAuthServer(t, "as1")
	m := newMovingServer(t, as)
	k := &keptServer{kv: &commandKV{KV: oauthflow.NewMemoryKV()}, as: as, clock: &keepClock{t: time.Now()}}
	k.in = newInstance(t, k.kv, &http.Client{})
	k.id = connectAs(t, m, k.in, users[0])
	p, err := k.in.mod.Registry.Get(k.id)
	if err != nil || !mcpauth.SetKeepClock(p, k.clock.now) {
		t.Fatalf("the server's provider: %T, %v", p, err)
	}
	for _, u := range users {
		signIn(t, k.in, u, k.id)
	}
	k.kv.take()
	return k
}

// refresh refreshes the tokens of users at once and returns the store
// commands it cost.
func (k *keptServer) refresh(t *testing.T, users ...string) []string {
	t.Helper()
	var wg sync.WaitGroup
	for _, u := range users {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := k.in.mod.Tokens.GetValidAccessToken(context.Background(), u, k.id); err != nil {
				t.Errorf("%s's refresh: %v", u, err)
			}
		}()
	}
	waitfor.Group(t, &wg, "the refreshes")
	return k.kv.take()
}

// A refresh keeps the server's name record and registration alive (a
// user's tokens live) once per keepInterval per provider, not at each
// refresh: the refreshes within it cost only their own store commands;
// the first after it keeps both, once however many refresh at once.
func TestRefreshKeepsServerRecordsOncePerInterval(t *testing.T) {
	t.Parallel()
	users := []string{"alice", "bob", "carol", "dave"}
	k := newKeptServer(t, users...)
	own := len(k.refresh(t, "alice"))
	const n = 5
	for i := range n {
		cmds := k.refresh(t, "alice")
		if keeps := keepCommands(cmds); len(keeps) != 0 || len(cmds) != own {
			t.Fatalf("refresh %d within the interval: %d commands, %v keeping the records; want %d, none", i+2, len(cmds), keeps, own)
		}
	}
	if calls := k.as.called("/token"); calls != len(users)+n+1 {
		t.Fatalf("%d token requests, want %d: the sign-ins and %d refreshes", calls, len(users)+n+1, n+1)
	}

	k.clock.advance(mcpauth.KeepInterval)
	cmds := k.refresh(t, users...)
	keeps := keepCommands(cmds)
	want := []string{"SET oauth:mcp:url:" + k.id, "GET " + registrationKeyOf(k.as.srv.URL), "CAE " + registrationKeyOf(k.as.srv.URL)}
	if strings.Join(keeps, "\n") != strings.Join(want, "\n") || len(cmds) != len(users)*own+len(want) {
		t.Fatalf("%d refreshes at once after the interval: %d commands, keeping the records %v; want %d, %v",
			len(users), len(cmds), keeps, len(users)*own+len(want), want)
	}
	if keeps := keepCommands(k.refresh(t, "alice")); len(keeps) != 0 {
		t.Fatalf("the refresh after the keep keeps again: %v", keeps)
	}
}

// A registration a provider kept, then found gone before the time to live
// its keep gave it could run out, was deleted (a heal forgot it), not
// expired: the provider's refreshes leave it gone, within the interval and
// after it. Found gone past that time to live, it expired unused, and the
// next refresh stores it again (TestExpiredRegistrationIsKeptByItsFirstGrant).
func TestKeepDoesNotRestoreADeletedRegistration(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		after    time.Duration
		restored bool
	}{
		{"within the interval", mcpauth.KeepInterval / 2, false},
		{"after the interval", mcpauth.KeepInterval, false},
		{"past the time to live of the last keep", mcpauth.NameTTL, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			k := newKeptServer(t, "alice")
			key := registrationKeyOf(k.as.srv.URL)
			if err := k.kv.Del(ctx, key); err != nil {
				t.Fatal(err)
			}
			k.clock.advance(tc.after)
			k.refresh(t, "alice")
			_, err := k.kv.TTL(ctx, key)
			if restored := err == nil; restored != tc.restored {
				t.Fatalf("the registration after a refresh %v past its keep: stored again %v (%v), want %v", tc.after, restored, err, tc.restored)
			}
		})
	}
}

// A keep the store failed is not remembered: the next refresh keeps the
// record, though within the interval.
func TestFailedKeepIsTriedAgain(t *testing.T) {
	t.Parallel()
	k := newKeptServer(t, "alice")
	k.clock.advance(mcpauth.KeepInterval)
	k.kv.failNextSet("oauth:mcp:url:")
	if keeps := keepCommands(k.refresh(t, "alice")); len(keeps) != 3 {
		t.Fatalf("the refresh after the interval: %v, want the records kept", keeps)
	}
	want := "SET oauth:mcp:url:" + k.id
	if keeps := keepCommands(k.refresh(t, "alice")); strings.Join(keeps, "\n") != want {
		t.Fatalf("the refresh after a failed keep of the name record: %v, want %s alone", keeps, want)
	}
	if keeps := keepCommands(k.refresh(t, "alice")); len(keeps) != 0 {
		t.Fatalf("the refresh after the name record was kept again: %v, want nothing kept", keeps)
	}
}

// A registration made anew by a heal is kept at the first grant issued to
// it, though the one it replaced was kept within the interval: it lives as
// long as the server's name, not an unused registration's serverTTL.
func TestNewRegistrationIsKeptAtItsFirstGrant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	k := newKeptServer(t, "alice")
	k.as.drop("as1-client-1") // the registration alice's grant was issued to
	if _, err := k.in.mod.Tokens.GetValidAccessToken(ctx, "alice", k.id); !errors.Is(err, oauthflow.ErrNoToken) {
		t.Fatalf("alice's refresh with a client the server dropped: %v, want ErrNoToken", err)
	}
	if n := k.as.registrations.Load(); n != 2 {
		t.Fatalf("%d registrations, want the refused one healed", n)
	}
	key := registrationKeyOf(k.as.srv.URL)
	unused, err := k.kv.TTL(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, k.in, "bob", k.id)
	if kept, err := k.kv.TTL(ctx, key); err != nil || kept <= unused+time.Hour {
		t.Fatalf("the new registration lives %v (%v) after the first grant issued to it, %v before: want it kept", kept, err, unused)
	}
}

// drop has the server forget the client id, as a server that dropped a
// registration does: it answers invalid_client to it.
func (a *authServer) drop(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.clients, id)
}
