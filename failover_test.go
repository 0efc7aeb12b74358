package oauthflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/fakeclock"
	"github.com/oauthflow/oauthflow/internal/redistest"
)

// A Redis master acknowledges the write of a rotated refresh token and dies
// before its replica has it; the replica is promoted. Without replica
// acknowledgements the store then holds the spent refresh token and the
// next refresh costs the grant; with them the refreshing process learns the
// write is not on a replica, keeps the rotated tokens, and writes them again
// when it finds the spent ones back.
func TestRotatedTokenAcrossAFailover(t *testing.T) {
	for _, acks := range []int{0, 1} {
		t.Run(fmt.Sprintf("ReplicaAcks=%d", acks), func(t *testing.T) {
			ctx := context.Background()
			pair := redistest.Replicated(t)
			clock := fakeclock.New(time.Now())
			p := newRotatingProvider()
			reg := oauthflow.NewRegistry()
			if err := reg.Register(p); err != nil {
				t.Fatal(err)
			}
			s := oauthflow.NewTokenStore(oauthflow.NewRedisKV(pair.Client), reg, oauthflow.WithClock(clock.Now),
				oauthflow.WithReplicaAcks(acks, 200*time.Millisecond))
			if err := s.StoreFromTokenSet(ctx, "alice", "acme", p.signIn("alice")); err != nil {
				t.Fatal(err)
			}
			pair.Synced(t) // the sign-in is on the replica, whatever the setting
			clock.Advance(2 * time.Hour)
			pair.CutLink() // from here the master's writes never reach the replica
			if tok, err := s.GetValidAccessToken(ctx, "alice", "acme"); err != nil || tok != "at-alice-1" {
				t.Fatalf("the refresh before the failover: %q, %v", tok, err)
			}
			// A read between the write and the failover (here GetTokens, which
			// looks for kept writes) must not forget the unacknowledged one.
			if _, err := s.GetTokens(ctx, "alice", "acme"); err != nil {
				t.Fatal(err)
			}
			pair.Failover(t)
			clock.Advance(2 * time.Hour)
			tok, err := s.GetValidAccessToken(ctx, "alice", "acme")
			_, total, reuses, _ := p.counts()
			if acks == 0 { // the recovery point RELIABILITY.md states without acknowledgements
				if !errors.Is(err, oauthflow.ErrNoToken) || reuses != 1 {
					t.Fatalf("without acknowledgements the failover should cost the grant: %q, %v, %d reuses", tok, err, reuses)
				}
				return
			}
			if err != nil || tok != "at-alice-2" || reuses != 0 || total != 2 {
				t.Fatalf("after the failover: %q, %v, %d refreshes, %d reuses of a spent token; want at-alice-2 from rt-alice-1, 2, 0",
					tok, err, total, reuses)
			}
		})
	}
}
