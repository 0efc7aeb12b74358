package kv

import (
	"context"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
)

// The wait answers on a single node and on a Cluster, where it runs on the
// key's master. Neither has replicas here, so each answers 0 without error;
// that it counts the replicas of the write's own master is shown with a
// real master and replica by TestRotatedTokenAcrossAFailover.
func TestWaitReplicasAnswersOnEveryDeployment(t *testing.T) {
	ctx := context.Background()
	for name, store := range map[string]*Redis{
		"single":  NewRedis(redistest.Real(t)),
		"cluster": NewRedis(redistest.Cluster(t)),
	} {
		for _, key := range []string{"oauth:alice:github", "oauth:bob:github", "oauth:carol:slack"} {
			got, err := store.WaitReplicas(ctx, key, 1, 50*time.Millisecond)
			if err != nil || got != 0 {
				t.Errorf("%s: WaitReplicas(%s) = %d, %v; want 0 replicas and no error", name, key, got, err)
			}
		}
	}
}

// The cost of an acknowledged write: a SET alone, and a SET followed by
// the wait for one replica, against a real master and replica.
func BenchmarkReplicaAck(b *testing.B) {
	ctx := context.Background()
	pair := redistest.Replicated(b)
	store := NewRedis(pair.Client)
	for _, acks := range []int{0, 1} {
		b.Run(map[int]string{0: "set", 1: "set+wait1"}[acks], func(b *testing.B) {
			for b.Loop() {
				if err := store.Set(ctx, "oauth:alice:acme", []byte("tokens"), time.Hour); err != nil {
					b.Fatal(err)
				}
				if acks > 0 {
					if n, err := store.WaitReplicas(ctx, "oauth:alice:acme", acks, time.Second); err != nil || n < acks {
						b.Fatalf("WaitReplicas = %d, %v", n, err)
					}
				}
			}
		})
	}
}
