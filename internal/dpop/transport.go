package dpop

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Transport is an http.RoundTripper that adds a fresh DPoP proof to each
// request to one origin and answers that origin's nonce challenges.
//
// A request to Origin (same scheme, host and port) is sent with a proof for
// its method and URL, carrying the nonce Nonces holds for the origin; when
// AccessToken gives a token, with Authorization: DPoP <token> and the
// token's hash in the proof. The DPoP-Nonce of every answer is remembered.
// When the answer is a use_dpop_nonce challenge (see Challenge), the request
// is sent once more with the new nonce, its body replayed through GetBody; a
// request whose body cannot be replayed gets the challenge as its answer. A
// request to any other origin passes through untouched: no proof, and no
// Authorization added, so neither follows a redirect elsewhere.
//
// The caller's request is never modified.
type Transport struct {
	Base   http.RoundTripper // nil: http.DefaultTransport
	Key    *Key              // required
	Nonces *Nonces           // nil: a nonce lives for its challenge's one retry
	Origin *url.URL          // required: the only origin proofs are sent to

	// AccessToken, when set, is the token to send with req: an error fails
	// the request unsent, and "" sends it with a proof but no token (a token
	// request). When AccessToken is nil, a token the request already carries
	// as Authorization: DPoP <token> (as x/oauth2's Transport sets for a
	// token of type DPoP) is bound by the proof.
	AccessToken func(req *http.Request) (string, error)

	Now func() time.Time // nil: time.Now
}

var _ http.RoundTripper = (*Transport)(nil)

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.Key == nil || t.Origin == nil {
		closeBody(req.Body)
		return nil, errors.New("dpop: Transport needs a Key and an Origin")
	}
	if originOf(req.URL) == "" || originOf(req.URL) != originOf(t.Origin) {
		return t.base().RoundTrip(req)
	}
	token, err := t.accessToken(req)
	if err != nil {
		closeBody(req.Body)
		return nil, fmt.Errorf("dpop: access token: %w", err)
	}
	resp, err := t.send(req, req.Body, token, t.Nonces.Get(req.URL))
	if err != nil {
		return nil, err
	}
	nonce, retry := Challenge(resp)
	t.Nonces.Set(req.URL, nonce)
	if !retry {
		return resp, nil
	}
	body, replayable := replayBody(req)
	if !replayable {
		return resp, nil
	}
	drainClose(resp.Body)
	if resp, err = t.send(req, body, token, nonce); err != nil {
		return nil, err
	}
	t.Nonces.Set(req.URL, responseNonce(resp))
	return resp, nil
}

// send sends a copy of req with body, a proof and, when token is set, the
// token.
func (t *Transport) send(req *http.Request, body io.ReadCloser, token, nonce string) (*http.Response, error) {
	proof, err := t.Key.Proof(req.Method, req.URL.String(), t.now(), token, nonce)
	if err != nil {
		closeBody(body)
		return nil, err
	}
	out := req.Clone(req.Context())
	out.Body = body
	out.Header.Set("DPoP", proof)
	if token != "" {
		out.Header.Set("Authorization", "DPoP "+token)
	}
	return t.base().RoundTrip(out)
}

func (t *Transport) accessToken(req *http.Request) (string, error) {
	if t.AccessToken != nil {
		return t.AccessToken(req)
	}
	scheme, token, _ := strings.Cut(req.Header.Get("Authorization"), " ")
	if strings.EqualFold(scheme, "DPoP") {
		return strings.TrimSpace(token), nil
	}
	return "", nil
}

func (t *Transport) base() http.RoundTripper {
	if t.Base != nil {
		return t.Base
	}
	return http.DefaultTransport
}

func (t *Transport) now() time.Time {
	if t.Now != nil {
		return t.Now()
	}
	return time.Now()
}

// replayBody is a fresh copy of req's body for a second attempt; ok is false
// when the body cannot be read again.
func replayBody(req *http.Request) (body io.ReadCloser, ok bool) {
	if req.Body == nil || req.Body == http.NoBody {
		return req.Body, true
	}
	if req.GetBody == nil {
		return nil, false
	}
	body, err := req.GetBody()
	return body, err == nil
}

// drainClose reads a little of body, so that its connection can be reused,
// and closes it.
func drainClose(body io.ReadCloser) {
	io.Copy(io.Discard, io.LimitReader(body, maxErrorBody))
	body.Close()
}

func closeBody(body io.ReadCloser) {
	if body != nil {
		body.Close()
	}
}
