package oauthflow

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/flight"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/lease"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// A refresh of one user's tokens for one provider runs once at a time: once in
// this process (the flight group) and once across processes (a leased lock in
// the KV). Everything it writes is fenced: the merged record after a success
// and the delete after a dead grant land only while the record still holds the
// exact bytes the refresh read (a compare-and-set on that one key), and only
// while the lease is still the holder's. A sign-in or a disconnect in the
// meantime wins; the refresh's outcome is dropped for storage, and its callers
// get the record as it is now.

// maxRefreshRounds bounds how often one refresh re-reads a record that changed
// under it before it gives up.
const maxRefreshRounds = 3

// refresher refreshes a TokenStore's tokens at their providers: a refresh
// of one record runs once in this process (its flight group) and once
// across processes (a leased lock in the KV), waits for another process's
// as lockWait says, and keeps refreshed tokens it could not write yet
// (pending) until a later refresh or read writes them. It writes each
// connection's health, backs off a provider that keeps failing, and
// revokes what a disconnect left live.
type refresher struct {
	*tokenRecords
	refreshTimeout time.Duration
	lockLease      time.Duration
	lockWait       lockWait // how a refresh waits for another process's
	onLockWait     func()   // tests: called each time a refresh waits for another process's
	flights        flight.Group[StoredTokens]
	pending        pendingWrites
	backoff        Backoff                                      // between transient refresh failures
	onRateLimited  func(ctx context.Context, providerID string) // a provider answered 429: refresh ahead slows down
}

// refresh collapses concurrent refreshes of one record in this process, and runs
// the shared one under a context of its own so that no caller's cancellation
// ends it. seen is the record as the caller read it.
func (rf *refresher) refresh(ctx context.Context, userID, providerID string, seen []byte) (StoredTokens, error) {
	return rf.runRefresh(ctx, userID, providerID, seen, refreshWhen{})
}

// refreshRejected refreshes the user's token because an API refused rejected,
// the access token it was sent, though the record may call it valid. A
// stored token other than rejected (another caller refreshed it meanwhile) is
// returned as it is; ErrNoToken when the grant turns out dead or there is no
// refresh token.
func (rf *refresher) refreshRejected(ctx context.Context, userID, providerID, rejected string) (validRead, error) {
	raw, v, err := rf.read(ctx, keyspace.Token(userID, providerID))
	if err != nil {
		return validRead{}, err
	}
	if string(v.access) != rejected && rf.fresh(v.expiresAt) {
		return validOf(v.tokens()), nil
	}
	if len(v.refresh) == 0 {
		return validRead{}, fmt.Errorf("%w: the API refused the access token and there is no refresh token", ErrNoToken)
	}
	t, err := rf.runRefresh(ctx, userID, providerID, raw, refreshWhen{rejected: rejected})
	return validOf(t), err
}

// refreshWhen says when a record is due besides the rule (expired, or about
// to within the skew).
type refreshWhen struct {
	rejected string // an access token an API refused: due, whatever its expiry
	ahead    bool   // due though valid, unless rewritten since it was seen (withRefreshAhead)
	// answered, when set, is called as soon as the provider has answered a
	// refresh, before anything is written: a refresh ahead gives its slot
	// under the provider's limit back then, so the limit bounds requests in
	// flight at the provider, not this process's store work.
	answered func()
}

// runRefresh is refresh, where a record is also due as when says.
func (rf *refresher) runRefresh(ctx context.Context, userID, providerID string, seen []byte, when refreshWhen) (StoredTokens, error) {
	return rf.flights.Do(ctx, keyspace.Token(userID, providerID), func(publish func(StoredTokens, error)) (StoredTokens, error) {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rf.refreshTimeout)
		defer cancel()
		r := &refreshRun{rf: rf, userID: userID, providerID: providerID, key: keyspace.Token(userID, providerID), publish: publish,
			when: when}
		t, err := r.shared(rctx, seen)
		if r.unsaved != nil { // told once the lock is free, so the next read can write them
			rf.events.emit(rctx, Event{Kind: EventRefreshUnsaved, UserID: userID, ProviderID: providerID, Err: r.unsaved})
		}
		return t, err
	})
}

