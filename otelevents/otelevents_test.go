package otelevents_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/otelevents"
	"github.com/oauthflow/oauthflow/providers"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
)

// A sign-in, a refresh, a dead grant and a disconnect, counted by kind, with
// LogEvents writing the same events beside the metrics.
func TestHookCountsAFlowsEvents(t *testing.T) {
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	hook, err := otelevents.Hook(sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader)).Meter("test"))
	if err != nil {
		t.Fatal(err)
	}
	var audit bytes.Buffer
	as := authserver.Start(authserver.Options{AccessTokenTTL: 30 * time.Second, RotateRefreshTokens: true})
	t.Cleanup(as.Close)
	mux := http.NewServeMux()
	api := httptest.NewServer(mux)
	t.Cleanup(api.Close)
	demo, err := providers.NewOAuth2(providers.Config{ID: "demo", AuthURL: as.AuthURL(), TokenURL: as.TokenURL(),
		RevocationURL: as.RevokeURL(), Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: authserver.DefaultClientID, ClientSecret: authserver.DefaultClientSecret,
			RedirectURL: api.URL + oauthflow.CallbackPath})
	if err != nil {
		t.Fatal(err)
	}
	reg := oauthflow.NewRegistry()
	if err := reg.Register(demo); err != nil {
		t.Fatal(err)
	}
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg, Logger: slog.New(slog.DiscardHandler),
		OnEvent: oauthflow.AllEvents(hook, nil, oauthflow.LogEvents(slog.New(slog.NewTextHandler(&audit, nil))))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	m.Mount(mux)

	for _, user := range []string{"alice", "bob"} {
		signIn(t, m, user, api.URL)
	}
	if _, err := m.Tokens.GetValidAccessToken(ctx, "alice", "demo"); err != nil { // 30 s is inside the skew: a refresh
		t.Fatal(err)
	}
	as.FailNext(authserver.Failure{Grant: authserver.GrantRefreshToken, Error: "invalid_grant"})
	if _, err := m.Tokens.GetValidAccessToken(ctx, "bob", "demo"); err == nil {
		t.Fatal("bob's dead grant gave a token")
	}
	if err := m.Tokens.DeleteTokens(ctx, "alice", "demo"); err != nil {
		t.Fatal(err)
	}

	got := counts(t, reader)
	for key, want := range map[string]int64{
		"tokens_stored":             2,
		"connected":                 2,
		"tokens_refreshed":          1,
		"refresh_failed grant_dead": 1,
		"tokens_deleted":            1,
	} {
		if got[key] != want {
			t.Errorf("%s: counted %d, want %d (all: %v)", key, got[key], want, got)
		}
	}
	if n := strings.Count(audit.String(), "oauthflow: connected"); n != 2 {
		t.Errorf("the audit log has %d connected records, want 2:\n%s", n, audit.String())
	}
	if !strings.Contains(audit.String(), "grant_dead=true") {
		t.Errorf("the audit log lacks the dead grant:\n%s", audit.String())
	}
}

// signIn runs user's sign-in through the callback endpoint.
func signIn(t *testing.T, m *oauthflow.Module, user, api string) {
	t.Helper()
	_, doc, err := m.StartSignIn(context.Background(), user, "demo")
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get(doc.AuthURL)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	loc, _ := url.Parse(resp.Header.Get("Location"))
	resp, err = http.Get(api + oauthflow.CallbackPath + "?" + loc.RawQuery)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("callback: %v %v", resp, err)
	}
	_ = resp.Body.Close()
}

// counts reads the counter per kind, "grant_dead" appended to dead grants.
func counts(t *testing.T, reader *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			if md.Name != otelevents.Metric {
				continue
			}
			for _, dp := range md.Data.(metricdata.Sum[int64]).DataPoints {
				kind, _ := dp.Attributes.Value(attribute.Key("kind"))
				key := kind.AsString()
				if dead, _ := dp.Attributes.Value(attribute.Key("grant_dead")); dead.AsBool() {
					key += " grant_dead"
				}
				if p, _ := dp.Attributes.Value(attribute.Key("provider")); p.AsString() != "demo" {
					t.Errorf("a point for provider %q", p.AsString())
				}
				out[key] += dp.Value
			}
		}
	}
	return out
}
