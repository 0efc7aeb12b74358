package oauthflow_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/redis/go-redis/v9"
)

// BenchmarkCallback completes build_oauth_url sign-ins through
// CallbackHandler().ServeHTTP, on the real Redis and a local token endpoint that
// answers at once, from 32 goroutines as the harness's load generator keeps 32
// in flight. Beside it, "ceiling" is the hand-written callback the harness
// measures the library against (take the session, one POST to the token
// endpoint over a tuned transport, store the record, write a small page), on
// the same Redis, endpoint and sessions, so that a CPU profile of one beside
// the other shows what the library's callback spends that the ceiling does not.
// "library/build_oauth_url/dpop" is the same sign-in for a provider whose
// grants are bound to a key (Config.DPoP): the callback parses the sign-in's
// key and signs a proof for the exchange, and the token endpoint answers
// token_type DPoP (BenchmarkBuildOAuthURL has the key's generation).
func BenchmarkCallback(b *testing.B) {
	tokenSrv := httptest.NewServer(http.HandlerFunc(benchTokenEndpoint))
	b.Cleanup(tokenSrv.Close)
	for _, bound := range []bool{false, true} {
		name := "library/build_oauth_url"
		if bound {
			name += "/dpop"
		}
		b.Run(name, func(b *testing.B) {
			kv, _, _ := benchRedis(b)
			m := benchCallbackModule(b, kv, tokenSrv.URL, bound)
			states := benchToolSignIns(b, m, b.N)
			serveCallbacks(b, m.CallbackHandler(), states)
		})
	}
	b.Run("ceiling", func(b *testing.B) {
		kv, c, prefix := benchRedis(b)
		m := benchCallbackModule(b, kv, tokenSrv.URL, false)
		states := benchToolSignIns(b, m, b.N) // sessions of the library's form, under the same keys
		serveCallbacks(b, newBenchCeiling(c, prefix, tokenSrv.URL), states)
	})
}

// serveCallbacks serves one callback per state from 32 goroutines and fails on
// any answer but a success page.
func serveCallbacks(b *testing.B, h http.Handler, states []string) {
	var next atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(max(32/runtime.GOMAXPROCS(0), 1))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			st := states[next.Add(1)-1]
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, oauthflow.CallbackPath+"?code=c0de&state="+st, nil))
			if rec.Code != http.StatusOK {
				b.Errorf("callback: %d %s", rec.Code, rec.Body.String())
				return
			}
		}
	})
}

// BenchmarkBuildOAuthURL starts a sign-in with build_oauth_url on a memory
// store, for a Bearer provider and for one whose grants are bound to a key
// (Config.DPoP): the difference is the key's generation (ES256), its encoding
// in the pending sign-in and its thumbprint in the URL.
func BenchmarkBuildOAuthURL(b *testing.B) {
	for _, bound := range []bool{false, true} {
		name := "bearer"
		if bound {
			name = "dpop"
		}
		b.Run(name, func(b *testing.B) {
			m := benchCallbackModule(b, oauthflow.NewMemoryKV(), "https://as.example", bound)
			args := json.RawMessage(`{"provider":"bench","scopes":["repo"]}`)
			tc := oauthflow.ToolContext{UserID: "bench-user"}
			b.ReportAllocs()
			for b.Loop() {
				raw, err := m.BuildOAuthURL.Call(context.Background(), tc, args)
				if err != nil {
					b.Fatal(err)
				}
				if bound != strings.Contains(string(raw), "dpop_jkt") {
					b.Fatalf("dpop %v, and the URL: %s", bound, raw)
				}
			}
		})
	}
}

// benchCallbackModule is a Module wired as a host app would: a providers.OAuth2
// public client on the local token endpoint, tokens and sessions in kv. A
// bound module's provider binds its grants to a key (Config.DPoP) and posts
// to the endpoint's /dpop/token, which answers only a request with a proof.
func benchCallbackModule(b *testing.B, kv oauthflow.KV, tokenURL string, bound bool) *oauthflow.Module {
	b.Helper()
	cfg := providers.Config{ID: "bench", AuthURL: tokenURL + "/authorize", TokenURL: tokenURL + "/token"}
	if bound {
		cfg.TokenURL, cfg.DPoP = tokenURL+"/dpop/token", true
	}
	p, err := providers.NewOAuth2(cfg,
		providers.Credentials{ClientID: "bench", RedirectURL: "https://app.example" + oauthflow.CallbackPath})
	if err != nil {
		b.Fatal(err)
	}
	reg := oauthflow.NewRegistry()
	if err := reg.Register(p); err != nil {
		b.Fatal(err)
	}
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: kv, Registry: reg,
		Logger: slog.New(slog.DiscardHandler), WorkerInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	return m
}

