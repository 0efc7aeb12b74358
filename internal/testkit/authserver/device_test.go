package authserver_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/fakeclock"
)

// userCodePattern is a user code as shown: two groups of four letters of the
// base-20 alphabet of RFC 8628 §6.1.
var userCodePattern = regexp.MustCompile(`^[BCDFGHJKLMNPQRSTVWXZ]{4}-[BCDFGHJKLMNPQRSTVWXZ]{4}$`)

// deviceAnswer is a decoded device authorization answer.
type deviceAnswer struct {
	answer
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	Interval                int64  `json:"interval"`
}

// deviceAuthorize asks the device authorization endpoint for a device code for scope.
func deviceAuthorize(t testing.TB, srv *authserver.Server, auth clientAuth, scope string) deviceAnswer {
	t.Helper()
	form := url.Values{}
	if scope != "" {
		form.Set("scope", scope)
	}
	d := deviceAnswer{answer: post(t, srv.DeviceAuthorizationURL(), auth, form)}
	raw, _ := json.Marshal(d.Raw)
	_ = json.Unmarshal(raw, &d)
	return d
}

// startDevice asks for a device code for "read write", which must be granted.
func startDevice(t testing.TB, srv *authserver.Server, auth clientAuth) deviceAnswer {
	t.Helper()
	d := deviceAuthorize(t, srv, auth, "read write")
	wantStatus(t, d.answer, http.StatusOK)
	return d
}

// poll asks the token endpoint once for the tokens of deviceCode.
func poll(t testing.TB, srv *authserver.Server, auth clientAuth, deviceCode string, proofs ...string) answer {
	t.Helper()
	form := url.Values{"grant_type": {authserver.GrantDeviceCode}, "device_code": {deviceCode}}
	return post(t, srv.TokenURL(), auth, form, proofs...)
}

// deviceServer runs a server on a clock of its own.
func deviceServer(t *testing.T, opts authserver.Options) (*authserver.Server, *fakeclock.Clock) {
	t.Helper()
	clock := newClock()
	opts.Now = clock.Now
	return start(t, opts), clock
}

func TestDeviceMetadata(t *testing.T) {
	t.Parallel()
	for _, off := range []bool{false, true} {
		srv := start(t, authserver.Options{NoDeviceGrant: off})
		md := getMetadata(t, srv)
		endpoint, has := md["device_authorization_endpoint"]
		grants, _ := md["grant_types_supported"].([]any)
		listed := slices.Contains(grants, any(authserver.GrantDeviceCode))
		if off {
			if has || listed {
				t.Errorf("NoDeviceGrant: metadata %v", md)
			}
			continue
		}
		if endpoint != srv.URL()+"/device_authorization" || !listed {
			t.Errorf("metadata %v", md)
		}
		if !slices.Contains(grants, any(authserver.GrantAuthorizationCode)) || !slices.Contains(grants, any(authserver.GrantRefreshToken)) {
			t.Errorf("grant_types_supported %v", grants)
		}
	}
}

func getMetadata(t *testing.T, srv *authserver.Server) map[string]any {
	t.Helper()
	resp, err := http.Get(srv.URL() + authserver.PathMetadata)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var md map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&md); err != nil {
		t.Fatal(err)
	}
	return md
}

// TestNoDeviceGrant: with the grant off, its endpoints are not found and the
// token endpoint does not know the grant type.
func TestNoDeviceGrant(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{NoDeviceGrant: true})
	for _, req := range []*http.Request{
		newPost(t, srv.DeviceAuthorizationURL(), public, nil),
		httptest.NewRequest(http.MethodGet, srv.DeviceURL(), nil),
		newPost(t, srv.DeviceURL(), clientAuth{}, url.Values{"user_code": {"BCDFGHJK"}, "decision": {"allow"}}),
	} {
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		if rec.Code != http.StatusNotFound {
			t.Errorf("%s %s: %d, want 404", req.Method, req.URL.Path, rec.Code)
		}
	}
	wantError(t, poll(t, srv, confidential, "x"), http.StatusBadRequest, "unsupported_grant_type")
}

func TestDeviceAuthorizationAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                string
		opts                authserver.Options
		expiresIn, interval int64
	}{
		{"defaults", authserver.Options{}, 600, 5},
		{"set", authserver.Options{DeviceCodeTTL: 90 * time.Second, DeviceInterval: 2 * time.Second}, 90, 2},
		{"rounded up", authserver.Options{DeviceCodeTTL: 1500 * time.Millisecond, DeviceInterval: time.Millisecond}, 2, 1},
		{"no interval", authserver.Options{NoDeviceInterval: true}, 600, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, tt.opts)
			d := startDevice(t, srv, confidential)
			if d.ExpiresIn != tt.expiresIn || d.Interval != tt.interval {
				t.Fatalf("expires_in %d interval %d, want %d %d", d.ExpiresIn, d.Interval, tt.expiresIn, tt.interval)
			}
			if _, has := d.Raw["interval"]; has != (tt.interval != 0) {
				t.Fatalf("interval present %v: %v", has, d.Raw)
			}
			wantDeviceAnswer(t, srv, d)
		})
	}
}

// wantDeviceAnswer checks the codes and URIs of a device authorization answer.
func wantDeviceAnswer(t *testing.T, srv *authserver.Server, d deviceAnswer) {
	t.Helper()
	if len(d.DeviceCode) < 20 || !userCodePattern.MatchString(d.UserCode) {
		t.Fatalf("device_code %q user_code %q", d.DeviceCode, d.UserCode)
	}
	if d.VerificationURI != srv.URL()+"/device" || d.VerificationURIComplete != d.VerificationURI+"?user_code="+d.UserCode {
		t.Fatalf("verification URIs %q %q", d.VerificationURI, d.VerificationURIComplete)
	}
	if d.Header.Get("Cache-Control") != "no-store" {
		t.Fatalf("Cache-Control %q", d.Header.Get("Cache-Control"))
	}
}

// TestDeviceCodesAreFresh: every device authorization gets its own codes.
func TestDeviceCodesAreFresh(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	devices, users := map[string]bool{}, map[string]bool{}
	const n = 200
	for range n {
		d := startDevice(t, srv, public)
		if !userCodePattern.MatchString(d.UserCode) {
			t.Fatalf("user_code %q", d.UserCode)
		}
		devices[d.DeviceCode], users[d.UserCode] = true, true
	}
	if len(devices) != n || len(users) != n {
		t.Fatalf("%d device codes and %d user codes for %d authorizations", len(devices), len(users), n)
	}
	// Every letter of the alphabet is drawn: in 1600 fair draws, one letter is
	// missing with a chance of about 1 in 10^34.
	letters := map[rune]bool{}
	for code := range users {
		for _, r := range strings.ReplaceAll(code, "-", "") {
			letters[r] = true
		}
	}
	if len(letters) != 20 {
		t.Fatalf("user codes use %d letters, want 20: %v", len(letters), letters)
	}
	if st := srv.Stats(); st.DeviceAuthorizations != n {
		t.Fatalf("stats %+v", st)
	}
}

// TestDeviceCodesAreForgotten: an expired device code is answered expired_token
// for another lifetime, until a sweep forgets it.
func TestDeviceCodesAreForgotten(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{DeviceCodeTTL: time.Minute})
	d := startDevice(t, srv, public)
	sweep := func() { // the server sweeps once every 512 new records
		for range 512 {
			startDevice(t, srv, public)
		}
	}
	clock.Advance(2*time.Minute - time.Nanosecond)
	sweep()
	wantError(t, poll(t, srv, public, d.DeviceCode), http.StatusBadRequest, "expired_token")
	clock.Advance(time.Nanosecond)
	sweep()
	wantError(t, poll(t, srv, public, d.DeviceCode), http.StatusBadRequest, "invalid_grant")
	if err := srv.ApproveDevice(d.UserCode, ""); !errors.Is(err, authserver.ErrUserCodeUnknown) {
		t.Fatalf("ApproveDevice of a forgotten code: %v", err)
	}
}

// TestDeviceAuthorizationClientAuth: the client authenticates as at the token endpoint.
func TestDeviceAuthorizationClientAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		auth   clientAuth
		status int
		code   string
	}{
		{"basic", confidential, http.StatusOK, ""},
		{"post", clientAuth{id: authserver.DefaultClientID, secret: authserver.DefaultClientSecret}, http.StatusOK, ""},
		{"public by client_id", public, http.StatusOK, ""},
		{"wrong secret", clientAuth{id: authserver.DefaultClientID, secret: "nope", basic: true}, http.StatusUnauthorized, "invalid_client"},
		{"confidential without secret", clientAuth{id: authserver.DefaultClientID}, http.StatusUnauthorized, "invalid_client"},
		{"public with a secret", clientAuth{id: authserver.DefaultPublicClientID, secret: "s"}, http.StatusUnauthorized, "invalid_client"},
		{"unknown client", clientAuth{id: "stranger"}, http.StatusUnauthorized, "invalid_client"},
		{"none", clientAuth{}, http.StatusUnauthorized, "invalid_client"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{})
			d := deviceAuthorize(t, srv, tt.auth, "read")
			if d.Status != tt.status || d.Error != tt.code {
				t.Fatalf("got %d %q, want %d %q; answer %v", d.Status, d.Error, tt.status, tt.code, d.Raw)
			}
			want := int64(0)
			if tt.status == http.StatusOK {
				want = 1
			}
			if got := srv.Stats().DeviceAuthorizations; got != want {
				t.Fatalf("DeviceAuthorizations %d, want %d", got, want)
			}
		})
	}
}