// refreshRun is one refresh, from taking the lock to the last write.
type refreshRun struct {
	rf                      *refresher
	userID, providerID, key string
	publish                 func(StoredTokens, error) // answers the callers before the run ends
	unsaved                 error                     // why refreshed tokens are kept unwritten, if they are
	when                    refreshWhen               // due besides the rule
	// record and meta are the token record and its health as read when the
	// lock was taken, for the first round; nil once used.
	record, meta *kv.Op
}

// readRecord is the record as read with the lock's take, the first time,
// and as read now after that.
func (r *refreshRun) readRecord(ctx context.Context) ([]byte, tokenView, error) {
	op := r.record
	if op == nil {
		return r.rf.read(ctx, r.key)
	}
	r.record = nil
	switch {
	case errors.Is(op.Err, ErrNotFound):
		return nil, tokenView{}, ErrNoToken
	case op.Err != nil:
		return nil, tokenView{}, errs.Store(ctx, "read tokens", op.Err)
	}
	v, err := r.rf.parse(op.Got, r.key)
	return op.Got, v, err
}

// readHealth is the connection's health as read with the lock's take, the
// first time, and as read now after that.
func (r *refreshRun) readHealth(ctx context.Context) connMeta {
	op := r.meta
	if op == nil {
		return r.rf.readMeta(ctx, r.userID, r.providerID)
	}
	r.meta = nil
	if op.Err != nil {
		return connMeta{}
	}
	return decodeMeta(op.Got)
}

// current is refresher.current, where the rejected token never is, and a
// refresh ahead takes only a record rewritten since the worker found it due
// (by another instance's refresh, a sign-in) as current.
func (r *refreshRun) current(raw []byte, v tokenView, seen []byte) bool {
	if r.when.rejected != "" && string(v.access) == r.when.rejected {
		return false
	}
	if r.when.ahead {
		return v.expiresAt == 0 || !bytes.Equal(raw, seen) && r.rf.fresh(v.expiresAt)
	}
	return r.rf.current(raw, v, seen)
}

// usable reports whether kept tokens can be handed out: fresh, and not the rejected token.
func (r *refreshRun) usable(t StoredTokens) bool {
	return r.rf.fresh(t.ExpiresAt) && (r.when.rejected == "" || t.AccessToken != r.when.rejected)
}

// shared takes the cross-process lock and refreshes, or, while another process
// holds it, waits until that process is done and re-reads the record. The
// waiter hears the holder's release at once where the KV can announce it
// (kv.ReleaseWatcher) and polls with a backoff in any case, slower once it listens.
func (r *refreshRun) shared(ctx context.Context, seen []byte) (StoredTokens, error) {
	lock := keyspace.Lock(r.userID, r.providerID)
	var released <-chan struct{}
	wait := r.rf.lockWait
	for backoff := wait.first; ; backoff = min(2*backoff, wait.max) {
		// The record and its health are read in the take's round trip: a
		// holder reads both before its request anyway.
		l, reads, got, err := lease.TryReading(ctx, r.rf.kv, lock, r.rf.lockLease, r.key, metaKey(r.userID, r.providerID))
		if err != nil {
			return StoredTokens{}, err
		}
		if got {
			r.record, r.meta = reads[0], reads[1]
			t, err := r.locked(ctx, l, seen)
			l.Release(ctx)
			kv.AnnounceRelease(ctx, r.rf.kv, lock)
			if !errors.Is(err, lease.ErrLost) {
				return t, err
			}
		}
		t, done, err := r.doneElsewhere(ctx, seen)
		if done || err != nil {
			return t, err
		}
		if released == nil {
			ch, stop, ok := kv.WatchRelease(ctx, r.rf.kv, lock)
			defer stop()
			if ok {
				// Look once more now that a release is heard: the holder may
				// have let go before the watch began.
				released, wait.max, backoff = ch, wait.watched, wait.watched
				continue
			}
			released = make(chan struct{}) // never receives: poll only
		}
		if r.rf.onLockWait != nil {
			r.rf.onLockWait()
		}
		if err := waitRelease(ctx, released, backoff); err != nil {
			return StoredTokens{}, fmt.Errorf("oauthflow: waiting for another instance's refresh: %w", err)
		}
	}
}

