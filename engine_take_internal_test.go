package oauthflow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
)

// noteWorkflow keeps a note document: "edit" reads the note, saves the
// input, reads it back and records both reads in the run's result.
func noteWorkflow() *Workflow {
	return &Workflow{
		Name:   "note",
		States: []string{StateStart, "open", StateEnd},
		Transitions: []Transition{
			{Name: "open", From: StateStart, To: "open", Do: func(ctx context.Context, tc *TransitionContext) error {
				return tc.SaveDocument(ctx, "note", "text", "first")
			}},
			{Name: "edit", From: "open", To: StateEnd, Wait: true, Do: func(ctx context.Context, tc *TransitionContext) error {
				var before, after string
				if err := tc.engine.Document(ctx, tc.Run.ID, "note", &before); err != nil {
					return err
				}
				var in string
				if err := tc.DecodeInput(&in); err != nil {
					return err
				}
				if err := tc.SaveDocument(ctx, "note", "text", in); err != nil {
					return err
				}
				if err := tc.engine.Document(ctx, tc.Run.ID, "note", &after); err != nil {
					return err
				}
				return tc.SetResult([]string{before, after})
			}},
		},
	}
}

// A read sent with the take of a run's lock serves the hold's reads of its
// key, and the hold's own writes keep it current.
func TestTakeReadsServeTheHoldAndFollowItsWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := NewEngine(NewMemoryKV())
	if err := e.Register(noteWorkflow()); err != nil {
		t.Fatal(err)
	}
	r, err := e.Launch(ctx, "alice", "note", nil, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read := &kv.Op{Kind: kv.OpGet, Key: keyspace.Doc(r.ID, "note")}
	r, err = e.Fire(e.withTake(ctx, r.ID, read), r.ID, "edit", "second", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Result); got != `["first","second"]` {
		t.Fatalf("the transition read %s; want the note before and after its own write", got)
	}
	if read.Err != nil || len(read.Got) == 0 {
		t.Fatalf("the read sent with the take answered %q, %v", read.Got, read.Err)
	}
}

// failingScheduleKV fails every Schedule: the store refuses a write sent with a take.
type failingScheduleKV struct{ KV }

var errScheduleDown = errors.New("schedule refused")

func (k failingScheduleKV) Schedule(context.Context, string, string, time.Time) error {
	return errScheduleDown
}

// A write sent with the take must land before the run's transition runs: when
// it fails, the transition does not run and the run is left as it was.
func TestTakeWriteFailedRunsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := failingScheduleKV{NewMemoryKV()}
	e := NewEngine(store)
	if err := e.Register(noteWorkflow()); err != nil {
		t.Fatal(err)
	}
	r, err := e.Launch(ctx, "alice", "note", nil, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	watch := &kv.Op{Kind: kv.OpSchedule, Key: dueIndex, Member: "abandon:" + r.ID, Due: time.Now()}
	if _, err := e.Fire(e.withTake(ctx, r.ID, watch), r.ID, "edit", "second", "alice"); !errors.Is(err, errScheduleDown) {
		t.Fatalf("Fire = %v; want the failed write's error", err)
	}
	got, err := e.Get(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != "open" || got.Status != RunWaiting {
		t.Fatalf("the run is %s/%s; want it untouched in open/waiting", got.State, got.Status)
	}
}

// contendedKV answers the first take of a run lock "taken", and, as that
// other holder, rewrites the note just before the next take succeeds.
type contendedKV struct {
	KV
	takes int
	note  string
}

func (k *contendedKV) SetNX(ctx context.Context, key string, v []byte, ttl time.Duration) (bool, error) {
	if strings.HasPrefix(key, keyspace.RunLock("")) {
		k.takes++
		switch k.takes {
		case 1:
			return false, nil
		case 2:
			if err := k.KV.Set(ctx, k.note, []byte(`{"name":"note","widget":"text","data":"from the other holder","updatedAt":1}`), 0); err != nil {
				return false, err
			}
		}
	}
	return k.KV.SetNX(ctx, key, v, ttl)
}

// What was read with a take that found the lock held is read again once the
// lock is taken: the other holder may have written meanwhile.
func TestTakeReadsAgainAfterWaiting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := &contendedKV{KV: NewMemoryKV()}
	e := NewEngine(store)
	if err := e.Register(noteWorkflow()); err != nil {
		t.Fatal(err)
	}
	r, err := e.Launch(ctx, "alice", "note", nil, RunOptions{})
	if err != nil {
		t.Fatal(err)
	}
	store.takes, store.note = 0, keyspace.Doc(r.ID, "note")
	read := &kv.Op{Kind: kv.OpGet, Key: keyspace.Doc(r.ID, "note")}
	r, err = e.Fire(e.withTake(ctx, r.ID, read), r.ID, "edit", "second", "alice")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(r.Result); got != `["from the other holder","second"]` {
		t.Fatalf("the transition read %s; want what the other holder wrote before the lock was taken", got)
	}
}
