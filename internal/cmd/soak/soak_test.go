package soak

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/redis/go-redis/v9"
)

// The short form runs in CI; OAUTHFLOW_SOAK=long runs the load RELIABILITY.md reports.
var (
	shortPlan = Plan{Users: 40, Workers: 6, Storms: 8, StormReads: 24, FailPercent: 5}
	longPlan  = Plan{Users: 10000, Workers: 16, Storms: 2000, StormReads: 48, FailPercent: 5}
)

func plan() Plan {
	if os.Getenv("OAUTHFLOW_SOAK") == "long" {
		return longPlan
	}
	return shortPlan
}

// buildApp builds the instance program once per test.
func buildApp(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "app")
	out, err := exec.Command("go", "build", "-o", bin, "./app").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./app: %v\n%s", err, out)
	}
	return bin
}

func TestSoakOneRedis(t *testing.T) {
	t.Parallel()
	c := redistest.Real(t)
	soak(t, Env{Binary: buildApp(t), Redis: redistest.Addr(), Prefix: redistest.Prefix(t, c), Log: t.Logf})
}

func TestSoakRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.Cluster(t).(*redis.ClusterClient)
	soak(t, Env{Binary: buildApp(t), Redis: "cluster:" + strings.Join(c.Options().Addrs, ","), Prefix: "soak:", Log: t.Logf})
}

func soak(t *testing.T, env Env) {
	p := plan()
	r, err := Run(context.Background(), env, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("plan %+v", p)
	t.Logf("report %+v", r)
	t.Logf("markdown | %d | %d | %d | %v | %d | %d (%d not completed) | %.2f | %d | %d | %d/%d | %d | %.2f | %d | %d | %d | %s |",
		r.Started, r.Completed, r.Failed, r.FailedBy, r.CodesIssued, r.CodesExchanged, r.CodesExchanged-int64(r.Completed),
		float64(r.CodeRequests)/float64(max(r.CodesIssued, 1)), r.CodeReplays, r.Storms,
		r.StormReads-r.StormFailed, r.StormReads, r.MaxStormRefreshes(),
		float64(r.RefreshRequests)/float64(max(r.Refreshes, 1)), r.RefreshReuses, r.Connected, r.Lost, r.Elapsed.Round(1e8))
	if r.Started != p.Users || r.Completed+r.Failed != r.Started {
		t.Errorf("sign-ins: %d started, %d completed, %d failed; want %d started, every one accounted for",
			r.Started, r.Completed, r.Failed, p.Users)
	}
	if r.Completed < p.Users/2 {
		t.Errorf("only %d of %d sign-ins completed: %v", r.Completed, p.Users, r.FailedBy)
	}
	if r.Killed != 1 {
		t.Errorf("%d instances were killed and restarted, want 1", r.Killed)
	}
	if r.CodeReplays != 0 || r.RefreshReuses != 0 {
		t.Errorf("doubled: %d codes exchanged twice, %d rotated refresh tokens used twice", r.CodeReplays, r.RefreshReuses)
	}
	if r.CodesExchanged < int64(r.Completed) {
		t.Errorf("%d sign-ins completed on %d exchanged codes", r.Completed, r.CodesExchanged)
	}
	if n := r.MaxStormRefreshes(); n > 1 {
		t.Errorf("a storm caused %d refreshes, want at most one: %v", n, r.StormRefreshes)
	}
	if r.Lost != 0 || r.Connected != r.Completed {
		t.Errorf("%d of %d connected users lost their connection (%d still connected)", r.Lost, r.Completed, r.Connected)
	}
}
