package oauthflow

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/suggest"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Default timings.
const (
	defaultSkew           = 60 * time.Second
	defaultRefreshTimeout = 30 * time.Second
	defaultLockLease      = 10 * time.Second
)

// TokenStore keeps tokens per user and provider and refreshes them on read.
// Several TokenStores over one Redis (app replicas) refresh a token once between them.
type TokenStore struct {
	tokenRecords              // its records, shared with the refresher and refresh ahead
	refresher    refresher    // refreshes on read, once between processes
	ahead        refreshAhead // refreshes before expiry (withRefreshAhead, withRefreshLimits)
	direct       directKV     // kv without its key prefix, for the hot read
	ownClock     bool         // WithClock set a clock other than time.Now
}

// TokenStoreOption configures a TokenStore.
type TokenStoreOption func(*TokenStore)

// WithClock sets the clock (default time.Now).
func WithClock(now func() time.Time) TokenStoreOption {
	return func(s *TokenStore) {
		if now != nil {
			s.now, s.ownClock = now, true
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

// withEventHook sets the hook that hears tokens stored, refreshed, refresh failed and deleted.
func withEventHook(h EventHook) TokenStoreOption { return func(s *TokenStore) { s.events.hook = h } }

// withRefreshTimeout bounds one refresh at the provider, whoever waits for it (default 30 s).
func withRefreshTimeout(d time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if d > 0 {
			s.refresher.refreshTimeout = d
		}
	}
}

// withLockLease sets the lease of the cross-process refresh lock (default 10 s, at least 1 ms);
// it is renewed while the refresh runs, and frees itself if the process dies.
func withLockLease(d time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if d > 0 {
			s.refresher.lockLease = max(d, time.Millisecond)
		}
	}
}

// withRefreshBackoff sets how long a connection whose refresh failed
// transiently waits before a refresh calls the provider again; until then a
// refresh fails at once with a refreshFailingError.
// A zero field takes the default's: First 2 s, Max 5 min, Jitter 0.2.
func withRefreshBackoff(b Backoff) TokenStoreOption {
	return func(s *TokenStore) { s.refresher.backoff = b.orDefault() }
}

// WithEncryption seals the token records this store writes with ring's
// current key, and opens records sealed under any of its keys (see KeyRing).
// Plain records are still read. nil: records are written plain.
func WithEncryption(ring *KeyRing) TokenStoreOption {
	checkRing(ring)
	return func(s *TokenStore) { s.ring = ring.sealer() }
}

// WithReplicaAcks makes writes that hold a rotated refresh token or a new
// sign-in's tokens wait until n replicas of the key's master have them, at
// most timeout each (Redis WAIT). 0 turns it off (the default). Only a
// RedisKV (or one wrapped by WithKeyPrefix) can wait; other stores ignore it.
func WithReplicaAcks(n int, timeout time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if n > 0 && timeout > 0 {
			s.acks, s.ackTimeout = n, timeout
		}
	}
}

// withRefreshAhead makes the store keep connections that are read due for a
// refresh ahead time before their access tokens expire, and refresh them
// when a Module's worker finds them due (the Module does this for
// Config.RefreshAhead). ahead is raised to twice the skew when it is less, so
// that the worker comes before the reads would. A connection not read for
// idle (0: 7 days) is left to refresh on read.
func withRefreshAhead(ahead, idle time.Duration) TokenStoreOption {
	return func(s *TokenStore) {
		if ahead <= 0 {
			s.ahead.before = 0 // off
			return
		}
		s.ahead.before, s.ahead.idle = ahead, orDefault(idle, defaultRefreshAheadIdle)
	}
}

// orDefault is d, or def when d is not positive.
func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

// withRefreshLimits sets the refresh-ahead limits of providers by ID; the
// limit under "" applies to every provider not named.
func withRefreshLimits(limits map[string]RefreshLimit) TokenStoreOption {
	return func(s *TokenStore) {
		s.ahead.limiter.limits = limits
	}
}