// benchToolSignIns starts n sign-ins with build_oauth_url, one user each.
func benchToolSignIns(b *testing.B, m *oauthflow.Module, n int) []string {
	b.Helper()
	args := json.RawMessage(`{"provider":"bench","scopes":["repo"]}`)
	states := make([]string, n)
	for i := range states {
		raw, err := m.BuildOAuthURL.Call(context.Background(), oauthflow.ToolContext{UserID: "bench-u" + strconv.Itoa(i)}, args)
		var res oauthflow.BuildOAuthURLResult
		if err == nil {
			err = json.Unmarshal(raw, &res)
		}
		if err != nil {
			b.Fatal(err)
		}
		states[i] = res.State
	}
	return states
}

// benchTokenEndpoint answers a token at once: a Bearer one, or at /dpop/token
// a DPoP-bound one, there only to a request that carries a proof (which it
// does not verify: the figure is the client's).
func benchTokenEndpoint(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	tokenType := "bearer"
	if r.URL.Path == "/dpop/token" {
		if r.Header.Get("DPoP") == "" {
			http.Error(w, `{"error":"invalid_dpop_proof"}`, http.StatusBadRequest)
			return
		}
		tokenType = "DPoP"
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = io.WriteString(w, `{"access_token":"gho_16C7e42F292c6912E7710c838347Ae178B4a","token_type":"`+tokenType+`","expires_in":28800,"refresh_token":"ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498","scope":"repo"}`)
}

// benchCeiling is the harness's hand-written callback, for the profile beside
// the library's: only what a callback must do.
type benchCeiling struct {
	rdb      redis.UniversalClient
	prefix   string
	tokenURL string
	client   *http.Client
}

func newBenchCeiling(rdb redis.UniversalClient, prefix, tokenURL string) *benchCeiling {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	return &benchCeiling{rdb: rdb, prefix: prefix, tokenURL: tokenURL + "/token", client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (c *benchCeiling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	raw, err := c.rdb.GetDel(r.Context(), c.prefix+"oauth:session:"+q.Get("state")).Bytes()
	var s struct{ UserID, Provider, CodeVerifier string }
	if err != nil || json.Unmarshal(raw, &s) != nil {
		http.Error(w, "expired", http.StatusBadRequest)
		return
	}
	tok, err := c.exchange(r.Context(), q.Get("code"), s.CodeVerifier)
	if err != nil {
		http.Error(w, "provider", http.StatusBadGateway)
		return
	}
	if err := c.rdb.Set(r.Context(), c.prefix+"oauth:"+s.UserID+":"+s.Provider, tok, 30*24*time.Hour).Err(); err != nil {
		http.Error(w, "store", http.StatusServiceUnavailable)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	_, _ = io.WriteString(w, "<!doctype html><title>Connected</title><p>Account connected.</p>")
}

func (c *benchCeiling) exchange(ctx context.Context, code, verifier string) ([]byte, error) {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "code_verifier": {verifier}, "client_id": {"bench"}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var t struct {
		AccessToken  string `json:"access_token"`
		RefreshToken string `json:"refresh_token"`
		ExpiresIn    int64  `json:"expires_in"`
		Scope        string `json:"scope"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t); err != nil {
		return nil, err
	}
	exp := time.Now().Add(time.Duration(t.ExpiresIn) * time.Second).UnixMilli()
	return []byte(`{"accessToken":` + strconv.Quote(t.AccessToken) + `,"refreshToken":` + strconv.Quote(t.RefreshToken) +
		`,"expiresAt":` + strconv.FormatInt(exp, 10) + `,"scope":` + strconv.Quote(t.Scope) + `}`), nil
}
