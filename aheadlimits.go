package oauthflow

import "github.com/oauthflow/oauthflow/internal/ratelimit"

// Whose limit a provider's refreshes ahead keep to: the app's, when
// Config.RefreshLimits names the provider or has one for every provider
// (""); else the one the provider documents, which a provider reports with
// the optional RefreshLimit method (providers.New's catalog entries carry
// what their providers publish, each with its page); else the default,
// defaultRefreshConcurrency in flight and no rate.

// refreshLimitReporter is a Provider with the optional RefreshLimit method
// (documented on [Provider]).
type refreshLimitReporter interface {
	RefreshLimit() (limit RefreshLimit, ok bool)
}

// limit is the bound on refreshes ahead of providerID's tokens, which reg
// may hold.
func (l *refreshLimiter) limit(reg *Registry, providerID string) ratelimit.Limit {
	lim, ok := l.limits[providerID]
	if !ok {
		lim, ok = l.limits[""]
	}
	if !ok {
		lim = documentedLimit(reg, providerID)
	}
	if lim.Concurrency <= 0 {
		lim.Concurrency = defaultRefreshConcurrency
	}
	return ratelimit.Limit{Concurrency: lim.Concurrency, PerSecond: lim.PerSecond}
}

// documentedLimit is the limit providerID's provider documents; zero when
// reg does not know it or it reports none.
func documentedLimit(reg *Registry, providerID string) RefreshLimit {
	if reg == nil || !reg.knows(providerID) {
		return RefreshLimit{}
	}
	p, err := reg.Get(providerID)
	if err != nil {
		return RefreshLimit{}
	}
	r, ok := p.(refreshLimitReporter)
	if !ok {
		return RefreshLimit{}
	}
	lim, ok := r.RefreshLimit()
	if !ok {
		return RefreshLimit{}
	}
	return lim
}
