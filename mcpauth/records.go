package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
)

// An MCP server's records. The server record (oauth:mcp:server:{id}) holds
// what discovery found and the scopes a sign-in asks for: no client and no
// secret. It lives serverTTL from its last use (a Connect, or a provider
// built from it) and its discovery is done again when it is older than
// rediscoverAfter, the next time a provider is built from it. The name
// record (oauth:mcp:url:{id}) holds only the server's URL; it is written
// when a user's tokens are stored for the server and as they are refreshed
// (by each instance at most once per keepInterval: serverProvider.keep),
// and lives nameTTL from then, so that a server record gone while a user's
// tokens live is rebuilt by discovering the server again. A dynamic
// registration lives serverTTL from when it was made, and nameTTL from the
// grants issued to it, kept the same way (keepRegistration). A URL that no
// user signed in to leaves nothing past serverTTL.

const (
	serverTTL       = 7 * 24 * time.Hour
	rediscoverAfter = 24 * time.Hour
	nameTTL         = 90 * 24 * time.Hour
)

// server is what the store keeps of an MCP server: enough to rebuild its
// provider on any instance.
type server struct {
	URL       string     `json:"url"`
	Discovery Discovered `json:"discovery"`
	Scopes    []string   `json:"scopes,omitempty"` // what a sign-in asks for by default
	Saved     time.Time  `json:"saved"`            // when Discovery was found
	// Moved is when the server was last found at another authorization
	// server than its record named, or rebuilt without the record that
	// named one; zero: every token and sign-in for it is its issuer's
	// (see Connector.recheck).
	Moved time.Time `json:"moved,omitzero"`
}

func serverKey(id string) string { return "oauth:mcp:server:" + id }
func nameKey(id string) string   { return "oauth:mcp:url:" + id }

// load reads the record of the server id, rediscovering the server when its
// record is gone (from the URL its name record keeps) or its discovery is
// stale; each read resets the record's time to live. ok is false when
// neither record is there.
func (c *Connector) load(ctx context.Context, id string) (*server, bool, error) {
	s, raw, err := c.readServer(ctx, id)
	if err != nil {
		return nil, false, err
	}
	if s == nil {
		return c.rediscoverByName(ctx, id)
	}
	if time.Since(s.Saved) > rediscoverAfter {
		if fresh, err := c.rediscover(ctx, id, s, Challenge{}); err == nil {
			return fresh, true, nil
		} // unreachable now: the stored discovery serves, and the next build tries again
	}
	_, _ = c.kv.CompareAndExpire(ctx, serverKey(id), raw, serverTTL)
	return s, true, nil
}

// readServer reads the server record of id; nil when it is absent or unreadable.
func (c *Connector) readServer(ctx context.Context, id string) (*server, []byte, error) {
	raw, err := c.kv.Get(ctx, serverKey(id))
	if errors.Is(err, oauthflow.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var s server
	if json.Unmarshal(raw, &s) != nil || s.URL == "" {
		return nil, nil, nil // unreadable: discovered again
	}
	return &s, raw, nil
}

// rediscoverByName rebuilds the server record of id from its name record.
func (c *Connector) rediscoverByName(ctx context.Context, id string) (*server, bool, error) {
	u, err := c.kv.Get(ctx, nameKey(id))
	if errors.Is(err, oauthflow.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if base, _ := ProviderID(string(u)); base == "" || !strings.HasPrefix(id, base) {
		return nil, false, nil // a name record that is not this server's
	}
	// The record that named the server's issuer is gone, and users' tokens
	// may be another issuer's: it counts as moved.
	s, err := c.rediscover(ctx, id, &server{URL: string(u)}, Challenge{})
	if err != nil {
		return nil, false, err
	}
	return s, true, nil
}

// rediscover discovers the server of old again, with ch (the challenge that
// asked for it, when there is one), and saves its record. old's scopes are
// kept (they may have come from a challenge) unless the server moved to
// another authorization server: then they are found anew, as at a Connect.
func (c *Connector) rediscover(ctx context.Context, id string, old *server, ch Challenge) (*server, error) {
	d, err := discover(ctx, c.http, old.URL, ch)
	if err != nil {
		return nil, err
	}
	s := &server{URL: old.URL, Discovery: *d, Scopes: old.Scopes, Saved: time.Now(), Moved: old.Moved}
	if verifiedIssuer(d) != verifiedIssuer(&old.Discovery) {
		s.Scopes, s.Moved = nil, s.Saved
	}
	if s.Scopes == nil {
		s.Scopes = defaultScopes(d, ch)
	}
	return s, c.save(ctx, id, s)
}

// save writes the server record of id. A server reached without a sign-in
// (client credentials, cross-app access) has its tokens stored at once:
// its name is kept too.
func (c *Connector) save(ctx context.Context, id string, s *server) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	if err := c.kv.Set(ctx, serverKey(id), b, serverTTL); err != nil {
		return err
	}
	if grantID(id) {
		return c.keepName(ctx, id, s.URL)
	}
	return nil
}

// keepName (re)writes the name record of id: a user's tokens for it live.
func (c *Connector) keepName(ctx context.Context, id, serverURL string) error {
	return c.kv.Set(ctx, nameKey(id), []byte(serverURL), nameTTL)
}
