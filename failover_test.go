package oauthflow_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
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
			f := newStoreFixture(t, oauthflow.NewRedisKV(pair.Client), oauthflow.WithReplicaAcks(acks, 200*time.Millisecond))
			p := newRotating("rt-1")
			f.prov.setRefresh(p.answer)
			err := f.store.StoreTokens(ctx, "alice", "acme", oauthflow.StoredTokens{AccessToken: "access-0",
				RefreshToken: "rt-1", ExpiresAt: f.clock.Now().Add(time.Hour).UnixMilli()})
			if err != nil {
				t.Fatal(err)
			}
			pair.Synced(t) // the sign-in is on the replica, whatever the setting
			f.clock.Advance(2 * time.Hour)
			pair.CutLink() // from here the master's writes never reach the replica
			if tok, err := f.store.GetValidAccessToken(ctx, "alice", "acme"); err != nil || tok != "access-1" {
				t.Fatalf("the refresh before the failover: %q, %v", tok, err)
			}
			// A read between the write and the failover (here GetTokens, which
			// looks for kept writes) must not forget the unacknowledged one.
			if _, err := f.store.GetTokens(ctx, "alice", "acme"); err != nil {
				t.Fatal(err)
			}
			pair.Failover(t)
			f.clock.Advance(2 * time.Hour)
			tok, err := f.store.GetValidAccessToken(ctx, "alice", "acme")
			if acks == 0 { // the recovery point RELIABILITY.md states without acknowledgements
				if !errors.Is(err, oauthflow.ErrNoToken) || p.reused != 1 {
					t.Fatalf("without acknowledgements the failover should cost the grant: %q, %v, %d reuses", tok, err, p.reused)
				}
				return
			}
			if total := f.prov.refreshes.Load(); err != nil || tok != "access-2" || p.reused != 0 || total != 2 {
				t.Fatalf("after the failover: %q, %v, %d refreshes, %d reuses of a spent token; want access-2 from rt-2, 2, 0",
					tok, err, total, p.reused)
			}
		})
	}
}