// lockWait is how a refresh waits for the lock another process holds: a
// backoff from first to max while polling only, every watched once the
// holder's release is heard directly.
type lockWait struct{ first, max, watched time.Duration }

var defaultLockWait = lockWait{first: time.Millisecond, max: 25 * time.Millisecond, watched: 250 * time.Millisecond}

// waitRelease waits for a release to be announced, d, or ctx, whichever is first.
func waitRelease(ctx context.Context, released <-chan struct{}, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-released:
		return nil
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// doneElsewhere reports whether the record no longer needs this refresh:
// someone else refreshed it, replaced it, or deleted it.
func (r *refreshRun) doneElsewhere(ctx context.Context, seen []byte) (StoredTokens, bool, error) {
	raw, v, err := r.rf.read(ctx, r.key)
	if err != nil {
		return StoredTokens{}, true, err
	}
	if pw, ok := r.rf.pendingFor(r.key, raw); ok && r.usable(pw.t) {
		return pw.t, true, nil // this process refreshed it; the write is still being retried
	}
	if !r.current(raw, v, seen) {
		return StoredTokens{}, false, nil
	}
	return v.tokens(), true, nil
}

// current reports whether a record read as raw can be handed out instead of
// refreshing the one seen: it is fresh, or it is another record that has not
// expired (a refresh elsewhere, or a sign-in, wrote it).
func (rf *refresher) current(raw []byte, v tokenView, seen []byte) bool {
	if rf.fresh(v.expiresAt) {
		return true
	}
	return !bytes.Equal(raw, seen) && rf.now().UnixMilli() < v.expiresAt
}

// locked refreshes while holding l. A round ends when a write lands, the
// record turns out current, or the provider fails; a record that changed under
// the refresh (a sign-in, a disconnect) starts the next round from a new read.
func (r *refreshRun) locked(ctx context.Context, l *lease.Lease, seen []byte) (StoredTokens, error) {
	for i := range maxRefreshRounds {
		if i > 0 {
			r.meta = nil // read afresh with the record
		}
		raw, v, err := r.readRecord(ctx)
		if err != nil {
			return StoredTokens{}, err
		}
		if r.current(raw, v, seen) {
			return v.tokens(), nil
		}
		seen = raw
		t, again, err := r.round(ctx, l, raw, v.tokens())
		if !again {
			return t, err
		}
	}
	return StoredTokens{}, fmt.Errorf("oauthflow: refresh %s token: the record changed %d times during the refresh", r.providerID, maxRefreshRounds)
}

// round refreshes the record read as raw (base: its tokens, or the newer ones
// this process could not write yet) and writes the result against raw.
func (r *refreshRun) round(ctx context.Context, l *lease.Lease, raw []byte, base StoredTokens) (t StoredTokens, again bool, err error) {
	if pw, ok := r.rf.pendingFor(r.key, raw); ok {
		if r.usable(pw.t) {
			return r.save(ctx, l, raw, pw.t) // write what the last refresh could not
		}
		base = pw.t
	}
	if base.RefreshToken == "" {
		return StoredTokens{}, false, fmt.Errorf("%w: the access token expired and there is no refresh token", ErrNoToken)
	}
	health := r.readHealth(ctx)
	if err := r.rf.coolingDown(health, base, r.providerID); err != nil {
		return StoredTokens{}, false, err
	}
	ts, err := r.rf.callRefresh(ctx, r.providerID, base)
	if err != nil {
		// A refresh ahead keeps its slot until the failure is recorded: a
		// 429 slows the fleet down before a refresh queued for the slot
		// asks whether it may go.
		again, err = r.failed(ctx, l, raw, err, health, base)
		return StoredTokens{}, again, err
	}
	if r.when.answered != nil {
		r.when.answered()
	}
	t, again, err = r.save(ctx, l, raw, r.rf.merge(r.providerID, base, ts))
	if !again && err == nil {
		r.rf.refreshed(ctx, r.userID, r.providerID, health, base, t)
	}
	return t, again, err
}

// save writes t over the record read as raw. When the store fails, the callers
// get t at once, the tokens are kept in this process, and the write is retried
// until the refresh's deadline; whatever is still unwritten then is written by
// the next refresh of this record in this process. A record deleted meanwhile
// (a disconnect) gets nothing written, and t is revoked.
func (r *refreshRun) save(ctx context.Context, l *lease.Lease, raw []byte, t StoredTokens) (StoredTokens, bool, error) {
	w := pendingWrite{conn: connRef{r.userID, r.providerID}, old: raw, oldPlain: r.rf.plainOf(raw, r.key), new: r.rf.seal(t, r.key), t: t}
	switch err := r.write(ctx, l, &w); {
	case err == nil:
		return t, false, nil
	case errors.Is(err, errRecordGone):
		return StoredTokens{}, false, r.revokeAfterDisconnect(ctx, t)
	case errors.Is(err, errSuperseded):
		return StoredTokens{}, true, nil
	case errors.Is(err, lease.ErrLost):
		r.rf.pending.keep(r.key, w)
		r.unsaved = err
		return t, false, nil
	}
	r.rf.pending.keep(r.key, w)
	r.publish(t, nil)
	r.retry(ctx, l, w)
	return t, false, nil
}

// revokeAfterDisconnect revokes t, refreshed for a record that a disconnect
// deleted while the refresh was at the provider: the disconnect revoked the
// refresh token it found, which the provider had already rotated away, so t
// is the grant's only live token and nothing else would ever revoke it.
func (r *refreshRun) revokeAfterDisconnect(ctx context.Context, t StoredTokens) error {
	r.rf.pending.drop(r.key)
	r.rf.revoke(ctx, r.userID, r.providerID, t)
	return fmt.Errorf("%w: the connection was removed during the refresh", ErrNoToken)
}

// revoke asks the provider to revoke t's grant (RFC 7009), its refresh
// token when it has one; a failure is told as EventRevokeFailed.
func (rf *refresher) revoke(ctx context.Context, userID, providerID string, t StoredTokens) {
	p, err := rf.reg.Get(providerID)
	if err != nil {
		return
	}
	r, ok := p.(Revoker)
	if !ok {
		return
	}
	token, hint := t.RefreshToken, "refresh_token"
	if token == "" {
		token, hint = t.AccessToken, "access_token"
	}
	rctx, cancel := context.WithTimeout(ctx, rf.refreshTimeout)
	defer cancel()
	if err := callRevoke(rctx, r, token, hint); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		rf.events.emit(ctx, Event{Kind: EventRevokeFailed, UserID: userID, ProviderID: providerID, Err: err})
	}
}

