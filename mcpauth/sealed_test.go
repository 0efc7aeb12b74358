package mcpauth_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/mcpauth"
	"github.com/redis/go-redis/v9"
)

// dynSecret is the client secret the registration answers carry.
const dynSecret = "dyn-secret-3b0e1c"

// secretRegistrations gives each dynamic registration a client secret (the
// fake's own answers have none) and keeps the tokens the wire carries.
type secretRegistrations struct {
	base   http.RoundTripper
	tokens []string
}

func (s *secretRegistrations) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := s.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	_ = resp.Body.Close()
	if err != nil {
		return nil, err
	}
	var answer map[string]any
	if json.Unmarshal(body, &answer) == nil {
		switch {
		case strings.HasSuffix(req.URL.Path, "/register"):
			answer["client_secret"], answer["token_endpoint_auth_method"] = dynSecret, "client_secret_post"
			body, _ = json.Marshal(answer)
		case answer["access_token"] != nil:
			s.tokens = append(s.tokens, answer["access_token"].(string))
		}
	}
	resp.Body, resp.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	resp.Header.Del("Content-Length")
	return resp, nil
}

// newKey is a fresh key named id, as a ring's text holds it: "id:base64key".
func newKey(id string) string {
	k := make([]byte, 32)
	_, _ = rand.Read(k)
	return id + ":" + base64.StdEncoding.EncodeToString(k)
}

func newRing(t *testing.T, keys ...string) *oauthflow.KeyRing {
	t.Helper()
	ring, err := oauthflow.ParseKeyRing(strings.Join(keys, ","))
	if err != nil {
		t.Fatal(err)
	}
	return ring
}

// sealedInstance is an instance on kv whose module seals with ring.
func sealedInstance(t *testing.T, kv oauthflow.KV, ring *oauthflow.KeyRing, client *http.Client) *instance {
	t.Helper()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Encryption: ring, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	mux := http.NewServeMux()
	m.Mount(mux)
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	c, err := mcpauth.New(mcpauth.Config{Module: m, RedirectURL: "http://127.0.0.1:1/api/v1/oauth/callback", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	return &instance{mod: m, conn: c, api: api}
}

// dumpStrings returns every string value under prefix, by key without it.
func dumpStrings(t *testing.T, c redis.UniversalClient, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	iter := c.Scan(ctx, 0, prefix+"*", 500).Iterator()
	for iter.Next(ctx) {
		if v, err := c.Get(ctx, iter.Val()).Result(); err == nil {
			out[strings.TrimPrefix(iter.Val(), prefix)] = v
		}
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// With encryption at rest, an MCP flow with a dynamic registration leaves
// neither the registration's secret nor a token in any value of the
// keyspace: the registration is sealed, Reencrypt reseals it under a new
// key, and it still serves sign-ins after.
func TestDynamicRegistrationIsSealedAtRest(t *testing.T) {
	t.Parallel()
	f := newFakeMCPAuth(t)
	c, real := redistest.Any(t)
	prefix := "test:"
	if real {
		prefix = redistest.Prefix(t, c)
	}
	kv := oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(c), prefix)
	wire := &secretRegistrations{base: f.srv.Client().Transport}
	k1, k2 := newKey("k1"), newKey("k2")
	in := sealedInstance(t, kv, newRing(t, k1), &http.Client{Transport: wire})
	ctx := context.Background()
	id, err := in.conn.Connect(ctx, f.srv.URL+"/mcp", mcpauth.Challenge{})
	if err != nil {
		t.Fatal(err)
	}
	signIn(t, in, "alice", id)
	if n := checkSealed(t, dumpStrings(t, c, prefix), "enc2:k1:", append(wire.tokens, dynSecret)); n != 1 {
		t.Fatalf("the keyspace holds %d dynamic registrations, want 1", n)
	}

	// k2 seals from now on; Reencrypt walks the registration too.
	rotated := sealedInstance(t, kv, newRing(t, k2, k1), &http.Client{Transport: wire})
	if _, err := rotated.mod.Reencrypt(ctx, oauthflow.ReencryptOptions{}); err != nil {
		t.Fatal(err)
	}
	checkSealed(t, dumpStrings(t, c, prefix), "enc2:k2:", append(wire.tokens, dynSecret))
	signIn(t, rotated, "bob", id)
	if n := f.registrations.Load(); n != 1 {
		t.Fatalf("%d registrations: the resealed registration did not serve", n)
	}
	checkSealed(t, dumpStrings(t, c, prefix), "enc2:k2:", append(wire.tokens, dynSecret))
}

// checkSealed fails when a value holds one of secrets, or a registration
// record is not sealed with mark; it returns how many registrations it saw.
func checkSealed(t *testing.T, dump map[string]string, mark string, secrets []string) int {
	t.Helper()
	n := 0
	for key, v := range dump {
		for _, s := range secrets {
			if s != "" && strings.Contains(v, s) {
				t.Errorf("%s holds a secret in plain text: %q", key, s)
			}
		}
		if strings.HasPrefix(key, "oauth:mcp:client:") {
			n++
			if !strings.HasPrefix(v, mark) {
				t.Errorf("%s is not sealed with %s: %.40q", key, mark, v)
			}
		}
	}
	return n
}