func TestDeviceAuthorizationNeedsAForm(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	resp, err := http.Post(srv.DeviceAuthorizationURL(), "application/json", strings.NewReader(`{"client_id":"demo-public"}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if a := decodeAnswer(t, resp); a.Status != http.StatusBadRequest || a.Error != "invalid_request" {
		t.Fatalf("got %d %v", a.Status, a.Raw)
	}
}

// TestDeviceSignIn runs the grant through: pending until the user allows, then
// tokens once, of the scope asked, for the user who allowed.
func TestDeviceSignIn(t *testing.T) {
	t.Parallel()
	for _, auth := range []clientAuth{confidential, public} {
		t.Run(auth.id, func(t *testing.T) {
			t.Parallel()
			srv, clock := deviceServer(t, authserver.Options{})
			d := startDevice(t, srv, auth)
			wantError(t, poll(t, srv, auth, d.DeviceCode), http.StatusBadRequest, "authorization_pending")
			if err := srv.ApproveDevice(d.UserCode, "alice"); err != nil {
				t.Fatal(err)
			}
			clock.Advance(authserver.DefaultDeviceInterval)
			a := poll(t, srv, auth, d.DeviceCode)
			wantStatus(t, a, http.StatusOK)
			if a.AccessToken == "" || a.RefreshToken == "" || a.TokenType != "Bearer" || a.Scope != "read write" || a.ExpiresIn != 3600 {
				t.Fatalf("tokens %v", a.Raw)
			}
			if resp, me := callAPI(t, srv, a.AccessToken); resp.StatusCode != http.StatusOK || me.User != "alice" || me.Scope != "read write" {
				t.Fatalf("API: %d %+v", resp.StatusCode, me)
			}
			wantStatus(t, refresh(t, srv, auth, a.RefreshToken), http.StatusOK)

			// The device code is redeemed once; a late poll leaves the tokens alone.
			clock.Advance(authserver.DefaultDeviceInterval)
			wantError(t, poll(t, srv, auth, d.DeviceCode), http.StatusBadRequest, "invalid_grant")
			if resp, _ := callAPI(t, srv, a.AccessToken); resp.StatusCode != http.StatusOK {
				t.Fatalf("API after a late poll: %d", resp.StatusCode)
			}
			want := authserver.Stats{DeviceAuthorizations: 1, DevicePolls: 3, DevicePending: 1, DeviceApprovals: 1, DeviceTokens: 1, DeviceRedeemedPolls: 1}
			wantDeviceStats(t, srv, want)
		})
	}
}

// wantDeviceStats compares the device counters of srv with want's.
func wantDeviceStats(t *testing.T, srv *authserver.Server, want authserver.Stats) {
	t.Helper()
	st := srv.Stats()
	got := authserver.Stats{
		DeviceAuthorizations: st.DeviceAuthorizations, DevicePolls: st.DevicePolls,
		DevicePending: st.DevicePending, DeviceSlowDowns: st.DeviceSlowDowns,
		DeviceApprovals: st.DeviceApprovals, DeviceDenials: st.DeviceDenials,
		DeviceExpiries: st.DeviceExpiries, DeviceTokens: st.DeviceTokens,
		DeviceRedeemedPolls: st.DeviceRedeemedPolls,
	}
	if got != want {
		t.Fatalf("device stats\n got %+v\nwant %+v", got, want)
	}
}

// TestApproveDeviceNamesTheUser: an empty user is Options.User, and the user code
// may be typed without its hyphen, in any case.
func TestApproveDeviceNamesTheUser(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{User: "octocat"})
	d := startDevice(t, srv, public)
	if err := srv.ApproveDevice(strings.ToLower(strings.ReplaceAll(d.UserCode, "-", " ")), ""); err != nil {
		t.Fatal(err)
	}
	a := poll(t, srv, public, d.DeviceCode)
	wantStatus(t, a, http.StatusOK)
	if _, me := callAPI(t, srv, a.AccessToken); me.User != "octocat" {
		t.Fatalf("user %q, want octocat", me.User)
	}
}

func TestDeviceDenied(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{})
	d := startDevice(t, srv, confidential)
	if err := srv.DenyDevice(d.UserCode); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		wantError(t, poll(t, srv, confidential, d.DeviceCode), http.StatusBadRequest, "access_denied")
		clock.Advance(authserver.DefaultDeviceInterval)
	}
	if err := srv.ApproveDevice(d.UserCode, ""); !errors.Is(err, authserver.ErrUserCodeAnswered) {
		t.Fatalf("ApproveDevice after a denial: %v", err)
	}
	wantDeviceStats(t, srv, authserver.Stats{DeviceAuthorizations: 1, DevicePolls: 2, DeviceDenials: 1})
}

func TestDeviceDecisionErrors(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{})
	d := startDevice(t, srv, confidential)
	if err := srv.ApproveDevice("AAAA-AAAA", ""); !errors.Is(err, authserver.ErrUserCodeUnknown) {
		t.Fatalf("unknown user code: %v", err)
	}
	if err := srv.ApproveDevice(d.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	for _, decide := range []func() error{
		func() error { return srv.ApproveDevice(d.UserCode, "") },
		func() error { return srv.DenyDevice(d.UserCode) },
	} {
		if err := decide(); !errors.Is(err, authserver.ErrUserCodeAnswered) {
			t.Fatalf("second decision: %v", err)
		}
	}
	late := startDevice(t, srv, confidential)
	clock.Advance(authserver.DefaultDeviceCodeTTL)
	if err := srv.DenyDevice(late.UserCode); !errors.Is(err, authserver.ErrUserCodeExpired) {
		t.Fatalf("expired user code: %v", err)
	}
	wantDeviceStats(t, srv, authserver.Stats{DeviceAuthorizations: 2, DeviceApprovals: 1})
}

// TestDeviceCodeExpires: a poll at the lifetime's end is expired_token, even for a
// code the user allowed; a poll just before is not.
func TestDeviceCodeExpires(t *testing.T) {
	t.Parallel()
	ttl := 2 * time.Minute
	srv, clock := deviceServer(t, authserver.Options{DeviceCodeTTL: ttl})
	pending, allowed := startDevice(t, srv, confidential), startDevice(t, srv, confidential)
	if err := srv.ApproveDevice(allowed.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(ttl - time.Nanosecond)
	wantError(t, poll(t, srv, confidential, pending.DeviceCode), http.StatusBadRequest, "authorization_pending")
	clock.Advance(time.Nanosecond)
	wantError(t, poll(t, srv, confidential, pending.DeviceCode), http.StatusBadRequest, "expired_token")
	wantError(t, poll(t, srv, confidential, allowed.DeviceCode), http.StatusBadRequest, "expired_token")
	wantDeviceStats(t, srv, authserver.Stats{DeviceAuthorizations: 2, DevicePolls: 3, DevicePending: 1, DeviceApprovals: 1, DeviceExpiries: 2})
}

// TestDeviceSlowDown: a poll sooner than the interval is slow_down, and each
// slow_down makes the code's interval 5 seconds longer (RFC 8628 §3.5).
func TestDeviceSlowDown(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{DeviceInterval: 2 * time.Second})
	d := startDevice(t, srv, confidential)
	other := startDevice(t, srv, confidential)
	steps := []struct {
		wait time.Duration
		want string
	}{
		{0, "authorization_pending"},                // the first poll may come at once
		{2 * time.Second, "authorization_pending"},  // exactly the interval
		{time.Second, "slow_down"},                  // too soon: the interval is now 7 s
		{7*time.Second - 1, "slow_down"},            // too soon again: 12 s
		{12 * time.Second, "authorization_pending"}, // the grown interval
		{12*time.Second - 1, "slow_down"},           // it stays grown: 17 s
		{17 * time.Second, "authorization_pending"}, // and so on
	}
	for i, step := range steps {
		clock.Advance(step.wait)
		if a := poll(t, srv, confidential, d.DeviceCode); a.Error != step.want || a.Status != http.StatusBadRequest {
			t.Fatalf("step %d: got %d %q, want 400 %q", i, a.Status, a.Error, step.want)
		}
	}
	// The interval is the code's own: another code polled now is not slowed down.
	wantError(t, poll(t, srv, confidential, other.DeviceCode), http.StatusBadRequest, "authorization_pending")
	// Once allowed, a poll that comes too soon still waits for its tokens.
	if err := srv.ApproveDevice(d.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Second)
	wantError(t, poll(t, srv, confidential, d.DeviceCode), http.StatusBadRequest, "slow_down")
	clock.Advance(22 * time.Second)
	wantStatus(t, poll(t, srv, confidential, d.DeviceCode), http.StatusOK)
	wantDeviceStats(t, srv, authserver.Stats{DeviceAuthorizations: 2, DevicePolls: 10, DevicePending: 5, DeviceSlowDowns: 4, DeviceApprovals: 1, DeviceTokens: 1})
}

// TestSlowDownNext forces slow_down on a poll that comes in time, and the code's
// interval grows as if it had come too soon.
func TestSlowDownNext(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{DeviceInterval: time.Second})
	d := startDevice(t, srv, confidential)
	srv.SlowDownNext()
	// Polls that are refused before the code's state is read leave it pending.
	wantError(t, poll(t, srv, confidential, "unknown"), http.StatusBadRequest, "invalid_grant")
	wantError(t, poll(t, srv, public, d.DeviceCode), http.StatusBadRequest, "invalid_grant")
	wantError(t, poll(t, srv, confidential, d.DeviceCode), http.StatusBadRequest, "slow_down")
	clock.Advance(5 * time.Second)
	wantError(t, poll(t, srv, confidential, d.DeviceCode), http.StatusBadRequest, "slow_down")
	clock.Advance(11 * time.Second)
	wantError(t, poll(t, srv, confidential, d.DeviceCode), http.StatusBadRequest, "authorization_pending")
	wantDeviceStats(t, srv, authserver.Stats{DeviceAuthorizations: 1, DevicePolls: 5, DevicePending: 1, DeviceSlowDowns: 2})
}

// TestDevicePollRefused covers polls the server refuses before it looks at the
// code's state.
func TestDevicePollRefused(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	d := startDevice(t, srv, confidential)
	if err := srv.ApproveDevice(d.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		auth   clientAuth
		code   string
		status int
		err    string
	}{
		{"no device_code", confidential, "", http.StatusBadRequest, "invalid_request"},
		{"unknown device_code", confidential, "not-issued", http.StatusBadRequest, "invalid_grant"},
		{"the user code", confidential, d.UserCode, http.StatusBadRequest, "invalid_grant"},
		{"another client", public, d.DeviceCode, http.StatusBadRequest, "invalid_grant"},
		{"wrong secret", clientAuth{id: authserver.DefaultClientID, secret: "nope"}, d.DeviceCode, http.StatusUnauthorized, "invalid_client"},
		{"no client", clientAuth{}, d.DeviceCode, http.StatusUnauthorized, "invalid_client"},
	}
	for _, tt := range tests {
		wantError(t, poll(t, srv, tt.auth, tt.code), tt.status, tt.err)
	}
	// None of them used the code up.
	wantStatus(t, poll(t, srv, confidential, d.DeviceCode), http.StatusOK)
}

// TestDeviceScriptedFailures: FailNext with GrantDeviceCode answers device polls
// only, and the code stays as it was.
func TestDeviceScriptedFailures(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	d := startDevice(t, srv, confidential)
	srv.FailNext(
		authserver.Failure{Grant: authserver.GrantDeviceCode, Status: http.StatusServiceUnavailable},
		authserver.Failure{Grant: authserver.GrantDeviceCode, Status: http.StatusTooManyRequests, Error: "slow_down"},
	)
	a := signIn(t, srv) // the code grant and a refresh pass the device failures by
	wantStatus(t, refresh(t, srv, confidential, a.RefreshToken), http.StatusOK)

	wantError(t, poll(t, srv, confidential, d.DeviceCode), http.StatusServiceUnavailable, "temporarily_unavailable")
	wantError(t, poll(t, srv, confidential, d.DeviceCode), http.StatusTooManyRequests, "slow_down")
	if err := srv.ApproveDevice(d.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, poll(t, srv, confidential, d.DeviceCode), http.StatusOK)
	// The scripted answers did not count as polls the server answered, so none
	// was too soon; they are in the poll log all the same.
	wantDeviceStats(t, srv, authserver.Stats{DeviceAuthorizations: 1, DevicePolls: 3, DeviceApprovals: 1, DeviceTokens: 1})
	if polls := srv.DevicePollTimes(d.DeviceCode); len(polls) != 3 {
		t.Fatalf("poll log %v, want 3 polls", polls)
	}
}

// TestDevicePollLog: the server keeps the time of every poll of a code, and the
// least gap between two polls of one code, whichever code it is.
func TestDevicePollLog(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{DeviceInterval: time.Second})
	a, b := startDevice(t, srv, confidential), startDevice(t, srv, confidential)
	if gap, ok := srv.DevicePollGap(); ok {
		t.Fatalf("gap %v before any poll", gap)
	}
	start := clock.Now()
	poll(t, srv, confidential, a.DeviceCode)
	clock.Advance(time.Second)
	poll(t, srv, confidential, b.DeviceCode) // one second after a's poll, but b's first
	if gap, ok := srv.DevicePollGap(); ok {
		t.Fatalf("gap %v after one poll of each code", gap)
	}
	clock.Advance(3 * time.Second)
	poll(t, srv, confidential, a.DeviceCode)
	clock.Advance(2 * time.Second)
	poll(t, srv, confidential, b.DeviceCode)
	poll(t, srv, confidential, "unknown") // not a code the server issued: not logged
	if gap, ok := srv.DevicePollGap(); !ok || gap != 4*time.Second {
		t.Fatalf("gap %v %v, want 4s", gap, ok)
	}
	clock.Advance(500 * time.Millisecond)
	poll(t, srv, confidential, b.DeviceCode) // too soon: slow_down, and logged
	if gap, _ := srv.DevicePollGap(); gap != 500*time.Millisecond {
		t.Fatalf("gap %v, want 500ms", gap)
	}
	want := []time.Time{start, start.Add(4 * time.Second)}
	if got := srv.DevicePollTimes(a.DeviceCode); !slices.Equal(got, want) {
		t.Fatalf("poll times of a %v, want %v", got, want)
	}
	if got := srv.DevicePollTimes(b.DeviceCode); len(got) != 3 {
		t.Fatalf("poll times of b %v", got)
	}
	if got := srv.DevicePollTimes("unknown"); got != nil {
		t.Fatalf("poll times of an unknown code %v", got)
	}
}

// TestDeviceConcurrentPolls: many polls of an allowed code at once get its tokens
// exactly once.
func TestDeviceConcurrentPolls(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{})
	d := startDevice(t, srv, confidential)
	if err := srv.ApproveDevice(d.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	const n = 50
	var ok, slow, used, other atomic.Int64
	parallel(t, n, func(int) {
		switch pollQuietly(srv, d.DeviceCode) {
		case "":
			ok.Add(1)
		case "slow_down":
			slow.Add(1)
		case "invalid_grant":
			used.Add(1)
		default:
			other.Add(1)
		}
	})
	// The first poll the server answers gets the tokens; every other one finds the
	// code redeemed.
	if ok.Load() != 1 || used.Load() != n-1 || slow.Load() != 0 || other.Load() != 0 {
		t.Fatalf("%d tokens, %d slow_down, %d invalid_grant, %d other", ok.Load(), slow.Load(), used.Load(), other.Load())
	}
	if gap, _ := srv.DevicePollGap(); gap != 0 {
		t.Fatalf("gap %v, want 0", gap)
	}
	clock.Advance(time.Hour)
	parallel(t, n, func(int) {
		if pollQuietly(srv, d.DeviceCode) == "" {
			ok.Add(1)
		}
	})
	if st := srv.Stats(); ok.Load() != 1 || st.DeviceTokens != 1 || st.DeviceRedeemedPolls != 2*n-1 || st.DevicePolls != 2*n {
		t.Fatalf("%d tokens; stats %+v", ok.Load(), st)
	}
}

// pollQuietly polls from a goroutine other than the test's and returns the error
// code, "" for tokens, or "request failed".
func pollQuietly(srv *authserver.Server, deviceCode string) string {
	form := url.Values{"grant_type": {authserver.GrantDeviceCode}, "device_code": {deviceCode}}
	req, err := http.NewRequest(http.MethodPost, srv.TokenURL(), strings.NewReader(form.Encode()))
	if err != nil {
		return "request failed"
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(authserver.DefaultClientID, authserver.DefaultClientSecret)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "request failed"
	}
	defer resp.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		Error       string `json:"error"`
	}
	if json.NewDecoder(resp.Body).Decode(&body) != nil || (body.AccessToken == "") == (body.Error == "") {
		return "request failed"
	}
	return body.Error
}

// TestDeviceDPoP: a device poll with a proof gets a bound token, and the grant's
// refresh token is bound to the same key.
func TestDeviceDPoP(t *testing.T) {
	t.Parallel()
	p := dpopServer(t, authserver.Options{})
	d := startDevice(t, p.srv, public)
	if err := p.srv.ApproveDevice(d.UserCode, ""); err != nil {
		t.Fatal(err)
	}
	a := poll(t, p.srv, public, d.DeviceCode, p.tokenProof(t, ""))
	wantStatus(t, a, http.StatusOK)
	if a.TokenType != "DPoP" {
		t.Fatalf("token_type %q, want DPoP", a.TokenType)
	}
	wantError(t, refresh(t, p.srv, public, a.RefreshToken), http.StatusBadRequest, "invalid_grant")
	wantStatus(t, refresh(t, p.srv, public, a.RefreshToken, p.tokenProof(t, "")), http.StatusOK)
}

// devicePage gets the verification page with query q.
func devicePage(t *testing.T, srv *authserver.Server, q url.Values) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.DeviceURL() + "?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("Content-Type %q", resp.Header.Get("Content-Type"))
	}
	return resp.StatusCode, string(body)
}

// deviceDecide posts the device page's form the way a browser would, from the
// page's URL.
func deviceDecide(t *testing.T, srv *authserver.Server, form url.Values) (int, string) {
	t.Helper()
	action, _ := url.Parse(srv.DeviceURL() + "?user_code=ignored")
	action, _ = action.Parse("device") // the form's relative action
	resp, err := noFollow.PostForm(action.String(), form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

var loginHintField = regexp.MustCompile(`name="login_hint" value="([^"]*)"`)

func TestDevicePage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		decision, result, wantErr string
	}{
		{"allow", "Access allowed", ""},
		{"deny", "Access denied", "access_denied"},
	}
	for _, tt := range tests {
		t.Run(tt.decision, func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{})
			d := startDevice(t, srv, confidential)
			complete, _ := url.Parse(d.VerificationURIComplete)
			q := complete.Query()
			q.Set("login_hint", "bob")
			status, page := devicePage(t, srv, q)
			for _, want := range []string{`value="` + d.UserCode + `"`, authserver.DefaultClientID, "read write", `id="allow"`, `id="deny"`, "bob"} {
				if status != http.StatusOK || !strings.Contains(page, want) {
					t.Fatalf("page (%d) lacks %q: %s", status, want, page)
				}
			}
			hint := loginHintField.FindStringSubmatch(page)
			if hint == nil || hint[1] != "bob" {
				t.Fatalf("no login_hint field for bob: %s", page)
			}
			form := url.Values{"user_code": {d.UserCode}, "login_hint": {hint[1]}, "decision": {tt.decision}}
			if status, page := deviceDecide(t, srv, form); status != http.StatusOK || !strings.Contains(page, tt.result) {
				t.Fatalf("decision: %d %s", status, page)
			}
			a := poll(t, srv, confidential, d.DeviceCode)
			if tt.wantErr != "" {
				wantError(t, a, http.StatusBadRequest, tt.wantErr)
			} else if _, me := callAPI(t, srv, a.AccessToken); me.User != "bob" {
				t.Fatalf("signed in as %q, want bob", me.User)
			}
			// A user code is answered once.
			if status, page := deviceDecide(t, srv, form); status != http.StatusBadRequest || !strings.Contains(page, "already used") {
				t.Fatalf("second decision: %d %s", status, page)
			}
		})
	}
}

