package oauthflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"time"

	"golang.org/x/oauth2"
)

// Token lifetimes and timings (SPEC "Limits", DESIGN "Token rules").
const (
	// RefreshableTokenTTL keeps a record with a refresh token, or one that never expires.
	RefreshableTokenTTL   = 30 * 24 * time.Hour
	DefaultSkew           = 60 * time.Second
	DefaultRefreshTimeout = 30 * time.Second
	DefaultLockLease      = 10 * time.Second
	maxExpiresIn          = 100 * 365 * 24 * 3600 // seconds; longer is clamped
	maxUserIDLen          = 512
)

// TokenStore keeps tokens per user and provider and refreshes them on read.
// Several TokenStores over one Redis (app replicas) refresh a token once between them.
type TokenStore struct {
	kv             KV
	reg            *Registry
	now            func() time.Time
	skew           time.Duration
	refreshTimeout time.Duration
	lockLease      time.Duration
	events         notifier
	flights        flightGroup
}

// TokenStoreOption configures a TokenStore.
type TokenStoreOption func(*TokenStore)

// WithSkew sets how long before expiresAt a token counts as expired (default 60 s).
func WithSkew(d time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if d >= 0 {
			s.skew = d
		}
	}
}

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) TokenStoreOption {
	return func(s *TokenStore) {
		if now != nil {
			s.now = now
		}
	}
}

// WithLogger sets the structured logger (default slog.Default()).
func WithLogger(l *slog.Logger) TokenStoreOption {
	return func(s *TokenStore) {
		if l != nil {
			s.events.log = l
		}
	}
}

// WithEventHook sets the hook that hears tokens stored, refreshed, refresh failed and deleted.
func WithEventHook(h EventHook) TokenStoreOption { return func(s *TokenStore) { s.events.hook = h } }

// WithRefreshTimeout bounds one refresh at the provider, whoever waits for it (default 30 s).
func WithRefreshTimeout(d time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if d > 0 {
			s.refreshTimeout = d
		}
	}
}

// WithLockLease sets the lease of the cross-process refresh lock (default 10 s);
// it is renewed while the refresh runs, and frees itself if the process dies.
func WithLockLease(d time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if d > 0 {
			s.lockLease = d
		}
	}
}

// NewTokenStore returns a TokenStore over kv that refreshes through the providers in reg.
func NewTokenStore(kv KV, reg *Registry, opts ...TokenStoreOption) *TokenStore {
	if reg == nil {
		reg = NewRegistry()
	}
	s := &TokenStore{kv: kv, reg: reg, now: time.Now, skew: DefaultSkew,
		refreshTimeout: DefaultRefreshTimeout, lockLease: DefaultLockLease,
		events: notifier{log: slog.Default()}}
	for _, o := range opts {
		o(s)
	}
	s.events.now = s.now
	return s
}

func tokenKey(userID, providerID string) string { return "oauth:" + userID + ":" + providerID }
func lockKey(userID, providerID string) string  { return "oauth:lock:" + userID + ":" + providerID }

func checkIDs(userID, providerID string) error {
	if userID == "" || len(userID) > maxUserIDLen {
		return invalidArg("user ID must be 1 to %d bytes", maxUserIDLen)
	}
	if !providerIDPattern.MatchString(providerID) {
		return invalidArg("provider ID %q is not valid", providerID)
	}
	return nil
}

// StoreTokens writes t for the user and provider with the TTL the rules give:
// 30 days with a refresh token or without expiry, else the seconds left (at least 1).
func (s *TokenStore) StoreTokens(ctx context.Context, userID, providerID string, t StoredTokens) error {
	if err := checkIDs(userID, providerID); err != nil {
		return err
	}
	if t.AccessToken == "" || t.ExpiresAt < 0 {
		return invalidArg("tokens need an access token and a non-negative expiresAt")
	}
	ctx = ctxOrBackground(ctx)
	if err := s.write(ctx, userID, providerID, t); err != nil {
		return err
	}
	s.events.emit(ctx, Event{Kind: EventTokensStored, UserID: userID, ProviderID: providerID})
	return nil
}

