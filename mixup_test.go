package oauthflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/oauth2"
)

// issuerProvider is a provider whose sign-ins go to issuer, which advertises
// RFC 9207 or not (oauthflow.IssuerReporter); it counts its code exchanges.
type issuerProvider struct {
	*fakeProvider
	issuer     string
	advertised bool
	exchanges  atomic.Int64
}

func (p *issuerProvider) AuthorizationIssuer() (string, bool) { return p.issuer, p.advertised }

func (p *issuerProvider) ExchangeCode(ctx context.Context, code string, opts ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	p.exchanges.Add(1)
	return p.fakeProvider.ExchangeCode(ctx, code, opts...)
}

func issuerModule(t *testing.T, p oauthflow.Provider) *oauthflow.Module {
	t.Helper()
	reg := oauthflow.NewRegistry()
	require.NoError(t, reg.Register(p))
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	return m
}

const honestIssuer = "https://as.example"

// issuerCases: what a callback's iss does to a sign-in whose provider names
// honestIssuer, advertised or not, or through Issuer() alone.
var issuerCases = []struct {
	name, provider, iss string
	ok                  bool
}{
	{"not advertised, its own iss", "quiet", honestIssuer, true},
	{"not advertised, no iss", "quiet", "", true},
	{"not advertised, another's iss", "quiet", "https://honest-elsewhere.example", false},
	{"advertised, its own iss", "loud", honestIssuer, true},
	{"advertised, no iss", "loud", "", false},
	{"advertised, another's iss", "loud", "https://honest-elsewhere.example", false},
	{"Issuer() alone, no iss", "legacy", "", false},
	{"Issuer() alone, its own iss", "legacy", honestIssuer, true},
}

func issuerProviderFor(name string) (oauthflow.Provider, *issuerProvider) {
	p := &issuerProvider{fakeProvider: newFakeProvider(name), issuer: honestIssuer, advertised: name == "loud"}
	if name == "legacy" {
		return &legacyOnly{p: p, issuer: honestIssuer}, p
	}
	return p, p
}

// legacyOnly names its issuer through Issuer() alone, not IssuerReporter.
type legacyOnly struct {
	p      *issuerProvider
	issuer string
}

func (l *legacyOnly) ProviderID() string      { return l.p.ProviderID() }
func (l *legacyOnly) DefaultScopes() []string { return l.p.DefaultScopes() }
func (l *legacyOnly) Issuer() string          { return l.issuer }
func (l *legacyOnly) BuildAuthURL(s []string, state string, o ...oauth2.AuthCodeOption) string {
	return l.p.BuildAuthURL(s, state, o...)
}
func (l *legacyOnly) ExchangeCode(ctx context.Context, c string, o ...oauth2.AuthCodeOption) (*oauthflow.TokenSet, error) {
	return l.p.ExchangeCode(ctx, c, o...)
}
func (l *legacyOnly) RefreshToken(ctx context.Context, rt string) (*oauthflow.TokenSet, error) {
	return l.p.RefreshToken(ctx, rt)
}

// Both completion paths compare the callback's iss with the issuer the
// sign-in was sent to: another issuer's is refused whether or not the
// server advertises RFC 9207, a missing one only when it does (or when the
// provider names its issuer through Issuer() alone, as before). A refused
// callback exchanges nothing and stores nothing.
func TestCallbackIssIsCheckedOnBothPaths(t *testing.T) {
	t.Parallel()
	for _, tc := range issuerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, path := range []string{"tool", "callback"} {
				p, counted := issuerProviderFor(tc.provider)
				m := issuerModule(t, p)
				out := buildIssuerURL(t, m, tc.provider)
				var err error
				if path == "tool" {
					args, _ := json.Marshal(oauthflow.ExchangeOAuthTokenArgs{Provider: tc.provider, Code: "c", State: out.State,
						ExpectedState: out.State, Iss: tc.iss})
					_, err = m.ExchangeOAuthToken.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"}, args)
				} else {
					err = callback(m, "code=c&state="+out.State+"&iss="+tc.iss)
				}
				_, stored := m.Tokens.GetTokens(context.Background(), "alice", tc.provider)
				if tc.ok {
					assert.NoError(t, err, path)
					assert.NoError(t, stored, path)
					continue
				}
				if path == "tool" {
					assert.ErrorIs(t, err, oauthflow.ErrIssuerMismatch, path)
				} else {
					assert.ErrorContains(t, err, "unexpected issuer", path)
				}
				assert.Zero(t, counted.exchanges.Load(), "%s: the code went nowhere", path)
				assert.ErrorIs(t, stored, oauthflow.ErrNoToken, path)
			}
		})
	}
}

// A provider's error redirect is recorded on the sign-in only when its iss
// passes the same check; another issuer's is refused.
func TestErrorRedirectIssIsChecked(t *testing.T) {
	t.Parallel()
	for _, tc := range issuerCases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, _ := issuerProviderFor(tc.provider)
			m := issuerModule(t, p)
			out := buildIssuerURL(t, m, tc.provider)
			body, _ := json.Marshal(map[string]string{"state": out.State, "error": "access_denied", "iss": tc.iss})
			req := httptest.NewRequest(http.MethodPost, oauthflow.CompletePath, strings.NewReader(string(body)))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			m.CompleteHandler().ServeHTTP(rec, req)
			if tc.ok {
				assert.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
			} else {
				assert.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
				assert.Contains(t, rec.Body.String(), "unexpected issuer")
			}
		})
	}
}

func buildIssuerURL(t *testing.T, m *oauthflow.Module, provider string) oauthflow.BuildOAuthURLResult {
	t.Helper()
	res, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "alice"},
		json.RawMessage(`{"provider":"`+provider+`","scopes":[]}`))
	require.NoError(t, err)
	var out oauthflow.BuildOAuthURLResult
	require.NoError(t, json.Unmarshal(res, &out))
	return out
}

// callback sends GET /callback?query to m and returns its failure, if any.
func callback(m *oauthflow.Module, query string) error {
	req := httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?"+query, nil)
	rec := httptest.NewRecorder()
	m.CallbackHandler().ServeHTTP(rec, req)
	if rec.Code == http.StatusOK {
		return nil
	}
	return &callbackError{status: rec.Code, body: rec.Body.String()}
}

type callbackError struct {
	status int
	body   string
}

func (e *callbackError) Error() string { return http.StatusText(e.status) + ": " + e.body }
