package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oauthflow/oauthflow"
	"golang.org/x/oauth2"
)

// providerLatency is how long the storm's provider takes to refresh.
const providerLatency = 50 * time.Millisecond

// slowProvider refreshes after providerLatency and counts its calls.
type slowProvider struct{ calls atomic.Int64 }

func (p *slowProvider) ProviderID() string      { return provID }
func (p *slowProvider) DefaultScopes() []string { return nil }
func (p *slowProvider) BuildAuthURL([]string, string, ...oauth2.AuthCodeOption) string {
	return "http://127.0.0.1/authorize"
}
func (p *slowProvider) ExchangeCode(context.Context, string, ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return nil, fmt.Errorf("not used")
}
func (p *slowProvider) RefreshToken(ctx context.Context, _ string) (*oauthflow.TokenSet, error) {
	p.calls.Add(1)
	select {
	case <-time.After(providerLatency):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &oauthflow.TokenSet{AccessToken: "fresh", RefreshToken: "ghr_next", ExpiresIn: 3600}, nil
}

// refreshStorm: callers on 4 token stores (4 replicas) on one Redis read one
// expired token at once; one provider call should serve them all.
func refreshStorm(e *env) (*table, error) {
	t := &table{title: "Refresh storm"}
	var calls, last, p50 sample
	for i := range e.opts.rounds {
		c, l, m, err := storm(e, i)
		if err != nil {
			return t, err
		}
		calls, last, p50 = append(calls, c), append(last, l), append(p50, m)
	}
	bound := float64(providerLatency.Milliseconds() + 25)
	t.rows = []row{
		{figure: "provider calls", value: calls.format("", 0), limit: "one refresh", limitValue: "1",
			ratio: calls, target: "1", want: func(v float64) bool { return v == 1 }},
		{figure: "last caller's latency", value: last.format(" ms", 1), limit: "provider latency + 25 ms", limitValue: fmt.Sprintf("%.0f ms", bound),
			ratio: ratios(last, sample(slices.Repeat([]float64{bound}, len(last)))), target: "<= 1.0x", want: func(v float64) bool { return v <= 1 }},
		{figure: "median caller's latency", value: p50.format(" ms", 1), limit: "provider latency", limitValue: fmt.Sprintf("%d ms", providerLatency.Milliseconds()),
			ratio: ratios(p50, sample(slices.Repeat([]float64{float64(providerLatency.Milliseconds())}, len(p50)))), target: "reported"},
	}
	t.prose = fmt.Sprintf("%d callers over 4 TokenStores on one Redis, provider %d ms.", e.opts.storm, providerLatency.Milliseconds())
	return t, nil
}

// storm runs one storm and returns provider calls, last and median latency (ms).
func storm(e *env, round int) (float64, float64, float64, error) {
	ctx := context.Background()
	p := &slowProvider{}
	reg := oauthflow.NewRegistry()
	if err := reg.Register(p); err != nil {
		return 0, 0, 0, err
	}
	kv := oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(e.rdb), fmt.Sprintf("%sstorm%d:", e.prefix, round))
	stores := make([]*oauthflow.TokenStore, 4)
	for i := range stores {
		stores[i] = oauthflow.NewTokenStore(kv, reg, oauthflow.WithLogger(e.log))
	}
	expired := oauthflow.StoredTokens{AccessToken: "stale", RefreshToken: "ghr_old", ExpiresAt: time.Now().Add(-time.Minute).UnixMilli()}
	if err := stores[0].StoreTokens(ctx, userID, provID, expired); err != nil {
		return 0, 0, 0, err
	}
	lat, err := stormCallers(ctx, stores, e.opts.storm)
	if err != nil {
		return 0, 0, 0, err
	}
	slices.Sort(lat)
	return float64(p.calls.Load()), lat[len(lat)-1], percentile(lat, 0.5), nil
}

// stormCallers releases n callers at once and returns each one's latency in ms.
func stormCallers(ctx context.Context, stores []*oauthflow.TokenStore, n int) ([]float64, error) {
	lat := make([]float64, n)
	errs := make([]error, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			t0 := time.Now()
			_, errs[i] = stores[i%len(stores)].GetValidAccessToken(ctx, userID, provID)
			lat[i] = float64(time.Since(t0).Microseconds()) / 1000
		})
	}
	close(start)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return lat, nil
}