func callRevoke(ctx context.Context, r Revoker, token, hint string) (err error) {
	defer errs.Recover(&err, "RevokeToken")
	return r.RevokeToken(ctx, token, hint)
}

// errSuperseded means the record changed since the refresh read it.
var errSuperseded = errors.New("oauthflow: the record changed since it was read")

// errRecordGone means the record was deleted since the refresh read it.
var errRecordGone = errors.New("oauthflow: the record was deleted since it was read")

// maxReseals bounds how often one write follows the record re-sealed under it.
const maxReseals = 3

// write lands w only while l is still held and the record still holds w's
// tokens: the bytes the refresh read, or the same tokens sealed anew. A
// re-encryption (Reencrypt) changes the bytes, not the tokens, so it is not a
// newer record: the write follows it (w.old becomes the re-sealed bytes).
func (r *refreshRun) write(ctx context.Context, l *lease.Lease, w *pendingWrite) error {
	for range maxReseals {
		err := r.fencedSwap(ctx, l, w)
		if !errors.Is(err, errSuperseded) {
			return err
		}
		cur, gerr := r.rf.kv.Get(ctx, r.key)
		switch {
		case errors.Is(gerr, ErrNotFound):
			return errRecordGone
		case gerr != nil:
			return errs.Store(ctx, "read tokens", gerr)
		case !w.sameTokens(r.rf.plainOf(cur, r.key)):
			return errSuperseded
		}
		w.old = cur
	}
	return errSuperseded
}

