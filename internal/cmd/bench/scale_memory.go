package main

import (
	"context"
	"runtime"
	"time"

	"github.com/oauthflow/oauthflow"
)

// maxMemorySignIns is the largest N at which sign-ins are run in memory too:
// each is a whole sign-in over HTTP, so a million would take most of an hour.
const maxMemorySignIns = 100_000

// memPoint is MemoryKV at one N: the live heap's growth per connection in
// each configuration, beside a plain map holding the same key names and the
// token bytes alone; and per completed sign-in.
type memPoint struct {
	n         int
	perConn   map[scaleConfig]float64
	floor     float64
	signIns   int
	perSignIn float64
}

// memoryPoint measures MemoryKV at n connections, and at n sign-ins up to maxMemorySignIns.
func memoryPoint(ctx context.Context, n int) (*memPoint, error) {
	p := &memPoint{n: n, perConn: map[scaleConfig]float64{}}
	for _, cfg := range scaleConfigs {
		b, err := memoryPerConnection(ctx, n, cfg)
		if err != nil {
			return nil, err
		}
		p.perConn[cfg] = b
	}
	p.floor = mapPerEntry(n)
	if n > maxMemorySignIns {
		return p, nil
	}
	p.signIns = n
	var err error
	p.perSignIn, err = memoryPerSignIn(ctx, n)
	return p, err
}

// memoryPerConnection stores and reads n connections in a Module over a
// MemoryKV and divides the heap's growth by n.
func memoryPerConnection(ctx context.Context, n int, cfg scaleConfig) (float64, error) {
	reg, err := githubRegistry()
	if err != nil {
		return 0, err
	}
	kv := oauthflow.NewMemoryKV()
	defer func() { _ = kv.Close() }()
	mod, err := scaleModule(ctx, kv, "", cfg, reg)
	if err != nil {
		return 0, err
	}
	defer func() { _ = mod.Close() }()
	before := heap()
	if _, _, err := storeAll(ctx, mod, n); err != nil {
		return 0, err
	}
	after := heap()
	runtime.KeepAlive(mod)
	return (after - before) / float64(n), nil
}

// mapPerEntry is the limit: a map from the token records' key names to
// their token bytes alone, per entry.
func mapPerEntry(n int) float64 {
	before := heap()
	m := make(map[string][]byte)
	for i := range n {
		m["oauth:"+userOf(i)+":"+scaleProvider] = make([]byte, tokenBytes)
	}
	after := heap()
	runtime.KeepAlive(m)
	return (after - before) / float64(n)
}

// memoryPerSignIn runs m sign-ins in a Module over a MemoryKV and divides
// the heap's growth by m, once the authorization server (which keeps every
// grant it issued) is gone.
func memoryPerSignIn(ctx context.Context, m int) (float64, error) {
	kv := oauthflow.NewMemoryKV()
	defer func() { _ = kv.Close() }()
	rig, err := newSignInRig(ctx, kv, "")
	if err != nil {
		return 0, err
	}
	defer rig.close()
	before := heap()
	if err := rig.run(ctx, m); err != nil {
		return 0, err
	}
	rig.closeProvider()
	after := settledHeap()
	runtime.KeepAlive(rig)
	return (after - before) / float64(m), nil
}

// settledHeap is the live heap once it stops falling: the goroutines of the
// closed server's connections, which still reach all it kept, end a moment
// after Close returns.
func settledHeap() float64 {
	h := heap()
	for range 20 {
		time.Sleep(50 * time.Millisecond)
		next := heap()
		if next > h*0.99 {
			return min(h, next)
		}
		h = next
	}
	return h
}
