package oauthflow

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/ratelimit"
	"github.com/oauthflow/oauthflow/internal/worker"
)

// Refresh ahead: with withRefreshAhead (Config.RefreshAhead) the Module's
// background worker refreshes a connection's tokens before they expire, so
// reads never wait on the provider. Each connection that is read has an
// entry "a:{provider}:{user}" in the worker's due index, due the given
// time before its access token expires. Claiming the entry leases it to one
// instance; the refresh itself takes the same lock and writes through the
// same fenced compare-and-swap as a refresh on read, so however many
// instances run, a due connection is refreshed once.
//
// Reads are what keep a connection alive: a sign-in, and then a read at most
// every idle/8 per instance (an in-process memo keeps the hot read free of
// store commands in between), note when the connection was last read in its
// user's connection index, as the score (Unix ms) of a member "seen:{provider}"
// beside the provider's own. A user's index is small, so Redis keeps it as a
// listpack, where that costs about 25 bytes; one shared sorted set of every
// connection's last read cost 118 (BENCHMARKS.md, Scale). A connection not read for
// idle is left alone: its entry waits until its record would have lapsed
// (refreshableTokenTTL after the last read), and the next read brings it
// forward again. A connection that is gone (deleted, dead grant, no refresh
// token) leaves both indexes.

// defaultRefreshAheadIdle is how long refresh ahead keeps a connection alive
// without a read.
const defaultRefreshAheadIdle = 7 * 24 * time.Hour

const (
	// jobAhead is refresh ahead's kind of due work: an entry is
	// "a:{provider}:{user}". The kind is one letter because the due index
	// holds an entry a connection, and Redis keeps each byte of it.
	jobAhead = "a"
	// jobAheadLegacy is the kind earlier versions wrote, "ahead:{provider}:{user}":
	// such an entry still runs, and leaves the index for one of jobAhead's.
	jobAheadLegacy = "ahead"
	seenPrefix     = "seen:" // a connection index member "seen:{provider}": when it was last read
)

// seenMember names, in its user's connection index, when a provider's
// connection was last read. Provider IDs never hold ":", so no provider's
// own member looks like it.
func seenMember(providerID string) string { return seenPrefix + providerID }

// refreshAhead is a TokenStore's refresh ahead: the marks that keep a
// connection that is read in the worker's due index, the worker's job that
// refreshes it there before its access token expires, and the limits that
// keep the fleet's refreshes ahead polite to each provider. Off (before 0),
// its job only takes entries out of the index, and a provider's 429 still
// slows down the refreshes ahead that other instances run.
type refreshAhead struct {
	*refresher
	before, idle time.Duration  // before 0: off
	limiter      refreshLimiter // bounds on refreshes ahead per provider (withRefreshLimits)

	mu     sync.RWMutex
	marked map[connRef]int64 // when this process last marked a connection read (Unix ms)
	pruned int               // len(marked) after the last prune
}

// on reports whether refresh ahead is on (withRefreshAhead).
func (a *refreshAhead) on() bool { return a.before > 0 }

// member names a connection in the due and seen indexes; provider IDs never
// hold ":", so it splits one way only.
func aheadMember(userID, providerID string) string { return providerID + ":" + userID }

// aheadProvider is the provider of a refresh ahead's entry
// "{provider}:{user}": the worker's share of one provider's refreshes ahead.
func aheadProvider(member string) string {
	providerID, _, _ := strings.Cut(member, ":")
	return providerID
}

// aheadShare is the worker's share for refreshes ahead: a kind's, and a
// group's for each provider, so that a provider whose endpoint hangs leaves
// the worker to the others.
var aheadShare = worker.Share{Most: worker.KindShare, Group: aheadProvider, GroupMost: worker.GroupShare}

// dueIndex is the worker's index of due work, where the library's jobs
// write their entries in batches of their own.
const dueIndex = worker.Index

// markEvery is how often one process marks a connection read.
func (a *refreshAhead) markEvery() time.Duration { return a.idle / 8 }

// due is when tokens expiring at expiresAt (Unix ms) are refreshed.
func (a *refreshAhead) due(expiresAt int64) time.Time {
	return time.UnixMilli(expiresAt).Add(-a.before)
}

