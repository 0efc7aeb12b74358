package oauthflow

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"time"
)

// Health: what the refreshes of a connection have told. Each connection has a
// small plain record beside its tokens, oauth:meta:{user}:{provider}, written
// by the refresh that holds the connection's lock: when it last refreshed,
// and, while refreshes fail transiently, how often they failed in a row, the
// last error (as the logs give it: never a token or a response body) and when
// the next attempt may call the provider. Until then a refresh answers a
// RefreshFailingError at once instead of calling a provider that is down, so a
// dead provider is not hammered by every read; a read of an access token that
// is still valid never looks at the record.
//
// The record names the tokens it speaks of by a fingerprint (a truncated
// SHA-256 of the access and refresh token), so that a sign-in, which writes
// new tokens and nothing else, is healthy from its first read: a record about
// other tokens says nothing about these. A dead grant deletes the connection,
// and its record with it.

// defaultRefreshBackoff is how long a connection whose refresh failed
// transiently waits before the next attempt: First after one failure, twice
// as long after each further one, never more than Max, each wait shortened
// by up to a fifth so that connections that failed together (a provider
// outage) do not all try again at the same instant.
var defaultRefreshBackoff = Backoff{First: 2 * time.Second, Max: 5 * time.Minute, Jitter: 0.2}

// Backoff is an exponential backoff: First, doubled after each failure up to
// Max. Jitter (0 to 1) shortens each wait by up to that fraction, by an
// amount fixed per connection, which spreads connections apart.
type Backoff struct {
	First, Max time.Duration
	Jitter     float64
}

// after is the wait after failures failures in a row (failures >= 1) of the
// connection whose tokens' fingerprint is fp.
func (b Backoff) after(failures int, fp string) time.Duration {
	d := b.First
	for i := 1; i < failures && d < b.Max; i++ {
		d *= 2
	}
	d = min(d, b.Max)
	if b.Jitter <= 0 || fp == "" {
		return d
	}
	h := fnv.New32a()
	h.Write([]byte(fp))
	frac := float64(h.Sum32()) / float64(math.MaxUint32) // the connection's place in [0, 1]
	return d - time.Duration(float64(d)*min(b.Jitter, 1)*frac)
}

// orDefault is defaultRefreshBackoff for the zero Backoff, else b with
// defaultRefreshBackoff's value for each zero duration (Jitter stays as set).
func (b Backoff) orDefault() Backoff {
	if b == (Backoff{}) {
		return defaultRefreshBackoff
	}
	if b.First <= 0 {
		b.First = defaultRefreshBackoff.First
	}
	if b.Max <= 0 {
		b.Max = max(defaultRefreshBackoff.Max, b.First)
	}
	return b
}

// HealthRefreshFailing is the health of a connection whose refreshes fail
// transiently: its tokens are kept, and Connection says how often it failed,
// why, and when it is tried again.
const HealthRefreshFailing = "refresh_failing"

// RefreshFailingError is a refresh that did not call the provider because the
// connection's refreshes have been failing and its next attempt is not due:
// the record is kept, try again after NextAttempt. It is transient, never
// ErrNoToken.
type RefreshFailingError struct {
	ProviderID  string
	Attempts    int       // failed refreshes in a row
	LastError   string    // the last failure, as logged
	NextAttempt time.Time // when a refresh may call the provider again
}

func (e *RefreshFailingError) Error() string {
	return fmt.Sprintf("oauthflow: refresh %s token: failed %d times in a row, next attempt at %s: %s",
		e.ProviderID, e.Attempts, e.NextAttempt.UTC().Format(time.RFC3339), e.LastError)
}

// connMeta is a connection's health record.
type connMeta struct {
	Tokens      string `json:"tokens"`                 // fingerprint of the tokens it speaks of
	RefreshedAt int64  `json:"refreshed_at,omitempty"` // Unix ms of the last successful refresh
	Failures    int    `json:"failures,omitempty"`     // failed refreshes in a row
	LastError   string `json:"last_error,omitempty"`
	FailedAt    int64  `json:"failed_at,omitempty"`    // Unix ms
	NextAttempt int64  `json:"next_attempt,omitempty"` // Unix ms
}

func metaKey(userID, providerID string) string {
	var buf [128]byte
	return string(appendUserKey(buf[:0], "oauth:meta:", userID, providerID))
}

