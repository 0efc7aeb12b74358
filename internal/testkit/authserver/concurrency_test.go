package authserver_test

import (
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"golang.org/x/oauth2"
)

// parallel runs f n times at once and waits for all of them.
func parallel(t *testing.T, n int, f func(i int)) {
	var wg sync.WaitGroup
	wg.Add(n)
	for i := range n {
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	waitfor.Group(t, &wg, "the parallel calls")
}

// TestManyParallelFlows signs in 1000 times at once; every flow must succeed.
func TestManyParallelFlows(t *testing.T) {
	t.Parallel()
	const n = 1000
	srv := start(t, authserver.Options{RotateRefreshTokens: true})
	var failed atomic.Int64
	parallel(t, n, func(int) {
		verifier := oauth2.GenerateVerifier()
		q := authParams(verifier)
		resp, err := noFollow.Get(srv.AuthURL() + "?" + q.Encode())
		if err != nil {
			failed.Add(1)
			return
		}
		resp.Body.Close()
		loc, _ := url.Parse(resp.Header.Get("Location"))
		if exchangeQuietly(srv, loc.Query().Get("code"), verifier) != http.StatusOK {
			failed.Add(1)
		}
	})
	if failed.Load() != 0 {
		t.Fatalf("%d of %d flows failed", failed.Load(), n)
	}
	if st := srv.Stats(); st.CodesExchanged != n || st.CodeRequests != n || st.Authorizations != n {
		t.Fatalf("stats %+v", st)
	}
}

// exchangeQuietly exchanges a code from a goroutine other than the test's and
// returns the status, or 0 when the request failed.
func exchangeQuietly(srv *authserver.Server, code, verifier string) int {
	form := url.Values{"grant_type": {"authorization_code"}, "code": {code},
		"redirect_uri": {callback}, "code_verifier": {verifier}}
	return postQuietly(srv, form)
}

func postQuietly(srv *authserver.Server, form url.Values) int {
	form.Set("client_id", authserver.DefaultClientID)
	form.Set("client_secret", authserver.DefaultClientSecret)
	resp, err := http.PostForm(srv.TokenURL(), form)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestOneCodeManyExchanges presents one code 100 times at once: exactly one exchange wins.
func TestOneCodeManyExchanges(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	verifier := oauth2.GenerateVerifier()
	code := getCode(t, srv, authParams(verifier))
	statuses := make([]int, 100)
	parallel(t, len(statuses), func(i int) { statuses[i] = exchangeQuietly(srv, code, verifier) })
	if ok := count(statuses, http.StatusOK); ok != 1 || count(statuses, http.StatusBadRequest) != 99 {
		t.Fatalf("statuses %v: want one 200 and 99 400", statuses)
	}
	if st := srv.Stats(); st.CodesExchanged != 1 || st.CodeRequests != 100 {
		t.Fatalf("stats %+v", st)
	}
}

// TestOneRefreshTokenManyRefreshes refreshes with one rotating refresh token 100 times
// at once: exactly one refresh wins.
func TestOneRefreshTokenManyRefreshes(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{RotateRefreshTokens: true})
	rt := signIn(t, srv).RefreshToken
	statuses := make([]int, 100)
	parallel(t, len(statuses), func(i int) {
		statuses[i] = postQuietly(srv, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
	})
	if ok := count(statuses, http.StatusOK); ok != 1 {
		t.Fatalf("statuses %v: want exactly one 200", statuses)
	}
	if st := srv.Stats(); st.Refreshes != 1 || st.RefreshRequests != 100 {
		t.Fatalf("stats %+v", st)
	}
}

// TestConcurrentScriptedFailures takes 50 queued failures from 200 parallel requests:
// each failure is used exactly once.
func TestConcurrentScriptedFailures(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	rt := signIn(t, srv).RefreshToken
	for range 50 {
		srv.FailNext(authserver.Failure{Status: http.StatusServiceUnavailable})
	}
	statuses := make([]int, 200)
	parallel(t, len(statuses), func(i int) {
		statuses[i] = postQuietly(srv, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}})
	})
	if count(statuses, http.StatusServiceUnavailable) != 50 || count(statuses, http.StatusOK) != 150 {
		t.Fatalf("statuses %v: want 50 503 and 150 200", statuses)
	}
}

func count(statuses []int, status int) int {
	n := 0
	for _, s := range statuses {
		if s == status {
			n++
		}
	}
	return n
}