// NewTokenStore returns a TokenStore over kv that refreshes through the providers in reg.
func NewTokenStore(kv KV, reg *Registry, opts ...TokenStoreOption) *TokenStore {
	if reg == nil {
		reg = NewRegistry()
	}
	s := &TokenStore{tokenRecords: tokenRecords{kv: storeOf(kv), reg: reg, now: time.Now, skew: defaultSkew,
		events: notifier{log: slog.Default()}}}
	s.refresher = refresher{tokenRecords: &s.tokenRecords, refreshTimeout: defaultRefreshTimeout,
		lockLease: defaultLockLease, lockWait: defaultLockWait, backoff: defaultRefreshBackoff, onRateLimited: s.ahead.slowDown}
	s.ahead.refresher = &s.refresher
	s.refresher.flights.Name = "refresh"
	for _, o := range opts {
		o(s)
	}
	s.events.now = s.now
	s.ahead.limiter.Store, s.ahead.limiter.Now = s.kv, s.now
	s.direct = directKVOf(s.kv)
	s.direct.sameClock = s.direct.mem != nil && s.direct.mem.OnSystemClock() && !s.ownClock
	if s.ahead.on() {
		s.ahead.before = max(s.ahead.before, 2*s.skew)
	}
	return s
}

// StoreTokens writes t for the user and provider with the TTL the rules give:
// 30 days with a refresh token or without expiry, else the seconds left (at least 1).
// A sign-in always wins over a refresh in flight: the refresh finds the record
// replaced and writes nothing. Authorization details are kept compact, and
// refused with ErrInvalidArgument unless they are a JSON array of objects,
// each with a non-empty string "type", of at most 16 KiB.
func (s *TokenStore) StoreTokens(ctx context.Context, userID, providerID string, t StoredTokens) error {
	w, err := s.newWrite(userID, providerID, t)
	if err != nil {
		return err
	}
	ctx = xcontext.OrBackground(ctx)
	kv.RunBatch(ctx, s.kv, w.ops...)
	return w.landed(ctx)
}

// tokensWrite is one write of a connection's tokens: its commands, sent in
// one batch, and what follows once they have run (landed).
type tokensWrite struct {
	s                  *TokenStore
	userID, providerID string
	refresh            bool // the tokens hold a refresh token
	now                time.Time
	set                *kv.Op   // the record
	marks              []*kv.Op // refresh ahead's marks, when it is on
	ops                []*kv.Op // the record, the user's connection index, the marks
}

// newWrite checks t (StoreTokens) and readies its write: the record and, in
// the same round trip, the provider's entry in the user's connection index
// ([TokenStore.Connections]). An index write that fails is repaired by the
// next listing.
func (s *TokenStore) newWrite(userID, providerID string, t StoredTokens) (*tokensWrite, error) {
	if err := keyspace.CheckIDs(userID, providerID); err != nil {
		return nil, err
	}
	if t.AccessToken == "" || t.ExpiresAt < 0 {
		return nil, errs.Invalid("tokens need an access token and a non-negative expiresAt")
	}
	if t.TokenType != "" && (t.TokenType != tokenTypeDPoP || t.DPoPKey == "") {
		return nil, errs.Invalid(`tokenType is "" (Bearer) or "DPoP" with the key it is bound to`)
	}
	details, err := grantedDetails(t.AuthorizationDetails)
	if err != nil {
		return nil, errs.Invalid("%w", err)
	}
	t.AuthorizationDetails = details
	key := keyspace.Token(userID, providerID)
	w := &tokensWrite{s: s, userID: userID, providerID: providerID, refresh: t.RefreshToken != "", now: s.now()}
	w.set = &kv.Op{Kind: kv.OpSet, Key: key, Value: s.seal(t, key), TTL: s.ttl(t)}
	w.ops = []*kv.Op{w.set, {Kind: kv.OpSchedule, Key: keyspace.ConnIndex(userID), Member: providerID, Due: w.now}}
	if s.ahead.on() && t.RefreshToken != "" && t.ExpiresAt != 0 { // a sign-in counts as a read
		w.marks = s.ahead.markOps(userID, providerID, w.now, t.ExpiresAt)
		w.ops = append(w.ops, w.marks...)
	}
	return w, nil
}

