package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Connections: a user's connections, listed without a token. Each user has
// an index (oauth:conn:{user}, a sorted set of provider IDs scored by when
// they connected) that a sign-in writes in the same round trip as the token
// record. Listing reads the index and the records together and repairs the
// index both ways: an entry whose record is gone (a dead grant, an expiry) is
// removed, and a record without an entry (written before the index existed,
// or by another writer) of one of the app's own providers is found through
// the registry and added. A listing reads the user's index and two records
// per provider the app registered itself, whatever other users connected.

// Connection is one of a user's connections. It holds no token.
type Connection struct {
	ProviderID      string
	Scopes          []string  // granted
	ExpiresAt       time.Time // of the access token; zero when it never expires
	HasRefreshToken bool
	ConnectedAt     time.Time // zero when unknown (a record older than the index)
	RefreshedAt     time.Time // the last successful refresh of these tokens; zero when none
	Health          string    // HealthHealthy, HealthRefreshFailing, or HealthUnreadable with Err
	DPoP            bool      // the access token is bound to a key (RFC 9449)
	// LastUsed is when the tokens were last read, as refresh ahead notes it
	// in the user's index (Config.RefreshAhead; at the sign-in, then at most
	// every RefreshAheadIdle/8 per instance); zero with refresh ahead off.
	// The listing reads the index anyway: it costs nothing more.
	LastUsed time.Time
	// Account names the account the grant is for ("octocat",
	// "alice@example.com"), as the provider said after the sign-in; "" when
	// it did not say. Metadata is what the provider's API needs besides the
	// token (a Salesforce instance_url, a QuickBooks realmId).
	Account  string
	Metadata map[string]string
	// AuthorizationDetails are the authorization details the provider
	// granted (RFC 9396 §7), as its last answer that named them said: a
	// JSON array of objects, each with its "type", for showing the user
	// what they approved; nil when it granted none.
	AuthorizationDetails json.RawMessage

	// While Health is HealthRefreshFailing: failed refreshes in a row, the
	// last one's error (as logged) and when a refresh may call the provider
	// again (see [WithRefreshBackoff]).
	Attempts    int
	LastError   string
	NextAttempt time.Time

	Err error // why the record cannot be read (an unknown key, a corrupt record)
}

// Health of a connection. A connection whose grant is dead is gone: it is
// not listed.
const (
	HealthHealthy    = "healthy"
	HealthUnreadable = "unreadable"
)

// Connections lists userID's connections, sorted by provider ID, repairing
// the user's index as it goes.
func (s *TokenStore) Connections(ctx context.Context, userID string) ([]Connection, error) {
	if userID == "" || len(userID) > keyspace.MaxUserIDLen {
		return nil, errs.Invalid("user ID must be 1 to %d bytes", keyspace.MaxUserIDLen)
	}
	ctx = xcontext.OrBackground(ctx)
	index := keyspace.ConnIndex(userID)
	indexed := map[string]int64{}
	if r, ok := s.kv.(kv.IndexReader); ok {
		var err error
		if indexed, err = r.Members(ctx, index); err != nil {
			return nil, errs.Store(ctx, "read connection index", err)
		}
	}
	seen := map[string]int64{} // refresh ahead's marks of the last read, by provider
	maps.DeleteFunc(indexed, func(member string, at int64) bool {
		id, ok := strings.CutPrefix(member, seenPrefix)
		if ok {
			seen[id] = at
		}
		return ok
	})
	ids := slices.Sorted(maps.Keys(indexed))
	for _, id := range s.repairIDs() {
		if _, ok := indexed[id]; !ok {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	ids = slices.Compact(ids)
	reads := make([]*kv.Op, 2*len(ids)) // each record, then its health
	for i, id := range ids {
		reads[2*i] = &kv.Op{Kind: kv.OpGet, Key: keyspace.Token(userID, id)}
		reads[2*i+1] = &kv.Op{Kind: kv.OpGet, Key: metaKey(userID, id)}
	}
	kv.RunBatch(ctx, s.kv, reads...)
	var out []Connection
	for i, id := range ids {
		c, found, err := s.connection(ctx, reads[2*i], reads[2*i+1], id, indexed)
		if err != nil {
			return nil, err
		}
		if err := s.repairIndex(ctx, index, id, found, indexed); err != nil {
			return nil, err
		}
		if found {
			if at := seen[id]; at > 0 {
				c.LastUsed = time.UnixMilli(at)
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// repairIDs are the providers whose records a listing reads besides the
// user's index, to repair it: the app's own providers, a bounded few,
// never every provider a resolver built (one per MCP server any user met).
// A KV without an index lists through the whole registry (bounded too).
func (s *TokenStore) repairIDs() []string {
	if _, ok := s.kv.(kv.IndexReader); ok {
		return s.reg.ownIDs()
	}
	return s.reg.IDs()
}

// connection reads one record of the listing and its health record (meta);
// found is false when it is gone.
func (s *TokenStore) connection(ctx context.Context, read, meta *kv.Op, id string, indexed map[string]int64) (Connection, bool, error) {
	if errors.Is(read.Err, ErrNotFound) || !keyspace.ValidProviderID(id) {
		return Connection{}, false, nil
	}
	if read.Err != nil {
		return Connection{}, false, errs.Store(ctx, "read tokens", read.Err)
	}
	c := Connection{ProviderID: id, Health: HealthHealthy}
	if at := indexed[id]; at > 0 {
		c.ConnectedAt = time.UnixMilli(at)
	}
	v, err := s.parse(read.Got, read.Key)
	if err != nil {
		c.Health, c.Err = HealthUnreadable, err
		return c, true, nil
	}
	c.Scopes, c.HasRefreshToken = strings.Fields(string(v.scope)), len(v.refresh) > 0
	c.DPoP = v.boundKey() != nil
	c.Account, c.Metadata = string(v.account), maps.Clone(v.metadata)
	c.AuthorizationDetails = slices.Clone(v.details)
	if v.expiresAt != 0 {
		c.ExpiresAt = time.UnixMilli(v.expiresAt)
	}
	if meta.Err == nil {
		c.health(decodeMeta(meta.Got), v.tokens())
	}
	return c, true, nil
}

// health fills in what m says of the connection's tokens t; a record about
// other tokens (those a sign-in replaced) says nothing.
func (c *Connection) health(m connMeta, t StoredTokens) {
	if !m.about(fingerprint(t)) {
		return
	}
	if m.RefreshedAt > 0 {
		c.RefreshedAt = time.UnixMilli(m.RefreshedAt)
	}
	if m.Failures > 0 {
		c.Health, c.Attempts, c.LastError = HealthRefreshFailing, m.Failures, m.LastError
		c.NextAttempt = time.UnixMilli(m.NextAttempt)
	}
}

// repairIndex makes the index agree with what the listing found.
func (s *TokenStore) repairIndex(ctx context.Context, index, id string, found bool, indexed map[string]int64) error {
	_, listed := indexed[id]
	var err error
	switch {
	case found && !listed:
		err = s.kv.Schedule(ctx, index, id, time.UnixMilli(0)) // connected at an unknown time
	case !found && listed:
		err = s.kv.Unschedule(ctx, index, id)
	}
	if err != nil {
		return errs.Store(ctx, "repair connection index", err)
	}
	return nil
}
