package oauthflow_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// fuzzModule is a module over memory with a fake provider and one pending
// sign-in under the state "seed-state".
func fuzzModule(f *testing.F) *oauthflow.Module {
	reg := oauthflow.NewRegistry()
	if err := reg.Register(newFakeProvider("acme")); err != nil {
		f.Fatal(err)
	}
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(), Registry: reg,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	if _, _, err := m.StartSignIn(context.Background(), "alice", "acme"); err != nil {
		f.Fatal(err)
	}
	if err := m.Sessions.Register(context.Background(), "seed-state", oauthflow.Session{UserID: "alice", Provider: "acme"}); err != nil {
		f.Fatal(err)
	}
	return m
}

var allowedStatus = map[int]bool{200: true, 400: true, 413: true, 415: true, 502: true, 503: true}

func FuzzCallbackQuery(f *testing.F) {
	for _, seed := range []string{
		"code=abc&state=seed-state",
		"code=abc&state=unknown",
		"error=access_denied&error_description=%3Cscript%3Ealert(1)%3C%2Fscript%3E&state=seed-state",
		"code=&state=",
		"state=seed-state&iss=http%3A%2F%2Fevil",
		"code=a&code=b&state=seed-state&state=x",
		"%zz=%zz&code=%00",
		strings.Repeat("code=x&", 100),
	} {
		f.Add(seed)
	}
	h := fuzzModule(f).CallbackHandler()
	f.Fuzz(func(t *testing.T, query string) {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/oauth/callback", nil)
		req.URL.RawQuery = query
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowedStatus[rec.Code] {
			t.Fatalf("query %q answered %d", query, rec.Code)
		}
		if strings.Contains(rec.Body.String(), "<script>alert") {
			t.Fatalf("query %q reached the page unescaped", query)
		}
		if rec.Header().Get("Content-Security-Policy") == "" {
			t.Fatal("page without a Content-Security-Policy")
		}
	})
}

func FuzzCompleteBody(f *testing.F) {
	for _, seed := range []string{
		`{"code":"abc","state":"seed-state"}`,
		`{"code":"abc","state":"unknown"}`,
		`{"state":"seed-state","error":"access_denied","error_description":"<b>no</b>"}`,
		`{"code":"abc","state":"seed-state","extra":1}`,
		`{"code":1}`, `[]`, `null`, `{`, ``, `{"code":"a","state":"b"}{}`,
		`{"code":"` + strings.Repeat("x", 5000) + `","state":"s"}`,
	} {
		f.Add(seed)
	}
	h := fuzzModule(f).CompleteHandler()
	f.Fuzz(func(t *testing.T, body string) {
		req := httptest.NewRequest(http.MethodPost, "/api/v1/oauth/complete", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if !allowedStatus[rec.Code] {
			t.Fatalf("body %q answered %d", body, rec.Code)
		}
		var out struct {
			OK    *bool  `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.OK == nil {
			t.Fatalf("body %q: answer is not {ok:...} JSON: %q", body, rec.Body.String())
		}
		if *out.OK != (rec.Code == 200) || (!*out.OK && out.Error == "") {
			t.Fatalf("body %q: ok=%v with status %d and error %q", body, *out.OK, rec.Code, out.Error)
		}
	})
}
