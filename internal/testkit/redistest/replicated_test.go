package redistest

import (
	"context"
	"testing"
)

// The harness itself: a write the replica got survives a failover; one the
// master acknowledged after the link was cut does not, and WAIT says so
// when it is written.
func TestReplicatedFailoverLosesWhatTheReplicaNeverGot(t *testing.T) {
	ctx := context.Background()
	p := Replicated(t)
	if err := p.Client.Set(ctx, "kept", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Client.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT before the cut = %d, %v; want 1 replica", n, err)
	}
	p.CutLink()
	if err := p.Client.Set(ctx, "lost", "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := p.Client.Do(ctx, "WAIT", 1, 200).Int(); err != nil || n != 0 {
		t.Fatalf("WAIT after the cut = %d, %v; want 0 replicas", n, err)
	}
	p.Failover(t)
	if v, err := p.Client.Get(ctx, "kept").Result(); err != nil || v != "1" {
		t.Errorf("after the failover kept = %q, %v; want 1", v, err)
	}
	if n, err := p.Client.Exists(ctx, "lost").Result(); err != nil || n != 0 {
		t.Errorf("after the failover lost exists = %d, %v; want 0: the cut did not hold", n, err)
	}
}