// fencedSwap writes w.new over w.old while l is still held.
func (r *refreshRun) fencedSwap(ctx context.Context, l *lease.Lease, w *pendingWrite) error {
	held, err := l.Confirm(ctx)
	if err != nil {
		return err
	}
	if !held {
		return lease.ErrLost
	}
	ok, err := r.rf.kv.CompareAndSwap(ctx, r.key, w.old, w.new, r.rf.ttl(w.t))
	if err != nil {
		return errs.Store(ctx, "store refreshed tokens", err)
	}
	if !ok {
		return errSuperseded
	}
	if w.rotated() && !r.rf.replicated(ctx, r.key) {
		// On the master only: a failover may yet lose it. Kept, and written
		// again if the record it replaced comes back (pendingWrites.get).
		w.unconfirmed = true
		r.rf.pending.keep(r.key, *w)
	} else {
		r.rf.pending.drop(r.key)
	}
	r.rf.events.emit(ctx, Event{Kind: EventTokensRefreshed, UserID: r.userID, ProviderID: r.providerID})
	return nil
}

// retry writes w again with a growing backoff until it lands, is superseded,
// finds the record deleted (w's tokens are then revoked), the lease is lost or
// ctx ends.
func (r *refreshRun) retry(ctx context.Context, l *lease.Lease, w pendingWrite) {
	for backoff := 10 * time.Millisecond; ; backoff = min(2*backoff, time.Second) {
		if err := xcontext.Sleep(ctx, backoff); err != nil {
			r.unsaved = err
			return
		}
		err := r.write(ctx, l, &w)
		switch {
		case err == nil, errors.Is(err, errSuperseded):
			return
		case errors.Is(err, errRecordGone):
			_ = r.revokeAfterDisconnect(ctx, w.t)
			return
		case errors.Is(err, lease.ErrLost):
			r.unsaved = err
			return
		}
	}
}

// failed applies the rule: a dead grant deletes the record (the user must sign
// in again), fenced like a write; anything else keeps it, so a transient fault
// loses nothing, and is written in the connection's health record (health,
// as read before the refresh of base). again asks for a new round: the record
// changed meanwhile.
func (r *refreshRun) failed(ctx context.Context, l *lease.Lease, raw []byte, err error, health connMeta, base StoredTokens) (again bool, _ error) {
	p, _ := r.rf.reg.Get(r.providerID)
	if !grantDead(p, err) {
		r.rf.refreshFailed(ctx, r.userID, r.providerID, health, base, err)
		return false, fmt.Errorf("oauthflow: refresh %s token: %w", r.providerID, err)
	}
	held, cerr := l.Confirm(ctx)
	if cerr != nil {
		return false, cerr
	}
	if !held {
		return false, lease.ErrLost
	}
	deleted, derr := r.rf.kv.CompareAndDelete(ctx, r.key, raw)
	if derr != nil {
		return false, errs.Store(ctx, "delete dead grant", derr)
	}
	r.rf.pending.drop(r.key)
	if !deleted {
		return true, nil
	}
	r.rf.forget(ctx, r.userID, r.providerID)
	r.rf.events.emit(ctx, Event{Kind: EventRefreshFailed, UserID: r.userID, ProviderID: r.providerID, Err: err, GrantDead: true})
	return false, fmt.Errorf("%w: the provider refused the refresh token: %w", ErrNoToken, err)
}