// StoreFromTokenSet stores a provider's answer, turning expiresIn into expiresAt.
func (s *TokenStore) StoreFromTokenSet(ctx context.Context, userID, providerID string, ts *TokenSet) error {
	if ts == nil {
		return invalidArg("nil token set")
	}
	if ts.ExpiresIn < 0 {
		return invalidArg("negative expiresIn")
	}
	return s.StoreTokens(ctx, userID, providerID, StoredTokens{AccessToken: ts.AccessToken,
		RefreshToken: ts.RefreshToken, ExpiresAt: s.expiresAt(ts.ExpiresIn), Scope: ts.Scope})
}

func (s *TokenStore) expiresAt(expiresIn int64) int64 {
	if expiresIn <= 0 {
		return 0
	}
	return s.now().UnixMilli() + min(expiresIn, maxExpiresIn)*1000
}

func (s *TokenStore) ttl(t StoredTokens) time.Duration {
	if t.RefreshToken != "" || t.ExpiresAt == 0 {
		return RefreshableTokenTTL
	}
	left := math.Ceil(float64(t.ExpiresAt-s.now().UnixMilli()) / 1000)
	return time.Duration(max(left, 1)) * time.Second
}

func (s *TokenStore) write(ctx context.Context, userID, providerID string, t StoredTokens) error {
	err := s.kv.Set(ctx, tokenKey(userID, providerID), encodeStoredTokens(t), s.ttl(t))
	if err != nil {
		return storeErr("store tokens", err)
	}
	return nil
}

// GetTokens returns the stored record, which may be expired; ErrNoToken when absent.
func (s *TokenStore) GetTokens(ctx context.Context, userID, providerID string) (*StoredTokens, error) {
	if err := checkIDs(userID, providerID); err != nil {
		return nil, err
	}
	v, err := s.read(ctxOrBackground(ctx), tokenKey(userID, providerID))
	if err != nil {
		return nil, err
	}
	t := v.tokens()
	return &t, nil
}

func (s *TokenStore) read(ctx context.Context, key string) (tokenView, error) {
	b, err := s.kv.Get(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return tokenView{}, ErrNoToken
	}
	if err != nil {
		return tokenView{}, storeErr("read tokens", err)
	}
	return parseTokenView(b)
}

func (s *TokenStore) fresh(expiresAt int64) bool {
	return expiresAt == 0 || s.now().Add(s.skew).UnixMilli() < expiresAt
}

// GetValidAccessToken returns an access token that is valid now, refreshing it
// through the provider when it has expired and a refresh token exists. ErrNoToken
// (possibly wrapping the provider's answer) means the user must sign in; any other
// error is transient and the stored record is kept.
func (s *TokenStore) GetValidAccessToken(ctx context.Context, userID, providerID string) (string, error) {
	tok, _, err := s.validToken(ctx, userID, providerID)
	return tok, err
}

func (s *TokenStore) validToken(ctx context.Context, userID, providerID string) (string, int64, error) {
	if err := checkIDs(userID, providerID); err != nil {
		return "", 0, err
	}
	ctx = ctxOrBackground(ctx)
	v, err := s.read(ctx, tokenKey(userID, providerID))
	if err != nil {
		return "", 0, err
	}
	if s.fresh(v.expiresAt) {
		return string(v.access), v.expiresAt, nil
	}
	if len(v.refresh) == 0 {
		return "", 0, fmt.Errorf("%w: the access token expired and there is no refresh token", ErrNoToken)
	}
	t, err := s.refresh(ctx, userID, providerID, string(v.access))
	return t.AccessToken, t.ExpiresAt, err
}

// refresh collapses concurrent refreshes of one record in this process, and runs
// the shared one under a context of its own so that no caller's cancellation ends it.
func (s *TokenStore) refresh(ctx context.Context, userID, providerID, stale string) (StoredTokens, error) {
	return s.flights.do(ctx, tokenKey(userID, providerID), func() (StoredTokens, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.refreshTimeout)
		defer cancel()
		return s.refreshShared(rctx, userID, providerID, stale)
	})
}