// TestDevicePageEntersACode: the page without a code asks for one; the code typed
// in lower case without its hyphen is accepted, for the default user.
func TestDevicePageEntersACode(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	status, page := devicePage(t, srv, nil)
	if status != http.StatusOK || !strings.Contains(page, `name="user_code" value=""`) || strings.Contains(page, `id="error"`) {
		t.Fatalf("empty page (%d): %s", status, page)
	}
	d := startDevice(t, srv, public)
	typed := strings.ToLower(strings.ReplaceAll(d.UserCode, "-", ""))
	if status, page := deviceDecide(t, srv, url.Values{"user_code": {typed}, "decision": {"allow"}}); status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, page)
	}
	a := poll(t, srv, public, d.DeviceCode)
	if _, me := callAPI(t, srv, a.AccessToken); me.User != authserver.DefaultUser {
		t.Fatalf("signed in as %q, want %q", me.User, authserver.DefaultUser)
	}
	if st := srv.Stats(); st.DeviceApprovals != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDevicePageRefusesBadCodes(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{})
	d := startDevice(t, srv, public)
	status, page := devicePage(t, srv, url.Values{"user_code": {"AAAA-AAAA"}})
	if status != http.StatusOK || !strings.Contains(page, "not valid") || strings.Contains(page, `id="client"`) {
		t.Fatalf("unknown code (%d): %s", status, page)
	}
	if status, page := deviceDecide(t, srv, url.Values{"user_code": {"AAAA-AAAA"}, "decision": {"allow"}}); status != http.StatusBadRequest || !strings.Contains(page, "not valid") {
		t.Fatalf("unknown code decision: %d %s", status, page)
	}
	clock.Advance(authserver.DefaultDeviceCodeTTL)
	if _, page := devicePage(t, srv, url.Values{"user_code": {d.UserCode}}); !strings.Contains(page, "expired") {
		t.Fatalf("expired code: %s", page)
	}
	if status, _ := deviceDecide(t, srv, url.Values{"user_code": {d.UserCode}, "decision": {"allow"}}); status != http.StatusBadRequest {
		t.Fatalf("expired code decision: %d", status)
	}
	if st := srv.Stats(); st.DeviceApprovals != 0 {
		t.Fatalf("stats %+v", st)
	}
}