// next is when tokens refreshed at now, expiring at expiresAt, are due: the
// ahead time before they expire, or halfway there for tokens that live less
// than the ahead time, which would otherwise be refreshed by every pass.
func (a *refreshAhead) next(now time.Time, expiresAt int64) time.Time {
	due, half := a.due(expiresAt), now.Add(time.UnixMilli(expiresAt).Sub(now)/2)
	if due.Before(half) {
		return half
	}
	return due
}

// markOps are the commands that mark a connection read at now, its tokens
// expiring at expiresAt: when it was seen first, so that a worker that finds
// the due entry moved can tell a read came (see postponeIdle).
func (a *refreshAhead) markOps(userID, providerID string, now time.Time, expiresAt int64) []*kv.Op {
	return []*kv.Op{
		{Kind: kv.OpSchedule, Key: keyspace.ConnIndex(userID), Member: seenMember(providerID), Due: now},
		{Kind: kv.OpScheduleSharded, Key: dueIndex, Member: worker.Member(jobAhead, aheadMember(userID, providerID)), Due: a.due(expiresAt)},
	}
}

// markRead marks the connection read, unless this process did so lately. It is
// on the hot read: in between marks it costs a map lookup under a read lock.
func (a *refreshAhead) markRead(ctx context.Context, userID, providerID string, expiresAt int64) {
	if expiresAt == 0 {
		return // never expires: nothing to refresh
	}
	now := a.now()
	ref := connRef{userID, providerID}
	a.mu.RLock()
	last, ok := a.marked[ref]
	a.mu.RUnlock()
	if ok && now.UnixMilli()-last < a.markEvery().Milliseconds() {
		return
	}
	if a.writeMarks(ctx, userID, providerID, now, expiresAt) {
		a.remember(ref, now)
	}
}

// markMemo is markRead for a read served at now from MemoryKV's decoded
// record t, which keeps when it was last marked: no map, no lock.
func (a *refreshAhead) markMemo(ctx context.Context, t *tokenMemo, now time.Time, userID, providerID string) {
	if t.expiresAt == 0 {
		return
	}
	if now.UnixMilli()-t.marked.Load() < a.markEvery().Milliseconds() {
		return
	}
	if a.writeMarks(ctx, userID, providerID, now, t.expiresAt) {
		t.marked.Store(now.UnixMilli())
	}
}

// writeMarks marks the connection read at now (markOps) and reports whether
// both marks landed; when they did not, the next read tries again.
func (a *refreshAhead) writeMarks(ctx context.Context, userID, providerID string, now time.Time, expiresAt int64) bool {
	ops := a.markOps(userID, providerID, now, expiresAt)
	kv.RunBatch(ctx, a.kv, ops...)
	return ops[0].Err == nil && ops[1].Err == nil
}

// remember notes that this process marked ref read at now, and now and then
// forgets the marks older than markEvery, which are spent.
func (a *refreshAhead) remember(ref connRef, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.marked == nil {
		a.marked = make(map[connRef]int64)
	}
	a.marked[ref] = now.UnixMilli()
	if len(a.marked) < 2*a.pruned+1024 {
		return
	}
	for r, at := range a.marked {
		if now.UnixMilli()-at >= a.markEvery().Milliseconds() {
			delete(a.marked, r)
		}
	}
	a.pruned = len(a.marked)
}