// callRefresh refreshes old at its provider; a grant bound to a key (DPoP)
// proves it on the refresh request, with the key its record keeps.
func (rf *refresher) callRefresh(ctx context.Context, providerID string, old StoredTokens) (ts *TokenSet, err error) {
	p, err := rf.reg.Get(providerID)
	if err != nil {
		return nil, err
	}
	if old.DPoPKey != "" {
		key, err := rf.keys.get(old.DPoPKey)
		if err != nil {
			return nil, err
		}
		ctx = withProofs(ctx, key, &rf.nonces)
	}
	defer errs.Recover(&err, "provider "+providerID+" RefreshToken")
	ts, err = p.RefreshToken(ctx, old.RefreshToken)
	if err == nil && (ts == nil || ts.AccessToken == "") {
		err = &ProviderError{ProviderID: providerID, Err: errNoAccessToken}
	}
	return ts, err
}

// merge applies providerID's refresh answer: a new refresh token, scope or
// authorization details replace the stored ones, otherwise the stored ones
// are kept. The grant keeps its key; the new access token is bound to it
// when the answer says DPoP.
func (rf *refresher) merge(providerID string, old StoredTokens, ts *TokenSet) StoredTokens {
	t := StoredTokens{AccessToken: ts.AccessToken, RefreshToken: old.RefreshToken,
		ExpiresAt: rf.expiresAt(max(ts.ExpiresIn, 0)), Scope: old.Scope, DPoPKey: old.DPoPKey,
		Account: old.Account, Metadata: refreshedMetadata(old.Metadata, ts.Metadata)}
	t.AuthorizationDetails = old.AuthorizationDetails
	if d := rf.keptDetails(providerID, ts.AuthorizationDetails); d != nil {
		t.AuthorizationDetails = d
	}
	if old.DPoPKey != "" && isDPoP(ts.TokenType) {
		t.TokenType = tokenTypeDPoP
	}
	if ts.RefreshToken != "" {
		t.RefreshToken = ts.RefreshToken
	}
	if ts.Scope != "" {
		t.Scope = ts.Scope
	}
	return t
}

// connRef names a connection: one user's grant from one provider.
type connRef struct{ userID, providerID string }

// pendingWrite is a refreshed record this process could not write yet: new
// lands only over old, the record the refresh read (oldPlain: old opened).
type pendingWrite struct {
	conn               connRef // whose record it is
	old, oldPlain, new []byte
	t                  StoredTokens
	unconfirmed        bool // written, but not on the replicas WithReplicaAcks asks for
}

// rotated reports whether w replaces the refresh token of the record it
// was refreshed from.
func (w pendingWrite) rotated() bool {
	if w.oldPlain == nil {
		return true
	}
	v, err := parseTokenView(w.oldPlain)
	return err != nil || string(v.refresh) != w.t.RefreshToken
}

// pendingWrites holds, per token key, the refreshed record that is not written
// yet, so that a rotated refresh token is never dropped by a store blip. The
// zero value is ready.
type pendingWrites struct {
	mu sync.Mutex
	m  map[string]pendingWrite
}

func (p *pendingWrites) keep(key string, w pendingWrite) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = make(map[string]pendingWrite)
	}
	p.m[key] = w
}