// refreshShared takes the cross-process lock and refreshes, or, while another
// process holds it, re-reads the record with a short backoff until that process
// has written the new token.
func (s *TokenStore) refreshShared(ctx context.Context, userID, providerID, stale string) (StoredTokens, error) {
	for backoff := time.Millisecond; ; backoff = min(2*backoff, 25*time.Millisecond) {
		l, got, err := tryLease(ctx, s.kv, lockKey(userID, providerID), s.lockLease)
		if err != nil {
			return StoredTokens{}, err
		}
		if got {
			defer l.release(ctx)
			return s.refreshLocked(ctx, userID, providerID, stale)
		}
		t, done, err := s.refreshedBy(ctx, userID, providerID, stale)
		if done || err != nil {
			return t, err
		}
		if err := sleepCtx(ctx, backoff); err != nil {
			return StoredTokens{}, fmt.Errorf("oauthflow: waiting for another instance's refresh: %w", err)
		}
	}
}

// refreshedBy reports whether the record no longer holds the stale access token:
// someone else refreshed it (or deleted it because the grant is dead).
func (s *TokenStore) refreshedBy(ctx context.Context, userID, providerID, stale string) (StoredTokens, bool, error) {
	v, err := s.read(ctx, tokenKey(userID, providerID))
	if err != nil {
		return StoredTokens{}, true, err
	}
	if !s.replaced(v, stale) {
		return StoredTokens{}, false, nil
	}
	return v.tokens(), true, nil
}

func (s *TokenStore) replaced(v tokenView, stale string) bool {
	return string(v.access) != stale || s.fresh(v.expiresAt)
}

func (s *TokenStore) refreshLocked(ctx context.Context, userID, providerID, stale string) (StoredTokens, error) {
	old, err := s.read(ctx, tokenKey(userID, providerID))
	switch {
	case err != nil:
		return StoredTokens{}, err
	case s.replaced(old, stale):
		return old.tokens(), nil
	case len(old.refresh) == 0:
		return StoredTokens{}, fmt.Errorf("%w: the access token expired and there is no refresh token", ErrNoToken)
	}
	ts, err := s.callRefresh(ctx, providerID, string(old.refresh))
	if err != nil {
		return StoredTokens{}, s.refreshFailed(ctx, userID, providerID, err)
	}
	t := s.merge(old.tokens(), ts)
	if err := s.write(ctx, userID, providerID, t); err != nil {
		return StoredTokens{}, err
	}
	s.events.emit(ctx, Event{Kind: EventTokensRefreshed, UserID: userID, ProviderID: providerID})
	return t, nil
}

func (s *TokenStore) callRefresh(ctx context.Context, providerID, refreshToken string) (ts *TokenSet, err error) {
	p, err := s.reg.Get(providerID)
	if err != nil {
		return nil, err
	}
	defer recoverInto(&err, "provider "+providerID+" RefreshToken")
	ts, err = p.RefreshToken(ctx, refreshToken)
	if err == nil && (ts == nil || ts.AccessToken == "") {
		err = &ProviderError{ProviderID: providerID, Err: errNoAccessToken}
	}
	return ts, err
}

// refreshFailed applies the rule: a dead grant deletes the record (the user must
// sign in again); anything else keeps it, so a transient fault loses nothing.
func (s *TokenStore) refreshFailed(ctx context.Context, userID, providerID string, err error) error {
	p, _ := s.reg.Get(providerID)
	dead := grantDead(p, err)
	s.events.emit(ctx, Event{Kind: EventRefreshFailed, UserID: userID, ProviderID: providerID, Err: err, GrantDead: dead})
	if !dead {
		return fmt.Errorf("oauthflow: refresh %s token: %w", providerID, err)
	}
	if derr := s.kv.Del(ctx, tokenKey(userID, providerID)); derr != nil {
		return storeErr("delete dead grant", derr)
	}
	return fmt.Errorf("%w: the provider refused the refresh token: %w", ErrNoToken, err)
}

