package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
)

// handler is one callback under load: how its sign-ins are prepared.
type handler struct {
	name    string
	prepare func(ctx context.Context, n int) ([]string, error)
	res     []result
	trips   sample // Redis round trips per completion (the library's only)
}

// callbacks load-tests the six handlers, rotating their order each round.
func callbacks(e *env) (*table, error) {
	t := &table{title: "Completing a sign-in (GET callback, load from a second process)"}
	r, err := newRig(e)
	if err != nil {
		return t, err
	}
	defer r.close()
	hs := []*handler{
		{name: "hand-written ceiling", prepare: func(ctx context.Context, n int) ([]string, error) { return r.handSignIns(ctx, r.lim, n) }},
		{name: "library, build_oauth_url", prepare: func(ctx context.Context, n int) ([]string, error) { return r.toolSignIns(ctx, benchProvider, n) }},
		{name: "library, build_oauth_url, DPoP", prepare: func(ctx context.Context, n int) ([]string, error) { return r.toolSignIns(ctx, benchDPoPProvider, n) }},
		{name: "library, oauth workflow", prepare: r.workflowSignIns},
		{name: "x/oauth2 straightforward", prepare: func(ctx context.Context, n int) ([]string, error) { return r.handSignIns(ctx, r.pl, n) }},
		{name: "library, build_oauth_url, Config{} defaults", prepare: r.defaultSignIns},
	}
	for i := range e.opts.rounds {
		for j := range hs {
			h := hs[j]
			if i%2 == 1 {
				h = hs[len(hs)-1-j]
			}
			if err := r.measure(h); err != nil {
				return t, fmt.Errorf("%s: %w", h.name, err)
			}
		}
	}
	t.rows = callbackRows(hs[0], hs[1], hs[2], hs[3], hs[4], hs[5])
	t.prose = fmt.Sprintf("%d requests per handler per round, %d in flight, keep-alive, on loopback; one token endpoint in the parent answers at once for all.",
		e.opts.loadReqs, e.opts.loadConc)
	return t, nil
}

func (r *rig) measure(h *handler) error {
	urls, err := h.prepare(context.Background(), r.e.opts.loadReqs)
	if err != nil {
		return err
	}
	res, trips, err := r.load(urls)
	if err != nil {
		return err
	}
	h.res = append(h.res, res)
	h.trips = append(h.trips, float64(trips)/float64(max(res.N-res.Errors, 1)))
	return nil
}

func (h *handler) rps() sample { return pick(h.res, func(r result) float64 { return r.RPS }) }
func (h *handler) p99() sample { return pick(h.res, func(r result) float64 { return r.P99 }) }
func (h *handler) p50() sample { return pick(h.res, func(r result) float64 { return r.P50 }) }

func (h *handler) value() string {
	return h.rps().format(" req/s", 0) + ", p50 " + h.p50().format(" ms", 2) + ", p99 " + h.p99().format(" ms", 2)
}

func pick(rs []result, f func(result) float64) sample {
	s := make(sample, len(rs))
	for i, r := range rs {
		s[i] = f(r)
	}
	return s
}

func callbackRows(lim, tool, bound, wf, plain, def *handler) []row {
	atLeast := func(x float64) func(float64) bool { return func(v float64) bool { return v >= x } }
	atMost := func(x float64) func(float64) bool { return func(v float64) bool { return v <= x } }
	return []row{
		{figure: "build_oauth_url sign-in: requests/s", value: tool.value(), limit: lim.name, limitValue: lim.value(),
			ratio: ratios(tool.rps(), lim.rps()), target: ">= 0.8x", want: atLeast(0.8)},
		{figure: "build_oauth_url sign-in: p99", value: tool.p99().format(" ms", 2), limit: lim.name, limitValue: lim.p99().format(" ms", 2),
			ratio: ratios(tool.p99(), lim.p99()), target: "<= 1.5x", want: atMost(1.5)},
		{figure: "build_oauth_url sign-in, Config{} defaults: requests/s", value: def.value(), limit: lim.name, limitValue: lim.rps().format(" req/s", 0),
			ratio: ratios(def.rps(), lim.rps()), target: ">= 0.85x", want: atLeast(0.85)},
		{figure: "build_oauth_url sign-in: requests/s", value: tool.rps().format(" req/s", 0), limit: plain.name, limitValue: plain.value(),
			ratio: ratios(tool.rps(), plain.rps()), target: ">= 1.3x", want: atLeast(1.3)},
		{figure: "DPoP sign-in: requests/s", value: bound.value(), limit: tool.name, limitValue: tool.rps().format(" req/s", 0),
			ratio: ratios(bound.rps(), tool.rps()), target: "reported"},
		{figure: "workflow sign-in: requests/s", value: wf.value(), limit: lim.name, limitValue: lim.rps().format(" req/s", 0),
			ratio: ratios(wf.rps(), lim.rps()), target: "reported"},
		{figure: "workflow sign-in: Redis round trips per completion", value: wf.trips.format("", 1), limit: "build_oauth_url sign-in", limitValue: tool.trips.format("", 1),
			ratio: wf.trips, target: "<= 3", want: atMost(3)},
	}
}

// randomState is a state of the issued form: 32 random bytes, base64url.
func randomState() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