// landed reads w's results once its batch has run: the record's failure is
// the write's; marks that landed are remembered, a grant with a refresh
// token waits for the replicas asked for (a shortfall is logged: the tokens
// are stored on the master), and the hook hears the tokens stored.
func (w *tokensWrite) landed(ctx context.Context) error {
	s := w.s
	if w.set.Err != nil {
		return errs.Store(ctx, "store tokens", w.set.Err)
	}
	if w.marks != nil && w.marks[0].Err == nil && w.marks[1].Err == nil {
		s.ahead.remember(connRef{w.userID, w.providerID}, w.now)
	}
	if w.refresh {
		s.replicated(ctx, w.set.Key)
	}
	s.refresher.pending.drop(w.set.Key)
	s.events.emit(ctx, Event{Kind: EventTokensStored, UserID: w.userID, ProviderID: w.providerID})
	return nil
}

// StoreFromTokenSet stores a provider's answer, turning expiresIn into expiresAt.
// A DPoP-bound answer is refused: only a sign-in the library ran holds the
// key its token is bound to.
func (s *TokenStore) StoreFromTokenSet(ctx context.Context, userID, providerID string, ts *TokenSet) error {
	t, err := s.fromTokenSet(providerID, ts, "")
	if err != nil {
		return err
	}
	return s.StoreTokens(ctx, userID, providerID, t)
}

// grantWriteTimeout bounds the write of a sign-in's new grant (besides the
// wait for replicas, Config.MinReplicas).
const grantWriteTimeout = 10 * time.Second

// storeTokenSet stores the grant a sign-in the library ran was given, for
// requests that proved key (encoded; "" when they carried no proof). The
// provider has issued the grant and its code is spent, so the write runs
// under ctx's values only, with a deadline of its own: a caller that left,
// or whose time ran out while the account was read, does not cost the user
// the sign-in.
func (s *TokenStore) storeTokenSet(ctx context.Context, userID, providerID string, ts *TokenSet, key string) error {
	t, err := s.fromTokenSet(providerID, ts, key)
	if err != nil {
		return err
	}
	ctx, cancel := s.grantWriteContext(ctx)
	defer cancel()
	return s.StoreTokens(ctx, userID, providerID, t)
}

// grantWriteContext is ctx's values with a deadline of their own, for the
// write of a sign-in's grant (storeTokenSet).
func (s *TokenStore) grantWriteContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(xcontext.ValuesOnly(ctx), grantWriteTimeout+s.ackTimeout)
}

// signInWrite readies the write of the grant a sign-in the library ran was
// given (storeTokenSet), for a batch that sends it later.
func (s *TokenStore) signInWrite(userID, providerID string, ts *TokenSet, key string) (*tokensWrite, error) {
	t, err := s.fromTokenSet(providerID, ts, key)
	if err != nil {
		return nil, err
	}
	return s.newWrite(userID, providerID, t)
}

// fromTokenSet is the record of a provider's answer, for requests that
// proved key.
func (s *TokenStore) fromTokenSet(providerID string, ts *TokenSet, key string) (StoredTokens, error) {
	if ts == nil {
		return StoredTokens{}, errs.Invalid("nil token set")
	}
	if ts.ExpiresIn < 0 {
		return StoredTokens{}, errs.Invalid("negative expiresIn")
	}
	t := StoredTokens{AccessToken: ts.AccessToken, RefreshToken: ts.RefreshToken,
		ExpiresAt: s.expiresAt(ts.ExpiresIn), Scope: ts.Scope, DPoPKey: key,
		Account: showable(ts.Account, maxAccountLen), Metadata: keptMetadata(ts.Metadata)}
	t.AuthorizationDetails = s.keptDetails(providerID, ts.AuthorizationDetails)
	if isDPoP(ts.TokenType) {
		if key == "" {
			return StoredTokens{}, &ProviderError{ProviderID: providerID, Err: errors.New("a DPoP-bound token for a request that proved no key")}
		}
		t.TokenType = tokenTypeDPoP
	}
	return t, nil
}

