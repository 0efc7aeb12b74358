package oauthflow

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/lease"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

// Guards of issue 26 that no test noticed: the run lock's owner check at its
// release and Reencrypt's compare-and-swap (the worker's claim lease is
// tested in internal/worker). Each runs on memory and a real Redis.

// guardKVs are the stores the guards are tried on, each empty.
func guardKVs() map[string]func(t *testing.T) KV {
	return map[string]func(t *testing.T) KV{
		"memory": func(*testing.T) KV { return NewMemoryKV() },
		"redis": func(t *testing.T) KV {
			c := redistest.Real(t)
			return WithKeyPrefix(NewRedisKV(c), redistest.Prefix(t, c))
		},
	}
}

// lockRefusedKV closes refused the first time a SetNX of key is refused: the
// instance using it found the lock in other hands.
type lockRefusedKV struct {
	KV
	key     string
	once    sync.Once
	refused chan struct{}
}

func (k *lockRefusedKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	ok, err := k.KV.SetNX(ctx, key, v, ttl)
	if err == nil && !ok && key == k.key {
		k.once.Do(func() { close(k.refused) })
	}
	return ok, err
}

// steppedRun is a workflow whose "step" holds its first two callers until
// their release is closed, and counts every caller.
type steppedRun struct {
	entered  atomic.Int64
	in       [2]chan struct{}
	release  [2]chan struct{}
	third    chan struct{}
	thirdIn  sync.Once
	workflow *Workflow
}

func newSteppedRun() *steppedRun {
	s := &steppedRun{third: make(chan struct{})}
	for i := range 2 {
		s.in[i], s.release[i] = make(chan struct{}), make(chan struct{})
	}
	noop := func(context.Context, *TransitionContext) error { return nil }
	s.workflow = &Workflow{Name: "stepped", States: []string{StateStart, "open", StateEnd},
		Transitions: []Transition{
			{Name: "open", From: StateStart, To: "open", Do: noop},
			{Name: "step", From: "open", To: StateEnd, Wait: true, Do: s.step},
		}}
	return s
}

func (s *steppedRun) step(context.Context, *TransitionContext) error {
	n := s.entered.Add(1)
	if n > 2 {
		s.thirdIn.Do(func() { close(s.third) })
		return nil
	}
	close(s.in[n-1])
	_, err := waitfor.RecvErr(s.release[n-1], "the test's release of step caller")
	return err
}

// A run's lock is freed only by its holder. Instance A steps a run and
// outlives its lease: the lock lapses and B takes it and steps the run too.
// When A finishes it must leave B's lock alone (its release compares the
// owner), so a third instance C waits for B instead of stepping the run beside
// it. A plain delete at A's release frees B's lock and lets C in: the
// transition would run twice at once.
func TestRunLockFreedOnlyByItsHolder(t *testing.T) {
	t.Parallel()
	for name, newKV := range guardKVs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testRunLockFreedOnlyByItsHolder(t, newKV(t))
		})
	}
}

