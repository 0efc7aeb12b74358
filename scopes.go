package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
)

// Scope step-up. A tool that needs scopes reads its token with
// GetValidAccessTokenFor; when the stored grant lacks some, the read fails
// with a *ScopeError (which is ErrNoToken), the tool answers unauthorized with
// the scopes to ask for, and the consumer launches the "oauth" workflow with
// them: the union of what was granted and what is missing, so the new grant
// keeps the old one's reach. The record stores what the provider granted.

// ScopeError is a stored grant that lacks scopes a caller needs. It matches
// ErrNoToken with errors.Is: the user must sign in again, asking for Scopes().
type ScopeError struct {
	ProviderID string
	Granted    []string // the stored grant's scopes
	Missing    []string // needed and not granted, in the order asked
}

func (e *ScopeError) Error() string {
	return "oauthflow: the " + e.ProviderID + " grant lacks scopes: " + strings.Join(e.Missing, " ")
}

// Unwrap makes a ScopeError an ErrNoToken.
func (e *ScopeError) Unwrap() error { return ErrNoToken }

// Scopes is what a new sign-in should ask for: the granted scopes, then the missing ones.
func (e *ScopeError) Scopes() []string { return slices.Concat(e.Granted, e.Missing) }

// GetValidAccessTokenFor is GetValidAccessToken for a caller that needs
// scopes: when the stored grant lacks any of them it returns a *ScopeError
// (an ErrNoToken) naming them, and does not refresh, since a refresh never
// widens a grant. A grant whose scope is unknown (stored empty) is taken to
// have them.
func (s *TokenStore) GetValidAccessTokenFor(ctx context.Context, userID, providerID string, scopes []string) (string, error) {
	t, err := s.validToken(ctx, userID, providerID, scopes)
	return t.access, err
}

// lacking returns the error for a grant with scope (space-separated) read by a
// caller that needs need, or nil when nothing is missing.
func lacking(providerID string, scope []byte, need []string) error {
	granted := strings.Fields(string(scope))
	if len(granted) == 0 {
		return nil
	}
	var missing []string
	for _, s := range need {
		if s != "" && !slices.Contains(granted, s) && !slices.Contains(missing, s) {
			missing = append(missing, s)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &ScopeError{ProviderID: providerID, Granted: granted, Missing: missing}
}

// Unauthorized is a tool's answer when the user must sign in (again):
// {"error":"unauthorized"}, and when the grant lacks scopes, the provider,
// the missing scopes and the scopes a new sign-in should ask for.
type Unauthorized struct {
	Error         string   `json:"error"`
	Provider      string   `json:"provider,omitempty"`
	MissingScopes []string `json:"missingScopes,omitempty"`
	Scopes        []string `json:"scopes,omitempty"`
}

// UnauthorizedResult reads a tool result; ok is false unless it says unauthorized.
func UnauthorizedResult(result json.RawMessage) (u Unauthorized, ok bool) {
	if json.Unmarshal(result, &u) != nil || u.Error != "unauthorized" {
		return Unauthorized{}, false
	}
	return u, true
}

// unauthorizedResult is the tool result for err, an ErrNoToken.
func unauthorizedResult(err error) json.RawMessage {
	var se *ScopeError
	if !errors.As(err, &se) {
		return ToolResultUnauthorized
	}
	b, _ := json.Marshal(Unauthorized{Error: "unauthorized", Provider: se.ProviderID, MissingScopes: se.Missing, Scopes: se.Scopes()})
	return b
}