// merge applies a refresh answer: a new refresh token or scope replaces the stored
// one, otherwise the stored value is kept.
func (s *TokenStore) merge(old StoredTokens, ts *TokenSet) StoredTokens {
	t := StoredTokens{AccessToken: ts.AccessToken, RefreshToken: old.RefreshToken,
		ExpiresAt: s.expiresAt(max(ts.ExpiresIn, 0)), Scope: old.Scope}
	if ts.RefreshToken != "" {
		t.RefreshToken = ts.RefreshToken
	}
	if ts.Scope != "" {
		t.Scope = ts.Scope
	}
	return t
}

// DeleteTokens disconnects the user from the provider: the provider is asked to
// revoke the grant where it can (RFC 7009), and the record is deleted even when
// that fails; the failure is reported as EventRevokeFailed.
func (s *TokenStore) DeleteTokens(ctx context.Context, userID, providerID string) error {
	if err := checkIDs(userID, providerID); err != nil {
		return err
	}
	ctx = ctxOrBackground(ctx)
	v, err := s.read(ctx, tokenKey(userID, providerID))
	switch {
	case errors.Is(err, ErrNoToken):
		return nil
	case err != nil && !errors.Is(err, ErrCorruptRecord):
		return err
	case err == nil:
		s.revoke(ctx, userID, providerID, v)
	}
	if err := s.kv.Del(ctx, tokenKey(userID, providerID)); err != nil {
		return storeErr("delete tokens", err)
	}
	s.events.emit(ctx, Event{Kind: EventTokensDeleted, UserID: userID, ProviderID: providerID})
	return nil
}

func (s *TokenStore) revoke(ctx context.Context, userID, providerID string, v tokenView) {
	p, err := s.reg.Get(providerID)
	if err != nil {
		return
	}
	r, ok := p.(Revoker)
	if !ok {
		return
	}
	token, hint := string(v.refresh), "refresh_token"
	if token == "" {
		token, hint = string(v.access), "access_token"
	}
	rctx, cancel := context.WithTimeout(ctx, s.refreshTimeout)
	defer cancel()
	if err := callRevoke(rctx, r, token, hint); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		s.events.emit(ctx, Event{Kind: EventRevokeFailed, UserID: userID, ProviderID: providerID, Err: err})
	}
}

func callRevoke(ctx context.Context, r Revoker, token, hint string) (err error) {
	defer recoverInto(&err, "RevokeToken")
	return r.RevokeToken(ctx, token, hint)
}

// TokenSource adapts the store to oauth2.TokenSource: every Token call returns a
// valid token for the user and provider, refreshing it as needed.
func (s *TokenStore) TokenSource(ctx context.Context, userID, providerID string) oauth2.TokenSource {
	return &storeTokenSource{ctx: ctxOrBackground(ctx), s: s, userID: userID, providerID: providerID}
}

type storeTokenSource struct {
	ctx                context.Context
	s                  *TokenStore
	userID, providerID string
}

func (ts *storeTokenSource) Token() (*oauth2.Token, error) {
	access, expiresAt, err := ts.s.validToken(ts.ctx, ts.userID, ts.providerID)
	if err != nil {
		return nil, err
	}
	t := &oauth2.Token{AccessToken: access, TokenType: "Bearer"}
	if expiresAt != 0 {
		t.Expiry = time.UnixMilli(expiresAt).Add(-ts.s.skew)
	}
	return t, nil
}

// Client returns an *http.Client that sends "Authorization: Bearer <token>" with
// every request, reading (and refreshing) the user's token each time.
func (s *TokenStore) Client(ctx context.Context, userID, providerID string) *http.Client {
	return &http.Client{Transport: &oauth2.Transport{Source: s.TokenSource(ctx, userID, providerID)}}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