// GetTokens returns the stored record, which may be expired; ErrNoToken when absent.
// Tokens this process refreshed but could not write yet are returned in its place.
func (s *TokenStore) GetTokens(ctx context.Context, userID, providerID string) (*StoredTokens, error) {
	if err := keyspace.CheckIDs(userID, providerID); err != nil {
		return nil, err
	}
	ctx = xcontext.OrBackground(ctx)
	key := keyspace.Token(userID, providerID)
	// The kept write is also looked up before the read: one that lands in
	// between is dropped by then, and the record read is the one it replaced.
	before, kept := s.refresher.pending.peek(key)
	raw, v, err := s.read(ctx, key)
	if err != nil {
		return nil, s.absent(providerID, err)
	}
	t := v.tokens()
	if pw, ok := s.refresher.pendingFor(key, raw); ok {
		t = pw.t
	} else if kept && before.appliesTo(raw, s.plainOf(raw, key)) {
		t = before.t
	}
	return &t, nil
}

// GetValidAccessToken returns an access token that is valid now, refreshing it
// through the provider when it has expired and a refresh token exists. ErrNoToken
// (possibly wrapping the provider's answer) means the user must sign in; any other
// error is transient and the stored record is kept. When ctx ends first, its
// error is returned (errors.Is(err, context.Canceled) holds).
//
// A caller that needs scopes names them: when the stored grant lacks any of
// them it returns a *ScopeError (an ErrNoToken) naming them, and does not
// refresh, since a refresh never widens a grant. A grant whose scope is
// unknown (stored empty) is taken to have them.
func (s *TokenStore) GetValidAccessToken(ctx context.Context, userID, providerID string, scopes ...string) (string, error) {
	t, err := s.validToken(ctx, userID, providerID, scopes)
	return t.access, err
}

// validToken is the token valid now and its expiry; need, when given, are
// scopes the grant must hold (a [ScopeError] when it lacks some). With
// refresh ahead, a read marks the connection read (markRead).
func (s *TokenStore) validToken(ctx context.Context, userID, providerID string, need []string) (validRead, error) {
	if err := keyspace.CheckIDs(userID, providerID); err != nil {
		return validRead{}, err
	}
	if len(need) == 0 {
		if t, now := s.direct.memoryToken(s, userID, providerID); t != nil {
			if s.ahead.on() {
				s.ahead.markMemo(xcontext.OrBackground(ctx), t, now, userID, providerID)
			}
			return validRead{access: t.access, expiresAt: t.expiresAt, key: t.key}, nil
		}
	}
	r, err := s.storedToken(ctx, userID, providerID, need)
	if s.ahead.on() && err == nil {
		s.ahead.markRead(xcontext.OrBackground(ctx), userID, providerID, r.expiresAt)
	}
	return r, err
}

// absent is err, a failed read, unless it found no record for a provider
// the registry does not know: that is ErrUnknownProvider (a mistyped ID, a
// provider not registered), not ErrNoToken, which sends the user to a
// sign-in that cannot work.
func (s *TokenStore) absent(providerID string, err error) error {
	if errors.Is(err, ErrNoToken) && !s.reg.knows(providerID) {
		return fmt.Errorf("%w: %q%s", ErrUnknownProvider, providerID, suggest.Hint(providerID, s.reg.IDs()))
	}
	return err
}

