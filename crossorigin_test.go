package oauthflow_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// newCORSModule returns a mux with a module mounted whose FrontendOrigins are origins.
func newCORSModule(t *testing.T, origins ...string) *http.ServeMux {
	t.Helper()
	m, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(),
		Logger: slog.New(slog.DiscardHandler), FrontendOrigins: origins})
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	mux := http.NewServeMux()
	m.Mount(mux)
	return mux
}

func TestFrontendOriginsRefusesWhatIsNotAnOrigin(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{
		"", "*", "https://*.example.com", "null", "app.example.com", "//app.example.com",
		"ftp://app.example.com", "javascript:alert(1)", "https://", "https://:8080",
		"https://app.example.com/path", "https://app.example.com/?", "https://app.example.com?x=1",
		"https://app.example.com#f", "https://user:pw@app.example.com", "https://app.example.com:",
		"https://app.example.com:0", "https://app.example.com:65536", "https://app.example.com:08080",
		"https://app example.com", "https://bücher.example", "https://app.example.com\"';",
		"http://[::1%25eth0]:3000", "http://[not:an:ip]",
	} {
		t.Run(bad, func(t *testing.T) {
			t.Parallel()
			_, err := oauthflow.New(context.Background(), oauthflow.Config{KV: oauthflow.NewMemoryKV(),
				FrontendOrigins: []string{"https://ok.example", bad}})
			require.ErrorIs(t, err, oauthflow.ErrInvalidArgument)
			assert.Contains(t, err.Error(), "FrontendOrigins[1]")
		})
	}
}

// An origin is normalised at New to what a browser sends in Origin, so a
// configured spelling that differs still matches.
func TestFrontendOriginsAreNormalised(t *testing.T) {
	t.Parallel()
	tests := []struct{ configured, origin string }{
		{"HTTPS://App.Example.COM:443/", "https://app.example.com"},
		{"http://localhost:80", "http://localhost"},
		{"http://127.0.0.1:8080", "http://127.0.0.1:8080"},
		{"https://app.example.com:8443", "https://app.example.com:8443"},
		{"http://[0:0:0:0:0:0:0:1]:3000", "http://[::1]:3000"},
	}
	for _, tt := range tests {
		t.Run(tt.configured, func(t *testing.T) {
			t.Parallel()
			res := preflight(newCORSModule(t, tt.configured, tt.configured), tt.origin)
			assert.Equal(t, http.StatusNoContent, res.Code)
			assert.Equal(t, tt.origin, res.Header().Get("Access-Control-Allow-Origin"))
		})
	}
}

func preflight(h http.Handler, origin string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodOptions, oauthflow.CompletePath, nil)
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Access-Control-Request-Method", http.MethodPost)
	req.Header.Set("Access-Control-Request-Headers", "content-type")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func postFrom(h http.Handler, origin, contentType, body string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, oauthflow.CompletePath, strings.NewReader(body))
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// corsHeaders returns the response's Access-Control-* headers.
func corsHeaders(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		if strings.HasPrefix(k, "Access-Control-") {
			out[k] = v
		}
	}
	return out
}

const frontend = "http://localhost:3000"

func TestCompletePreflight(t *testing.T) {
	t.Parallel()
	mux := newCORSModule(t, frontend, "https://app.example.com")
	t.Run("allowed origin", func(t *testing.T) {
		t.Parallel()
		res := preflight(mux, frontend)
		assert.Equal(t, http.StatusNoContent, res.Code)
		assert.Equal(t, http.Header{
			"Access-Control-Allow-Origin":  {frontend},
			"Access-Control-Allow-Methods": {"POST"},
			"Access-Control-Allow-Headers": {"Content-Type"},
			"Access-Control-Max-Age":       {"600"},
		}, corsHeaders(res.Header()), "exactly these: no credentials, no wildcard")
		assert.Equal(t, []string{"Origin"}, res.Header().Values("Vary"))
	})
	for name, origin := range map[string]string{
		"other origin":            "https://evil.example",
		"another port":            "http://localhost:3001",
		"another scheme":          "https://localhost:3000",
		"a suffix of an allowed":  "https://app.example.com.evil.example",
		"the opaque origin":       "null",
		"no Origin":               "",
		"an allowed one, unusual": "HTTP://LOCALHOST:3000", // browsers send it serialised
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := preflight(mux, origin)
			assert.Equal(t, http.StatusForbidden, res.Code)
			assert.Empty(t, corsHeaders(res.Header()))
			assert.Empty(t, res.Header().Values("Vary"))
		})
	}
	t.Run("no frontend origins configured", func(t *testing.T) {
		t.Parallel()
		res := preflight(newCORSModule(t), frontend)
		assert.Equal(t, http.StatusForbidden, res.Code)
		assert.Empty(t, corsHeaders(res.Header()))
	})
}

// The POST itself carries the allowed origin on every answer, errors included,
// so the frontend can read why a completion failed; any other origin gets none.
func TestCompleteCORS(t *testing.T) {
	t.Parallel()
	mux := newCORSModule(t, frontend)
	tests := []struct {
		name, origin, contentType, body string
		status                          int
		allow                           string
	}{
		{"allowed origin, unknown state", frontend, "application/json", `{"code":"c","state":"` + unknownState + `"}`, http.StatusBadRequest, frontend},
		{"allowed origin, not JSON", frontend, "text/plain", `{}`, http.StatusUnsupportedMediaType, frontend},
		{"other origin", "https://evil.example", "application/json", `{"code":"c","state":"` + unknownState + `"}`, http.StatusBadRequest, ""},
		{"no Origin (same origin or not a browser)", "", "application/json", `{"code":"c","state":"` + unknownState + `"}`, http.StatusBadRequest, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			res := postFrom(mux, tt.origin, tt.contentType, tt.body)
			assert.Equal(t, tt.status, res.Code, res.Body.String())
			if tt.allow == "" {
				assert.Empty(t, corsHeaders(res.Header()))
				return
			}
			assert.Equal(t, http.Header{"Access-Control-Allow-Origin": {tt.allow}}, corsHeaders(res.Header()))
			assert.Equal(t, []string{"Origin"}, res.Header().Values("Vary"))
		})
	}
}

// A module that checks the completing browser's user lets allowed frontends
// send their cookies with POST /complete; one that does not, never.
func TestCompleteAllowsCredentialsOnlyWhenItChecksTheUser(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]oauthflow.Config{
		"VerifyUser":  {VerifyUser: func(*http.Request, string) error { return nil }},
		"BindSignIns": {BindSignIns: true},
		"neither":     {},
	} {
		cfg.KV, cfg.FrontendOrigins = oauthflow.NewMemoryKV(), []string{frontend}
		m, err := oauthflow.New(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(func() { _ = m.Close() })
		mux := http.NewServeMux()
		m.Mount(mux)
		want := "true"
		if name == "neither" {
			want = ""
		}
		res := preflight(mux, frontend)
		assert.Equal(t, want, res.Header().Get("Access-Control-Allow-Credentials"), name)
		assert.Equal(t, frontend, res.Header().Get("Access-Control-Allow-Origin"), name)
	}
}