func testRunLockFreedOnlyByItsHolder(t *testing.T, store KV) {
	ctx := context.Background()
	clock := fakeclock.New(time.Now())
	s := newSteppedRun()
	engine := func(store KV) *Engine {
		e := newEngine(store, withEngineClock(clock.Now), withEngineLogger(slog.New(slog.DiscardHandler)))
		if err := e.Register(s.workflow); err != nil {
			t.Fatal(err)
		}
		return e
	}
	a, b := engine(store), engine(store)
	r, err := a.Launch(ctx, "alice", "stepped", nil, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watch := &lockRefusedKV{KV: store, key: keyspace.RunLock(r.ID), refused: make(chan struct{})}
	c := engine(watch)
	t.Cleanup(func() { // let the held steps go on any failure
		for _, ch := range s.release {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	})

	fire := func(e *Engine) <-chan error {
		done := make(chan error, 1)
		go func() { _, err := e.Fire(ctx, r.ID, "step", nil, "alice"); done <- err }()
		return done
	}
	aDone := fire(a)
	waitfor.Recv(t, s.in[0], "A inside step")
	if err := store.Del(ctx, keyspace.RunLock(r.ID)); err != nil { // A's lease lapses
		t.Fatal(err)
	}
	clock.Advance(2 * runLockLeaseDefault) // A must ask the store before it writes
	bDone := fire(b)
	waitfor.Recv(t, s.in[1], "B inside step, on the lapsed lock")

	close(s.release[0])
	if err := waitfor.Recv(t, aDone, "A's Fire"); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("A's Fire after its lease lapsed: %v; want lease.ErrLost", err)
	}
	cDone := fire(c)
	select {
	case <-watch.refused: // C waits for B's lock
	case <-s.third:
		t.Fatal("C stepped the run beside B: A's release freed B's lock")
	case <-time.After(waitfor.Limit):
		t.Fatal("C neither waited for the lock nor stepped the run")
	}
	close(s.release[1])
	if err := waitfor.Recv(t, bDone, "B's Fire"); err != nil {
		t.Fatalf("B's Fire: %v", err)
	}
	if err := waitfor.Recv(t, cDone, "C's Fire"); !errors.Is(err, ErrTransitionNotAllowed) {
		t.Fatalf("C's Fire after B ended the run: %v; want ErrTransitionNotAllowed", err)
	}
	if n := s.entered.Load(); n != 2 {
		t.Fatalf("step ran %d times; want 2 (A, whose write was fenced, and B)", n)
	}
}

// writeMidWalkKV runs write once, the moment a Reencrypt walk reads the TTL
// of key: after the walk has read the record and before it writes it back.
type writeMidWalkKV struct {
	KV
	key   string
	once  sync.Once
	write func(ctx context.Context)
}

func (k *writeMidWalkKV) TTL(ctx context.Context, key string) (time.Duration, error) {
	if key == k.key {
		k.once.Do(func() { k.write(ctx) })
	}
	return k.KV.TTL(ctx, key)
}

func (k *writeMidWalkKV) ScanPrefix(ctx context.Context, prefix, cursor string, count int) ([]string, string, error) {
	return storeOf(k.KV).(kv.Scanner).ScanPrefix(ctx, prefix, cursor, count)
}

// Reencrypt rewrites a record only over the bytes it read: a sign-in that
// lands between its read and its write (its TTL read, here) is left as its
// writer sealed it, counted as changed, never overwritten with the old tokens
// sealed anew.
func TestReencryptLeavesARecordWrittenMidWalk(t *testing.T) {
	t.Parallel()
	for name, newKV := range guardKVs() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testReencryptLeavesARecordWrittenMidWalk(t, newKV(t))
		})
	}
}

func testReencryptLeavesARecordWrittenMidWalk(t *testing.T, store KV) {
	ctx := context.Background()
	k1 := encryptionKey{ID: "k1", Key: bytes.Repeat([]byte{1}, 32)}
	k2 := encryptionKey{ID: "k2", Key: bytes.Repeat([]byte{2}, 32)}
	oldRing, err := newKeyRing(k1)
	if err != nil {
		t.Fatal(err)
	}
	newRing, err := newKeyRing(k2, k1)
	if err != nil {
		t.Fatal(err)
	}
	expiry := time.Now().Add(time.Hour).UnixMilli()
	before, after := NewTokenStore(store, NewRegistry(), WithEncryption(oldRing)), NewTokenStore(store, NewRegistry(), WithEncryption(newRing))
	if err := before.StoreTokens(ctx, "alice", "demo", StoredTokens{AccessToken: "old", RefreshToken: "rt-old", ExpiresAt: expiry}); err != nil {
		t.Fatal(err)
	}
	signIn := StoredTokens{AccessToken: "new", RefreshToken: "rt-new", ExpiresAt: expiry, Scope: "read"}
	mid := &writeMidWalkKV{KV: store, key: keyspace.Token("alice", "demo"), write: func(ctx context.Context) {
		if err := after.StoreTokens(ctx, "alice", "demo", signIn); err != nil {
			t.Errorf("the sign-in during the walk: %v", err)
		}
	}}
	p, err := Reencrypt(ctx, mid, newRing, ReencryptOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p.Changed != 1 || p.Rewritten != 0 {
		t.Errorf("the walk counted %d changed and %d rewritten; want 1 changed, none rewritten", p.Changed, p.Rewritten)
	}
	got, err := after.GetTokens(ctx, "alice", "demo")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, signIn) {
		t.Fatalf("after the walk the record holds %+v; want the sign-in made during it", *got)
	}
}
