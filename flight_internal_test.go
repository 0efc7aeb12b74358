package oauthflow

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/oauthflow/oauthflow/internal/waitfor"
)

// A Module's Close waits for the refreshes in flight while requests may
// still start new ones: the wait and new calls run side by side, over and
// over, and neither panics nor misses a call that started before the wait.
func TestFlightWaitBesideNewCalls(t *testing.T) {
	t.Parallel()
	var g flightGroup
	var callers sync.WaitGroup
	for c := range 8 {
		callers.Go(func() {
			for i := range 2000 {
				_, _ = g.do(context.Background(), fmt.Sprintf("k%d-%d", c, i%4), func(func(StoredTokens, error)) (StoredTokens, error) {
					return StoredTokens{}, nil
				})
			}
		})
	}
	for range 20000 {
		g.wait()
	}
	waitfor.Group(t, &callers, "the callers")
	g.wait()
}
