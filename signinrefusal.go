package oauthflow

import "context"

// SignInRefusalHearer is a provider that hears of the sign-ins its
// authorization server refused at its authorization page: an error redirect
// to the callback that passed the sign-in's checks (its state, its user,
// its iss). The browser brings it, so it is a claim, not a fact: an MCP
// server's provider has its token endpoint confirm it before it replaces a
// client registration the server no longer knows. The module calls it
// synchronously, once per refusal.
type SignInRefusalHearer interface {
	SignInRefused(ctx context.Context, err *ProviderError)
}

// tellRefused tells p, when it hears them, of a sign-in its authorization
// page refused with code and description.
func tellRefused(ctx context.Context, p Provider, code, description string) {
	if h, ok := p.(SignInRefusalHearer); ok && code != "" {
		h.SignInRefused(ctx, redirectError(p.ProviderID(), code, description, ""))
	}
}