// storedToken is validToken read from the store (or refreshed), apart from
// the memory fast path and the mark.
func (s *TokenStore) storedToken(ctx context.Context, userID, providerID string, need []string) (validRead, error) {
	ctx = xcontext.OrBackground(ctx)
	key := s.direct.tokenKey(userID, providerID)
	raw, v, err := s.readFrom(ctx, s.direct.kv, key, key[len(s.direct.prefix):])
	if err != nil {
		return validRead{}, s.absent(providerID, err)
	}
	if len(need) > 0 {
		if err := lacking(providerID, v.scope, need); err != nil {
			return validRead{}, err
		}
	}
	if s.fresh(v.expiresAt) {
		// raw (or what it opened to) is this call's own and nothing writes it
		// (KV.Get's contract): the token can be a view of it instead of a copy.
		return validRead{access: unsafeString(v.access), expiresAt: v.expiresAt, key: unsafeString(v.boundKey())}, nil
	}
	if len(v.refresh) == 0 {
		return validRead{}, fmt.Errorf("%w: the access token expired and there is no refresh token", ErrNoToken)
	}
	t, err := s.refresher.refresh(ctx, userID, providerID, raw)
	return validOf(t), err
}

// unsafeString is b as a string without a copy: b must never be written again.
func unsafeString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// DeleteTokens disconnects the user from the provider: the record is deleted,
// and the provider is asked to revoke the grant where it can (RFC 7009), even
// when that fails; the failure is reported as EventRevokeFailed. With no
// record it returns nil, or ErrUnknownProvider when the registry does not
// know providerID either (a mistyped ID); the record of a provider the app no
// longer registers is deleted, without revocation. A disconnect
// always wins over a refresh in flight and leaves none of the grant's tokens
// valid: it deletes only the record it read and revokes that record's
// tokens (a refresh that wrote meanwhile is read again), and a refresh that
// then finds the record gone revokes the tokens it got.
func (s *TokenStore) DeleteTokens(ctx context.Context, userID, providerID string) error {
	if err := keyspace.CheckIDs(userID, providerID); err != nil {
		return err
	}
	ctx = xcontext.OrBackground(ctx)
	key := keyspace.Token(userID, providerID)
	for range maxRefreshRounds {
		done, err := s.deleteRead(ctx, userID, providerID, key)
		if err != nil || done {
			return err
		}
	}
	return fmt.Errorf("oauthflow: disconnect %s: the record changed %d times during the disconnect", providerID, maxRefreshRounds)
}

// deleteRead deletes the record under key if it still holds what it is read
// as now, then revokes its tokens. done is false when it changed in between.
func (s *TokenStore) deleteRead(ctx context.Context, userID, providerID, key string) (done bool, _ error) {
	raw, v, err := s.read(ctx, key)
	switch {
	case errors.Is(err, ErrNoToken):
		s.refresher.pending.drop(key)
		if !s.reg.knows(providerID) {
			return true, s.absent(providerID, err) // nothing stored for a provider nobody registered: a typo
		}
		return true, nil
	case err != nil && !errors.Is(err, errCorruptRecord):
		return false, err
	}
	t, corrupt := v.tokens(), err != nil
	if pw, ok := s.refresher.pendingFor(key, raw); ok && !corrupt {
		t = pw.t
	}
	deleted, err := s.kv.CompareAndDelete(ctx, key, raw)
	if err != nil {
		return false, errs.Store(ctx, "delete tokens", err)
	}
	if !deleted {
		return false, nil
	}
	if !corrupt {
		s.refresher.revoke(ctx, userID, providerID, t)
	}
	// A failure is repaired by the next listing, and refresh ahead's note of
	// the last read by its worker, which finds the record gone.
	kv.RunBatch(ctx, s.kv, &kv.Op{Kind: kv.OpUnschedule, Key: keyspace.ConnIndex(userID), Member: providerID},
		&kv.Op{Kind: kv.OpUnschedule, Key: keyspace.ConnIndex(userID), Member: seenMember(providerID)})
	s.refresher.forget(ctx, userID, providerID)
	s.refresher.pending.drop(key)
	s.events.emit(ctx, Event{Kind: EventTokensDeleted, UserID: userID, ProviderID: providerID})
	return true, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24)
	return hex.EncodeToString(b)
}

