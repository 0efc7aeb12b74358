package main

import (
	"context"
	"encoding/json"
	"html/template"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/oauth2"
)

// tokenEndpoint plays the provider for every callback handler: it answers a
// token at once, so what is measured is the callback's own work. At
// /dpop/token it answers a DPoP-bound token, and only to a request that
// carries a proof (which it does not verify: the figure is the client's).
func tokenEndpoint() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
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
		_, _ = io.WriteString(w, `{"access_token":"gho_16C7e42F292c6912E7710c838347Ae178B4a","token_type":"`+tokenType+
			`","expires_in":28800,"refresh_token":"ghr_1B4a2e77838347a7E420ce178F2E7c6912E169246c34E1ccbF66C46812d16D5B1A9Dc86A1498","scope":"repo"}`)
	})
}

// ceiling is the hand-written callback: only what a callback must do (take the
// session, one POST to the token endpoint over a tuned transport, store the
// record, write a small page). Nothing here could be left out.
type ceiling struct {
	rdb      *redis.Client
	prefix   string
	tokenURL string
	client   *http.Client
}

func newCeiling(rdb *redis.Client, prefix, tokenURL string) *ceiling {
	tr := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, IdleConnTimeout: time.Minute}
	return &ceiling{rdb: rdb, prefix: prefix, tokenURL: tokenURL, client: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

type sessionRec struct {
	UserID, Provider, CodeVerifier string
}

func (c *ceiling) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	raw, err := c.rdb.GetDel(r.Context(), c.prefix+"oauth:session:"+q.Get("state")).Bytes()
	var s sessionRec
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

// exchange posts the code and returns the record to store.
func (c *ceiling) exchange(ctx context.Context, code, verifier string) ([]byte, error) {
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

// plain is the callback written the straightforward way: oauth2.Config.Exchange
// with the default client, encoding/json, html/template.
type plain struct {
	rdb    *redis.Client
	prefix string
	cfg    *oauth2.Config
}

var plainPage = template.Must(template.New("p").Parse(`<!doctype html><title>Connected</title><p>{{.}} account connected.</p>`))

func (p *plain) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, err := p.rdb.GetDel(r.Context(), p.prefix+"oauth:session:"+r.URL.Query().Get("state")).Bytes()
	var s sessionRec
	if err != nil || json.Unmarshal(raw, &s) != nil {
		http.Error(w, "expired", http.StatusBadRequest)
		return
	}
	tok, err := p.cfg.Exchange(r.Context(), r.URL.Query().Get("code"), oauth2.VerifierOption(s.CodeVerifier))
	if err != nil {
		http.Error(w, "provider", http.StatusBadGateway)
		return
	}
	rec, _ := json.Marshal(map[string]any{"accessToken": tok.AccessToken, "refreshToken": tok.RefreshToken, "expiresAt": tok.Expiry.UnixMilli()})
	if err := p.rdb.Set(r.Context(), p.prefix+"oauth:"+s.UserID+":"+s.Provider, rec, 30*24*time.Hour).Err(); err != nil {
		http.Error(w, "store", http.StatusServiceUnavailable)
		return
	}
	_ = plainPage.Execute(w, s.Provider)
}