// job is the worker's job for a connection "{provider}:{user}":
// refresh it when it is due, and keep its entry at its next due time. It
// reports rescheduled once it has placed (or removed) the entry itself.
func (a *refreshAhead) job(ctx context.Context, member string) (rescheduled bool, err error) {
	providerID, userID, _ := strings.Cut(member, ":")
	if !a.on() || keyspace.CheckIDs(userID, providerID) != nil {
		return a.removeFromRefreshAhead(ctx, member) // refresh ahead was turned off, or the entry is not ours
	}
	now := a.now()
	seen, ok, err := a.seenAt(ctx, member)
	if err != nil {
		return false, err
	}
	switch {
	case !ok:
		return a.removeFromRefreshAhead(ctx, member) // never marked read (a race with a removal): marked anew if it is still there
	case now.Sub(seen) > a.idle:
		return a.postponeIdle(ctx, member, seen)
	}
	raw, v, err := a.read(ctx, keyspace.Token(userID, providerID))
	switch {
	case errors.Is(err, ErrNoToken), errors.Is(err, errCorruptRecord), errors.Is(err, ErrUnknownKey):
		return a.removeFromRefreshAhead(ctx, member)
	case err != nil:
		return false, err
	case v.expiresAt == 0 || len(v.refresh) == 0:
		return a.removeFromRefreshAhead(ctx, member)
	}
	due := a.due(v.expiresAt)
	if m := a.readMeta(ctx, userID, providerID); m.RefreshedAt > 0 && m.about(fingerprint(v.tokens())) {
		due = a.next(time.UnixMilli(m.RefreshedAt), v.expiresAt) // short tokens: halfway
	}
	if due.After(now) {
		return a.reschedule(ctx, member, due)
	}
	release, err := a.admit(ctx, providerID)
	var slowed *ratelimit.SlowedDownError
	if errors.As(err, &slowed) {
		return a.reschedule(ctx, member, slowed.Until)
	}
	if err != nil {
		return false, err
	}
	t, err := a.refreshDue(ctx, userID, providerID, raw, sync.OnceFunc(release))
	var failing *refreshFailingError
	switch {
	case err == nil && t.ExpiresAt != 0:
		return a.reschedule(ctx, member, a.next(now, t.ExpiresAt))
	case err == nil, errors.Is(err, ErrNoToken):
		return a.removeFromRefreshAhead(ctx, member)
	case errors.As(err, &failing):
		return a.reschedule(ctx, member, failing.NextAttempt)
	}
	if m := a.readMeta(ctx, userID, providerID); m.Failures > 0 && m.NextAttempt > now.UnixMilli() {
		return a.reschedule(ctx, member, time.UnixMilli(m.NextAttempt)) // the failure it recorded
	}
	return false, err // tried again when the claim's lease lapses
}

// legacyJob is job for an entry an earlier version wrote under
// jobAheadLegacy: once job has placed (or removed) the connection's entry
// under jobAhead, the old one leaves the index. Until then it stays, leased,
// and a failed job runs again when its lease lapses, as job's own entries do.
func (a *refreshAhead) legacyJob(ctx context.Context, member string) (rescheduled bool, err error) {
	if rescheduled, err = a.job(ctx, member); !rescheduled {
		return false, err
	}
	if err := kv.UnscheduleSharded(ctx, a.kv, dueIndex, worker.Member(jobAheadLegacy, member)); err != nil {
		return false, errs.Store(ctx, "remove an earlier version's refresh ahead entry", err)
	}
	return true, nil
}

// refreshDue refreshes the record read as raw, unless it was rewritten by the
// time the lock is held. release gives back the slot admit gave: once the
// provider has answered with tokens, else when the refresh ends (a failure
// recorded, or no request at all).
func (a *refreshAhead) refreshDue(ctx context.Context, userID, providerID string, raw []byte, release func()) (StoredTokens, error) {
	defer release()
	return a.runRefresh(ctx, userID, providerID, raw, refreshWhen{ahead: true, answered: release})
}

// reschedule makes the connection's entry due at due; it reports
// rescheduled once it is.
func (a *refreshAhead) reschedule(ctx context.Context, member string, due time.Time) (rescheduled bool, err error) {
	if err := kv.ScheduleSharded(ctx, a.kv, dueIndex, worker.Member(jobAhead, member), due); err != nil {
		return false, errs.Store(ctx, "schedule refresh ahead", err)
	}
	return true, nil
}

// postponeIdle puts off an idle connection until its record would have lapsed
// without a refresh; a read brings it forward again. seen is the last read
// the worker saw: if another came while it postponed the entry, the entry may
// have been moved by that read's mark and overwritten here, so it is made
// due again.
func (a *refreshAhead) postponeIdle(ctx context.Context, member string, seen time.Time) (rescheduled bool, err error) {
	if _, err := a.reschedule(ctx, member, seen.Add(refreshableTokenTTL)); err != nil {
		return false, err
	}
	again, ok, err := a.seenAt(ctx, member)
	if err != nil || !ok || !again.After(seen) {
		return true, nil
	}
	return a.reschedule(ctx, member, a.now())
}