func TestDevicePageEscapes(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	d := deviceAuthorize(t, srv, public, `"><script>alert(1)</script>`)
	q := url.Values{"user_code": {d.UserCode}, "login_hint": {`<img src=x onerror=alert(1)>`}}
	_, page := devicePage(t, srv, q)
	_, posted := deviceDecide(t, srv, url.Values{"user_code": {`"><script>alert(2)</script>`}})
	for _, p := range []string{page, posted} {
		if strings.Contains(p, "<script>alert") || strings.Contains(p, "<img") {
			t.Fatalf("page echoes markup: %s", p)
		}
	}
}

var formAction = regexp.MustCompile(`<form method="post" action="([^"]+)"`)

// TestDevicePageUnderAPrefix: mounted under a path prefix, the server names its
// verification URI after its issuer, and the page's form posts back under the prefix.
func TestDevicePageUnderAPrefix(t *testing.T) {
	t.Parallel()
	const issuer = "http://as.test/demo"
	srv := authserver.New(authserver.Options{Issuer: issuer})
	t.Cleanup(srv.Close)
	mux := http.NewServeMux()
	mux.Handle("/demo/", http.StripPrefix("/demo", srv))
	serve := func(req *http.Request) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}

	rec := serve(newPost(t, srv.DeviceAuthorizationURL(), public, url.Values{"scope": {"read"}}))
	var d deviceAnswer
	if err := json.Unmarshal(rec.Body.Bytes(), &d); err != nil || rec.Code != http.StatusOK {
		t.Fatalf("device authorization: %d %s", rec.Code, rec.Body)
	}
	if d.VerificationURI != issuer+"/device" {
		t.Fatalf("verification_uri %q", d.VerificationURI)
	}
	page := serve(httptest.NewRequest(http.MethodGet, d.VerificationURIComplete, nil))
	m := formAction.FindStringSubmatch(page.Body.String())
	if page.Code != http.StatusOK || m == nil {
		t.Fatalf("page: %d %s", page.Code, page.Body)
	}
	base, _ := url.Parse(d.VerificationURIComplete)
	action, err := base.Parse(m[1])
	if err != nil || action.String() != issuer+"/device" {
		t.Fatalf("the form posts to %v (%v), want %s/device", action, err, issuer)
	}
	form := url.Values{"user_code": {d.UserCode}, "decision": {"allow"}}
	req := httptest.NewRequest(http.MethodPost, action.String(), strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if rec := serve(req); rec.Code != http.StatusOK || srv.Stats().DeviceApprovals != 1 {
		t.Fatalf("decision: %d %s", rec.Code, rec.Body)
	}
}

// TestDevicePollLogKeepsTheLatest: the log of one code keeps its latest 1024 polls.
func TestDevicePollLogKeepsTheLatest(t *testing.T) {
	t.Parallel()
	srv, clock := deviceServer(t, authserver.Options{})
	d := startDevice(t, srv, public)
	form := url.Values{"grant_type": {authserver.GrantDeviceCode}, "device_code": {d.DeviceCode}}
	const n = 1030
	for range n {
		clock.Advance(time.Millisecond)
		srv.ServeHTTP(httptest.NewRecorder(), newPost(t, srv.TokenURL(), public, form))
	}
	polls := srv.DevicePollTimes(d.DeviceCode)
	if len(polls) != 1024 || !polls[len(polls)-1].Equal(clock.Now()) || clock.Now().Sub(polls[0]) != 1023*time.Millisecond {
		t.Fatalf("%d polls kept, from %v to %v (now %v)", len(polls), polls[0], polls[len(polls)-1], clock.Now())
	}
	if gap, ok := srv.DevicePollGap(); !ok || gap != time.Millisecond {
		t.Fatalf("gap %v %v, want 1ms", gap, ok)
	}
}