// fingerprint names t's tokens in a health record without holding them.
func fingerprint(t StoredTokens) string {
	h := sha256.New()
	h.Write([]byte(t.AccessToken))
	h.Write([]byte{0})
	h.Write([]byte(t.RefreshToken))
	return base64.RawURLEncoding.EncodeToString(h.Sum(nil)[:12])
}

// about reports whether m speaks of the tokens whose fingerprint is fp.
func (m connMeta) about(fp string) bool { return m.Tokens != "" && m.Tokens == fp }

// decodeMeta reads a health record; one that does not decode says nothing.
func decodeMeta(b []byte) connMeta {
	var m connMeta
	if json.Unmarshal(b, &m) != nil {
		return connMeta{}
	}
	return m
}

// readMeta reads the health record of the user's connection. It is advice:
// a record that cannot be read counts as none.
func (s *TokenStore) readMeta(ctx context.Context, userID, providerID string) connMeta {
	b, err := s.kv.Get(ctx, metaKey(userID, providerID))
	if err != nil {
		return connMeta{}
	}
	return decodeMeta(b)
}

// writeMeta stores m. A failure is logged and otherwise ignored: the tokens
// are what matters, and the next refresh writes the record again.
func (s *TokenStore) writeMeta(ctx context.Context, userID, providerID string, m connMeta) {
	b, _ := json.Marshal(m)
	if err := s.kv.Set(ctx, metaKey(userID, providerID), b, refreshableTokenTTL); err != nil && s.events.log != nil {
		s.events.log.WarnContext(ctx, "oauthflow: the connection's health could not be written",
			"provider", providerID, "error", err.Error())
	}
}

// coolingDown is the error for a refresh of base that must wait: m says its
// refreshes failed and the next attempt is not due; nil when it may go on.
func (s *TokenStore) coolingDown(m connMeta, base StoredTokens, providerID string) error {
	if m.Failures == 0 || !m.about(fingerprint(base)) || s.now().UnixMilli() >= m.NextAttempt {
		return nil
	}
	return &RefreshFailingError{ProviderID: providerID, Attempts: m.Failures, LastError: m.LastError,
		NextAttempt: time.UnixMilli(m.NextAttempt)}
}

// refreshFailed records a transient failure of the refresh of base, m being
// the health record as it was read, and tells the hook.
func (s *TokenStore) refreshFailed(ctx context.Context, userID, providerID string, m connMeta, base StoredTokens, cause error) {
	fp, now := fingerprint(base), s.now()
	next := connMeta{Tokens: fp, Failures: 1, LastError: logSafeError(cause), FailedAt: now.UnixMilli()}
	if m.about(fp) {
		next.RefreshedAt, next.Failures = m.RefreshedAt, m.Failures+1
	}
	next.NextAttempt = now.Add(s.backoff.after(next.Failures, fp)).UnixMilli()
	s.writeMeta(ctx, userID, providerID, next)
	if rateLimited(cause) {
		s.slowDown(ctx, providerID) // the provider says too many: the whole fleet holds back
	}
	s.events.emit(ctx, Event{Kind: EventRefreshFailed, UserID: userID, ProviderID: providerID, Err: cause,
		Attempts: next.Failures})
	if next.Failures == 1 {
		s.events.emit(ctx, Event{Kind: EventConnectionFailing, UserID: userID, ProviderID: providerID, Err: cause,
			Attempts: 1})
	}
}

// refreshed records a successful refresh of base into t, m being the health
// record as it was read, and tells the hook when it ends a run of failures.
func (s *TokenStore) refreshed(ctx context.Context, userID, providerID string, m connMeta, base, t StoredTokens) {
	s.writeMeta(ctx, userID, providerID, connMeta{Tokens: fingerprint(t), RefreshedAt: s.now().UnixMilli()})
	if m.Failures > 0 && m.about(fingerprint(base)) {
		s.events.emit(ctx, Event{Kind: EventConnectionRecovered, UserID: userID, ProviderID: providerID,
			Attempts: m.Failures})
	}
}

// forget deletes the health record of a connection that is gone.
func (s *TokenStore) forget(ctx context.Context, userID, providerID string) {
	if err := s.kv.Del(ctx, metaKey(userID, providerID)); err != nil && !errors.Is(err, ErrNotFound) && s.events.log != nil {
		s.events.log.WarnContext(ctx, "oauthflow: the health record of a closed connection could not be deleted",
			"provider", providerID, "error", err.Error())
	}
}