// removeFromRefreshAhead takes a connection out of refresh ahead: it is
// gone, or cannot be refreshed. A sign-in that wrote it meanwhile is put
// back. It removes (or places) the entry itself: rescheduled is always true.
func (a *refreshAhead) removeFromRefreshAhead(ctx context.Context, member string) (rescheduled bool, err error) {
	providerID, userID, _ := strings.Cut(member, ":")
	ops := []*kv.Op{{Kind: kv.OpUnscheduleSharded, Key: dueIndex, Member: worker.Member(jobAhead, member)}}
	if keyspace.CheckIDs(userID, providerID) == nil {
		ops = append(ops, &kv.Op{Kind: kv.OpUnschedule, Key: keyspace.ConnIndex(userID), Member: seenMember(providerID)})
	}
	kv.RunBatch(ctx, a.kv, ops...)
	if !a.on() || keyspace.CheckIDs(userID, providerID) != nil {
		return true, nil
	}
	_, v, err := a.read(ctx, keyspace.Token(userID, providerID))
	if err != nil || v.expiresAt == 0 || len(v.refresh) == 0 {
		return true, nil
	}
	a.writeMarks(ctx, userID, providerID, a.now(), v.expiresAt)
	return true, nil
}

// seenAt is when the connection was last marked read; ok is false when it
// never was. A KV that cannot tell counts every connection as just read.
func (a *refreshAhead) seenAt(ctx context.Context, member string) (time.Time, bool, error) {
	r, ok := a.kv.(kv.IndexReader)
	if !ok {
		return a.now(), true, nil
	}
	providerID, userID, _ := strings.Cut(member, ":")
	ms, ok, err := r.Score(ctx, keyspace.ConnIndex(userID), seenMember(providerID))
	if errors.Is(err, errors.ErrUnsupported) {
		return a.now(), true, nil
	}
	if err != nil {
		return time.Time{}, false, errs.Store(ctx, "read when a connection was last read", err)
	}
	return time.UnixMilli(ms), ok, nil
}

// Refreshing ahead at scale, politely: a hundred thousand connections may
// come due in one hour, and a fleet of instances must not hammer a provider
// with them. Each provider's refreshes ahead are bounded on each instance
// (Concurrency) and across the fleet (PerSecond), and a provider that
// answers 429 slows the whole fleet's refreshes ahead of its tokens, not
// just the instance that heard it (internal/ratelimit holds to the limits,
// with a bucket of permits per provider in the store). Refreshes on read
// are never held back: a user is waiting on them.

// RefreshLimit bounds the refreshes ahead of one provider's tokens.
type RefreshLimit struct {
	// Concurrency is how many of the provider's tokens one instance
	// refreshes ahead at once; 0: 100, GitHub's documented secondary limit
	// on concurrent requests, which at 100 ms a refresh is 1,000 a second.
	// Above 128 the worker's share of one provider bounds it instead (half
	// the worker's 256 slots, so a provider whose endpoint hangs leaves
	// room for the others).
	Concurrency int
	// PerSecond is how many refreshes ahead a second the provider gets
	// from all the instances that share the store; 0: no limit but
	// Concurrency.
	PerSecond int
}

// defaultRefreshConcurrency is GitHub's secondary limit: no more than 100
// concurrent requests.
const defaultRefreshConcurrency = 100

// refreshLimiter is a TokenStore's bounds on refreshes ahead: the limits by
// provider, and the limiter that holds the refreshes to them.
type refreshLimiter struct {
	limits map[string]RefreshLimit
	ratelimit.Limiter
}

// admit lets one refresh ahead of providerID's tokens go under its limit
// (ratelimit.Limiter.Admit), once the limiter has let go of what it kept
// for providers the registry no longer holds (those its resolvers built
// are let go beyond maxResolved).
func (a *refreshAhead) admit(ctx context.Context, providerID string) (release func(), err error) {
	l := &a.limiter
	lim := l.limit(a.reg, providerID)
	if a.reg != nil {
		l.Forget(a.reg.bound(), a.reg.Has)
	}
	return l.Admit(ctx, providerID, lim)
}

// slowDown slows the fleet's refreshes ahead of providerID's tokens for
// ratelimit.SlowDown, after the provider answered 429.
func (a *refreshAhead) slowDown(ctx context.Context, providerID string) {
	if err := a.limiter.Slow(ctx, providerID); err != nil {
		a.events.log.WarnContext(ctx, "oauthflow: a provider's slow-down could not be shared; this instance slows down alone",
			"provider", providerID, "error", err.Error())
	}
}