// get returns the pending write for key while the record still holds what it
// was refreshed from: the same bytes, or the same tokens sealed anew (a
// re-encryption changes the bytes, not the tokens). open gives the plain form
// of raw, nil when it has none. One that the world has moved past is dropped.
func (p *pendingWrites) get(key string, raw []byte, open func([]byte) []byte) (pendingWrite, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.m[key]
	if ok && w.unconfirmed && bytes.Equal(w.new, raw) {
		return pendingWrite{}, false // in the store; kept until its replicas have it or a failover loses it
	}
	if ok && !bytes.Equal(w.old, raw) && !w.sameTokens(open(raw)) {
		delete(p.m, key)
		return pendingWrite{}, false
	}
	return w, ok
}

// peek returns the pending write for key, whatever the record holds now.
func (p *pendingWrites) peek(key string) (pendingWrite, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.m[key]
	return w, ok
}

func (p *pendingWrites) drop(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// pendingFor is the write this process keeps for key while the record read as
// raw still holds the tokens it was refreshed from.
func (rf *refresher) pendingFor(key string, raw []byte) (pendingWrite, bool) {
	return rf.pending.get(key, raw, func(b []byte) []byte { return rf.plainOf(b, key) })
}

// appliesTo reports whether w still applies to the record read as raw
// (plain: raw opened, nil when it does not open): the record w was
// refreshed from, as read or sealed anew.
func (w pendingWrite) appliesTo(raw, plain []byte) bool {
	return bytes.Equal(w.old, raw) || w.sameTokens(plain)
}

// sameTokens reports whether plain is the record w was refreshed from.
func (w pendingWrite) sameTokens(plain []byte) bool {
	return w.oldPlain != nil && plain != nil && bytes.Equal(w.oldPlain, plain)
}

// unwritten names the connections whose rotated refresh token is kept
// here and not in the store (a write already in the store, waiting for its
// replicas, is not one), in a stable order.
func (p *pendingWrites) unwritten() []connRef {
	p.mu.Lock()
	defer p.mu.Unlock()
	var refs []connRef
	for _, w := range p.m {
		if !w.unconfirmed && w.rotated() {
			refs = append(refs, w.conn)
		}
	}
	slices.SortFunc(refs, func(a, b connRef) int {
		return cmp.Or(strings.Compare(a.userID, b.userID), strings.Compare(a.providerID, b.providerID))
	})
	return refs
}

// maxNamedUnwritten bounds the connections Close's error names one by one.
const maxNamedUnwritten = 10

// unwrittenErr reports the rotated refresh tokens this process keeps
// unwritten: a store failure outlasted the refreshes' retries, and no read
// of the connection has written them since. The provider has spent the
// tokens the store holds, so they are the grants' only live tokens, and
// they are lost with the process. It names the connections, never a token.
func (rf *refresher) unwrittenErr() error {
	refs := rf.pending.unwritten()
	if len(refs) == 0 {
		return nil
	}
	var names []string
	for _, c := range refs[:min(len(refs), maxNamedUnwritten)] {
		names = append(names, fmt.Sprintf("user %q provider %q", c.userID, c.providerID))
	}
	if more := len(refs) - len(names); more > 0 {
		names = append(names, fmt.Sprintf("and %d more", more))
	}
	return fmt.Errorf("%w: %d connection(s) hold a rotated refresh token that only this process has (the store failed "+
		"past the refresh's retries); it is lost when the process exits, and those users must sign in again: %s",
		ErrStoreUnavailable, len(refs), strings.Join(names, ", "))
}

// Health: what the refreshes of a connection have told. Each connection has a
// small plain record beside its tokens, oauth:meta:{user}:{provider}, written
// by the refresh that holds the connection's lock: when it last refreshed,
// and, while refreshes fail transiently, how often they failed in a row, the
// last error (as the logs give it: never a token or a response body) and when
// the next attempt may call the provider. Until then a refresh answers a
// refreshFailingError at once instead of calling a provider that is down, so a
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
	return string(keyspace.AppendUserKey(buf[:0], "oauth:meta:", userID, providerID))
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
func (rf *refresher) readMeta(ctx context.Context, userID, providerID string) connMeta {
	b, err := rf.kv.Get(ctx, metaKey(userID, providerID))
	if err != nil {
		return connMeta{}
	}
	return decodeMeta(b)
}

// writeMeta stores m. A failure is logged and otherwise ignored: the tokens
// are what matters, and the next refresh writes the record again.
func (rf *refresher) writeMeta(ctx context.Context, userID, providerID string, m connMeta) {
	b, _ := json.Marshal(m)
	if err := rf.kv.Set(ctx, metaKey(userID, providerID), b, refreshableTokenTTL); err != nil && rf.events.log != nil {
		rf.events.log.WarnContext(ctx, "oauthflow: the connection's health could not be written",
			"provider", providerID, "error", err.Error())
	}
}

// coolingDown is the error for a refresh of base that must wait: m says its
// refreshes failed and the next attempt is not due; nil when it may go on.
func (rf *refresher) coolingDown(m connMeta, base StoredTokens, providerID string) error {
	if m.Failures == 0 || !m.about(fingerprint(base)) || rf.now().UnixMilli() >= m.NextAttempt {
		return nil
	}
	return &refreshFailingError{ProviderID: providerID, Attempts: m.Failures, LastError: m.LastError,
		NextAttempt: time.UnixMilli(m.NextAttempt)}
}

// refreshFailed records a transient failure of the refresh of base, m being
// the health record as it was read, and tells the hook.
func (rf *refresher) refreshFailed(ctx context.Context, userID, providerID string, m connMeta, base StoredTokens, cause error) {
	fp, now := fingerprint(base), rf.now()
	next := connMeta{Tokens: fp, Failures: 1, LastError: logSafeError(cause), FailedAt: now.UnixMilli()}
	if m.about(fp) {
		next.RefreshedAt, next.Failures = m.RefreshedAt, m.Failures+1
	}
	next.NextAttempt = now.Add(rf.backoff.after(next.Failures, fp)).UnixMilli()
	rf.writeMeta(ctx, userID, providerID, next)
	if rateLimited(cause) {
		rf.onRateLimited(ctx, providerID) // the provider says too many: the whole fleet holds back
	}
	rf.events.emit(ctx, Event{Kind: EventRefreshFailed, UserID: userID, ProviderID: providerID, Err: cause,
		Attempts: next.Failures})
	if next.Failures == 1 {
		rf.events.emit(ctx, Event{Kind: EventConnectionFailing, UserID: userID, ProviderID: providerID, Err: cause,
			Attempts: 1})
	}
}

// rateLimited reports whether err is a provider's 429.
func rateLimited(err error) bool { return providerStatus(err) == http.StatusTooManyRequests }

// refreshed records a successful refresh of base into t, m being the health
// record as it was read, and tells the hook when it ends a run of failures.
func (rf *refresher) refreshed(ctx context.Context, userID, providerID string, m connMeta, base, t StoredTokens) {
	rf.writeMeta(ctx, userID, providerID, connMeta{Tokens: fingerprint(t), RefreshedAt: rf.now().UnixMilli()})
	if m.Failures > 0 && m.about(fingerprint(base)) {
		rf.events.emit(ctx, Event{Kind: EventConnectionRecovered, UserID: userID, ProviderID: providerID,
			Attempts: m.Failures})
	}
}

// forget deletes the health record of a connection that is gone.
func (rf *refresher) forget(ctx context.Context, userID, providerID string) {
	if err := rf.kv.Del(ctx, metaKey(userID, providerID)); err != nil && !errors.Is(err, ErrNotFound) && rf.events.log != nil {
		rf.events.log.WarnContext(ctx, "oauthflow: the health record of a closed connection could not be deleted",
			"provider", providerID, "error", err.Error())
	}
}
