package authserver_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow/internal/testkit/authserver"
	"golang.org/x/oauth2"
)

func TestScriptedFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		failure authserver.Failure
		status  int
		code    string
	}{
		{"503", authserver.Failure{Status: 503}, 503, "temporarily_unavailable"},
		{"500", authserver.Failure{Status: 500}, 500, "server_error"},
		{"invalid_grant", authserver.Failure{Error: "invalid_grant", Description: "scripted"}, 400, "invalid_grant"},
		{"invalid_client", authserver.Failure{Error: "invalid_client"}, 401, "invalid_client"},
		{"200 with an error field", authserver.Failure{Status: 200, Error: "invalid_grant"}, 200, "invalid_grant"},
		{"raw body", authserver.Failure{Status: 502, Body: `{"error":"bad_gateway"}`}, 502, "bad_gateway"},
		{"short delay, then an error", authserver.Failure{Delay: time.Millisecond, Status: 503}, 503, "temporarily_unavailable"},
		{"for the code grant", authserver.Failure{Grant: authserver.GrantAuthorizationCode, Error: "invalid_grant"}, 400, "invalid_grant"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := start(t, authserver.Options{})
			verifier := oauth2.GenerateVerifier()
			code := getCode(t, srv, authParams(verifier))
			srv.FailNext(tt.failure)

			wantError(t, exchange(t, srv, confidential, code, verifier), tt.status, tt.code)
			// The failure is used once, and the code it blocked still works.
			wantStatus(t, exchange(t, srv, confidential, code, verifier), http.StatusOK)
			if st := srv.Stats(); st.CodeRequests != 2 || st.CodesExchanged != 1 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

func TestScriptedHTMLBody(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	srv.FailNext(authserver.Failure{Status: http.StatusBadGateway, Body: "<html>Bad Gateway</html>"})
	resp, err := http.PostForm(srv.TokenURL(), url.Values{"grant_type": {"refresh_token"}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusBadGateway || string(body) != "<html>Bad Gateway</html>" ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("got %d %q %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
}

func TestScriptedFailureForRefreshOnly(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	srv.FailNext(authserver.Failure{Grant: authserver.GrantRefreshToken, Error: "invalid_grant"})
	a := signIn(t, srv) // the code grant passes the refresh failure by
	wantError(t, refresh(t, srv, confidential, a.RefreshToken), http.StatusBadRequest, "invalid_grant")
	wantStatus(t, refresh(t, srv, confidential, a.RefreshToken), http.StatusOK)
}

func TestScriptedFailuresInOrder(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	srv.FailNext(authserver.Failure{Status: 503}, authserver.Failure{Status: 500})
	srv.FailNext(authserver.Failure{Error: "invalid_grant"})
	var got []int
	for range 4 {
		got = append(got, refresh(t, srv, confidential, "x").Status)
	}
	want := []int{503, 500, 400, 400}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("statuses %v, want %v", got, want)
		}
	}
	if a := refresh(t, srv, confidential, "x"); a.Description == "" {
		t.Fatalf("the queue should be empty, got %v", a.Raw)
	}
}

func TestScriptedDelay(t *testing.T) {
	t.Parallel()
	srv := start(t, authserver.Options{})
	a := signIn(t, srv)

	// A delay the client does not wait for: the client gets its own error, and the
	// refresh token is not used.
	srv.FailNext(authserver.Failure{Delay: time.Hour})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req := newPost(t, srv.TokenURL(), confidential, url.Values{"grant_type": {"refresh_token"}, "refresh_token": {a.RefreshToken}})
	_, err := http.DefaultClient.Do(req.WithContext(ctx))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want DeadlineExceeded", err)
	}
	// A delay alone, then a normal answer.
	srv.FailNext(authserver.Failure{Delay: time.Millisecond})
	wantStatus(t, refresh(t, srv, confidential, a.RefreshToken), http.StatusOK)
	if st := srv.Stats(); st.Refreshes != 1 || st.RefreshRequests != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// Close answers a request held by a scripted delay with a 503 and returns. Each
// wait is bounded, so a delay that outlives Close fails the test instead of hanging it.
func TestDelayEndsOnClose(t *testing.T) {
	t.Parallel()
	srv := authserver.Start(authserver.Options{})
	srv.FailNext(authserver.Failure{Delay: time.Hour})
	answered := make(chan int, 1)
	go func() {
		resp, err := http.PostForm(srv.TokenURL(), url.Values{"grant_type": {"refresh_token"}})
		if err != nil {
			t.Errorf("the delayed request failed instead of being answered: %v", err)
			answered <- 0
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	for deadline := time.Now().Add(10 * time.Second); srv.Stats().TokenRequests == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the token request never reached the server")
		}
	}
	closed := make(chan struct{})
	go func() { srv.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return within 10 s: the delayed request still held it")
	}
	select {
	case status := <-answered:
		if status != 0 && status != http.StatusServiceUnavailable {
			t.Fatalf("the delayed request was answered %d, want 503", status)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the delayed request was never answered after Close")
	}
}

func TestOnTokenHook(t *testing.T) {
	t.Parallel()
	var refreshes atomic.Int64
	srv := start(t, authserver.Options{OnToken: func(grant string) *authserver.Failure {
		if grant == authserver.GrantRefreshToken && refreshes.Add(1) <= 2 {
			return &authserver.Failure{Status: http.StatusBadGateway}
		}
		return nil
	}})
	a := signIn(t, srv)
	srv.FailNext(authserver.Failure{Error: "invalid_grant"}) // the queue goes first
	wantError(t, refresh(t, srv, confidential, a.RefreshToken), 400, "invalid_grant")
	wantError(t, refresh(t, srv, confidential, a.RefreshToken), 502, "server_error")
	wantError(t, refresh(t, srv, confidential, a.RefreshToken), 502, "server_error")
	wantStatus(t, refresh(t, srv, confidential, a.RefreshToken), http.StatusOK)
}
