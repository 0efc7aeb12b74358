package authserver

import (
	"context"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// Grant types the token endpoint supports.
const (
	GrantAuthorizationCode = "authorization_code"
	GrantRefreshToken      = "refresh_token"
	GrantDeviceCode        = "urn:ietf:params:oauth:grant-type:device_code" // RFC 8628 §3.4
)

// Failure scripts the answer to one token request, before the server looks at it: a
// code or refresh token the request carries stays usable.
//
// Delay alone slows the request down and then answers it normally; a delay ends early,
// with no answer, when the request's context ends (the client gave up), or with a 503
// when the server is closed. Status, Error or Body replace the answer:
//
//	Failure{Status: 503}                      // 503 {"error":"temporarily_unavailable"}
//	Failure{Error: "invalid_grant"}           // 400 {"error":"invalid_grant"}
//	Failure{Status: 200, Error: "slow_down"}  // 200 with an error field
//	Failure{Status: 502, Body: "<html>bad"}   // any body, sent as is
type Failure struct {
	// Grant limits the failure to one grant type (GrantAuthorizationCode,
	// GrantRefreshToken, GrantDeviceCode); empty matches any token request.
	Grant string
	// Delay is how long to wait before answering.
	Delay time.Duration
	// Status is the HTTP status; 0 means 401 for invalid_client, 400 for another Error,
	// and 200 for a Body.
	Status int
	// Error is the RFC 6749 error code; empty means one that fits Status.
	Error string
	// Description is the error_description.
	Description string
	// Body, when set, is sent verbatim as the answer, as application/json when it is
	// valid JSON and as text/html otherwise (an error page from a proxy, say).
	Body string
}

// replaces reports whether f answers in place of the server.
func (f *Failure) replaces() bool { return f.Status != 0 || f.Error != "" || f.Body != "" }

// write answers f.
func (f *Failure) write(w http.ResponseWriter) {
	if f.Body != "" {
		w.Header().Set("Content-Type", bodyType(f.Body))
		w.WriteHeader(statusOr(f.Status, http.StatusOK))
		_, _ = w.Write([]byte(f.Body))
		return
	}
	code := f.Error
	if code == "" {
		code = errorCodeFor(f.Status)
	}
	status := f.Status
	if status == 0 {
		status = statusOr(errorCodeStatus(code), http.StatusBadRequest)
	}
	writeOAuthError(w, newError(status, code, f.Description))
}

func bodyType(body string) string {
	if json.Valid([]byte(body)) {
		return "application/json"
	}
	return "text/html; charset=utf-8"
}

func statusOr(status, def int) int {
	if status == 0 {
		return def
	}
	return status
}

// errorCodeFor picks an RFC 6749 error code that fits an HTTP status.
func errorCodeFor(status int) string {
	switch {
	case status == http.StatusServiceUnavailable:
		return "temporarily_unavailable"
	case status >= 500:
		return "server_error"
	case status == http.StatusUnauthorized:
		return "invalid_client"
	}
	return "invalid_request"
}

func errorCodeStatus(code string) int {
	if code == "invalid_client" {
		return http.StatusUnauthorized
	}
	return 0
}

// failureQueue holds the failures scripted with FailNext.
type failureQueue struct {
	mu    sync.Mutex
	queue []Failure
}

// FailNext queues failures for the coming token requests. Each is used once, by the
// first token request it matches; failures are tried in the order they were queued.
func (s *Server) FailNext(f ...Failure) {
	q := &s.failures
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, f...)
}

// take removes and returns the first queued failure for grant, or nil.
func (q *failureQueue) take(grant string) *Failure {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i, f := range q.queue {
		if f.Grant == "" || f.Grant == grant {
			q.queue = append(q.queue[:i:i], q.queue[i+1:]...)
			return &f
		}
	}
	return nil
}

// nextFailure is the scripted failure for a token request with grant, or nil.
func (s *Server) nextFailure(grant string) *Failure {
	if f := s.failures.take(grant); f != nil {
		return f
	}
	if s.opts.OnToken != nil {
		return s.opts.OnToken(grant)
	}
	return nil
}

// applyFailure plays f, if any, and reports whether the request has been answered.
func (s *Server) applyFailure(w http.ResponseWriter, r *http.Request, f *Failure) bool {
	if f == nil {
		return false
	}
	if f.Delay > 0 {
		if !s.sleep(r.Context(), f.Delay) {
			if r.Context().Err() == nil { // the server is closing
				writeOAuthError(w, newError(http.StatusServiceUnavailable, "temporarily_unavailable", "server closing"))
			}
			return true
		}
	}
	if !f.replaces() {
		return false
	}
	f.write(w)
	return true
}

// sleep waits d and reports true, or reports false as soon as ctx ends or the server closes.
func (s *Server) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-s.done:
		return false
	}
}