// directKV is the store under a TokenStore's KV with any key prefix taken off,
// which the hot read asks directly. Through the prefix a read pays for two key
// strings; here it builds one, in a stack buffer. Over a MemoryKV it pays for
// nothing at all: no key string, no access-token string, no decode, because the
// decoded record is kept beside the stored value (kv.Memory.GetMemo).
type directKV struct {
	kv     kv.Store
	mem    *kv.Memory // kv, when it is a MemoryKV's
	prefix string
	// sameClock: mem and the TokenStore both read time.Now, so the time
	// mem found a record live at is the read's now, and the hot read asks
	// the clock once (on some machines a clock reading is most of the read).
	sameClock bool
}

func directKVOf(store kv.Store) directKV {
	d := directKV{}
	d.kv, d.prefix = kv.Unprefixed(store)
	d.mem, _ = d.kv.(*kv.Memory)
	return d
}

// tokenKey is the token record's key as the store under the prefix names it.
func (d directKV) tokenKey(userID, providerID string) string {
	var buf [128]byte
	return string(keyspace.AppendToken(append(buf[:0], d.prefix...), userID, providerID))
}

// memoryToken returns the stored record's decoded form when the store is a
// MemoryKV and its token is valid now (the time it read); nil in every other
// case (no record, a corrupt or expired one), which the caller handles the
// general way.
func (d directKV) memoryToken(s *TokenStore, userID, providerID string) (*tokenMemo, time.Time) {
	if d.mem == nil {
		return nil, time.Time{}
	}
	var buf [128]byte
	key := keyspace.AppendToken(append(buf[:0], d.prefix...), userID, providerID)
	// The name is copied on the slow path only, so key stays in buf.
	_, memo, now, ok := d.mem.GetMemoAt(key, func(b []byte) any { return s.decodeMemo(string(key[len(d.prefix):]), b) })
	t, _ := memo.(*tokenMemo)
	if !ok || t == nil || t.ring != s.ring {
		return nil, time.Time{}
	}
	if !d.sameClock {
		now = s.now()
	}
	if t.expiresAt != 0 && now.Add(s.skew).UnixMilli() >= t.expiresAt { // not fresh
		return nil, time.Time{}
	}
	return t, now
}

// Scope step-up. A tool that needs scopes reads its token with
// GetValidAccessToken, naming them; when the stored grant lacks some, the read fails
// with a *ScopeError (which is ErrNoToken), the tool answers unauthorized with
// the scopes to ask for, and the consumer launches the "oauth" workflow with
// them: the union of what was granted and what is missing, so the new grant
// keeps the old one's reach. The record stores what the provider granted.

// ScopeError is a stored grant that lacks scopes a caller needs: what
// [TokenStore.GetValidAccessToken] returns when given scopes the grant lacks.
// It matches ErrNoToken with errors.Is: the user must sign in again, asking
// for Scopes().
type ScopeError struct {
	ProviderID string
	Granted    []string // the stored grant's scopes
	Missing    []string // needed and not granted, in the order asked
}

func (e *ScopeError) Error() string {
	return "oauthflow: the " + e.ProviderID + " grant lacks scopes: " + strings.Join(e.Missing, " ")
}

// Unwrap makes a ScopeError an ErrNoToken.
func (e *ScopeError) Unwrap() error { return ErrNoToken }

// Scopes is what a new sign-in should ask for: the granted scopes, then the missing ones.
func (e *ScopeError) Scopes() []string { return slices.Concat(e.Granted, e.Missing) }

// lacking returns the error for a grant with scope (space-separated) read by a
// caller that needs need, or nil when nothing is missing.
func lacking(providerID string, scope []byte, need []string) error {
	granted := strings.Fields(string(scope))
	if len(granted) == 0 {
		return nil
	}
	var missing []string
	for _, s := range need {
		if s != "" && !slices.Contains(granted, s) && !slices.Contains(missing, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &ScopeError{ProviderID: providerID, Granted: granted, Missing: missing}
}
