package authserver_test

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
	"golang.org/x/oauth2"
)

// callback is a registered loopback redirect URI of the default clients, on a port
// other than the registered one (RFC 8252 §7.3).
const callback = "http://127.0.0.1:8765/api/v1/oauth/callback"

// start runs a server for one test and closes it when the test ends.
func start(t testing.TB, opts authserver.Options) *authserver.Server {
	t.Helper()
	srv := authserver.Start(opts)
	t.Cleanup(srv.Close)
	return srv
}

// newClock returns a clock a test moves by hand.
func newClock() *fakeclock.Clock { return fakeclock.New(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) }

// noFollow is a client that reports redirects instead of following them.
var noFollow = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       30 * time.Second,
}

// authParams are the parameters of an authorization request from the default
// confidential client, with an S256 challenge for verifier.
func authParams(verifier string) url.Values {
	q := url.Values{
		"response_type": {"code"},
		"client_id":     {authserver.DefaultClientID},
		"redirect_uri":  {callback},
		"scope":         {"read write"},
		"state":         {"state-123"},
	}
	if verifier != "" {
		q.Set("code_challenge", oauth2.S256ChallengeFromVerifier(verifier))
		q.Set("code_challenge_method", "S256")
	}
	return q
}

// authorize sends an authorization request and returns the answer, unfollowed.
func authorize(t testing.TB, srv *authserver.Server, q url.Values) *http.Response {
	t.Helper()
	resp, err := noFollow.Get(srv.AuthURL() + "?" + q.Encode())
	if err != nil {
		t.Fatalf("authorize: %v", err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// redirected sends an authorization request that must redirect, and returns the query
// of the redirect.
func redirected(t testing.TB, srv *authserver.Server, q url.Values) url.Values {
	t.Helper()
	resp := authorize(t, srv, q)
	if resp.StatusCode != http.StatusFound {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("authorize: status %d, want 302; body %s", resp.StatusCode, body)
	}
	return locationQuery(t, resp)
}

func locationQuery(t testing.TB, resp *http.Response) url.Values {
	t.Helper()
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatalf("Location: %v", err)
	}
	return loc.Query()
}

// getCode runs an approved authorization request and returns the code.
func getCode(t testing.TB, srv *authserver.Server, q url.Values) string {
	t.Helper()
	got := redirected(t, srv, q)
	if got.Get("code") == "" {
		t.Fatalf("no code in redirect: %v", got)
	}
	return got.Get("code")
}

// answer is a decoded token-endpoint answer.
type answer struct {
	Status       int
	Header       http.Header
	Raw          map[string]any
	AccessToken  string `json:"access_token"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int64  `json:"expires_in"`
	RefreshToken string `json:"refresh_token"`
	Scope        string `json:"scope"`
	Error        string `json:"error"`
	Description  string `json:"error_description"`
}

// clientAuth says how a test authenticates its client.
type clientAuth struct {
	id, secret string
	basic      bool   // client_secret_basic, else client_secret_post (or none without secret)
	rawBasic   bool   // put the credentials in the header without form-encoding them
	header     string // an Authorization header to send instead
}

var (
	confidential = clientAuth{id: authserver.DefaultClientID, secret: authserver.DefaultClientSecret, basic: true}
	public       = clientAuth{id: authserver.DefaultPublicClientID}
)

// post sends a form to endpoint with the client's credentials, and a DPoP header
// for each of proofs, and decodes the answer.
func post(t testing.TB, endpoint string, auth clientAuth, form url.Values, proofs ...string) answer {
	t.Helper()
	req := newPost(t, endpoint, auth, form)
	for _, p := range proofs {
		req.Header.Add("DPoP", p)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", endpoint, err)
	}
	defer resp.Body.Close()
	return decodeAnswer(t, resp)
}

func newPost(t testing.TB, endpoint string, auth clientAuth, form url.Values) *http.Request {
	t.Helper()
	form = cloneValues(form)
	switch {
	case auth.rawBasic:
	case auth.basic:
	case auth.id != "":
		form.Set("client_id", auth.id)
		if auth.secret != "" {
			form.Set("client_secret", auth.secret)
		}
	}
	req, err := http.NewRequest(http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	switch {
	case auth.header != "":
		req.Header.Set("Authorization", auth.header)
	case auth.rawBasic:
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(auth.id+":"+auth.secret)))
	case auth.basic:
		req.SetBasicAuth(url.QueryEscape(auth.id), url.QueryEscape(auth.secret))
	}
	return req
}

func cloneValues(v url.Values) url.Values {
	out := url.Values{}
	for k, vals := range v {
		out[k] = append([]string(nil), vals...)
	}
	return out
}

func decodeAnswer(t testing.TB, resp *http.Response) answer {
	t.Helper()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read answer: %v", err)
	}
	a := answer{Status: resp.StatusCode, Header: resp.Header}
	if len(body) > 0 {
		if err := json.Unmarshal(body, &a.Raw); err != nil {
			t.Fatalf("answer is not JSON: %v: %q", err, body)
		}
		_ = json.Unmarshal(body, &a)
	}
	return a
}

// exchange trades code for tokens, with a DPoP header for each of proofs.
func exchange(t testing.TB, srv *authserver.Server, auth clientAuth, code, verifier string, proofs ...string) answer {
	t.Helper()
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {callback}}
	if verifier != "" {
		form.Set("code_verifier", verifier)
	}
	return post(t, srv.TokenURL(), auth, form, proofs...)
}

// refresh runs the refresh grant, with a DPoP header for each of proofs.
func refresh(t testing.TB, srv *authserver.Server, auth clientAuth, rt string, proofs ...string) answer {
	t.Helper()
	return post(t, srv.TokenURL(), auth, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}}, proofs...)
}

// signIn runs a whole authorization and code exchange and returns the tokens.
func signIn(t testing.TB, srv *authserver.Server) answer {
	t.Helper()
	verifier := oauth2.GenerateVerifier()
	a := exchange(t, srv, confidential, getCode(t, srv, authParams(verifier)), verifier)
	wantStatus(t, a, http.StatusOK)
	return a
}

func wantStatus(t testing.TB, a answer, status int) {
	t.Helper()
	if a.Status != status {
		t.Fatalf("status %d, want %d; answer %v", a.Status, status, a.Raw)
	}
}

func wantError(t testing.TB, a answer, status int, code string) {
	t.Helper()
	if a.Status != status || a.Error != code {
		t.Fatalf("got %d %q, want %d %q; answer %v", a.Status, a.Error, status, code, a.Raw)
	}
}

// callAPI calls the demo API with the access token and returns the status and answer.
func callAPI(t testing.TB, srv *authserver.Server, accessToken string) (*http.Response, authserver.Me) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, srv.APIURL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if accessToken != "" {
		req.Header.Set("Authorization", "Bearer "+accessToken)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", srv.APIURL(), err)
	}
	defer resp.Body.Close()
	var me authserver.Me
	_ = json.NewDecoder(resp.Body).Decode(&me)
	return resp, me
}
