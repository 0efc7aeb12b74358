package authserver

import (
	"maps"
	"net/http"
	"net/url"
	"time"
)

// This file implements pushed authorization requests (RFC 9126): the client
// POSTs the parameters of its authorization request to /par, authenticated
// as at the token endpoint, and gets a request_uri; the browser then carries
// only client_id and that request_uri to /authorize. A request_uri is good
// for one authorization request, until it expires.

// requestURIPrefix starts every request_uri the server issues (RFC 9126 §2.2).
const requestURIPrefix = "urn:ietf:params:oauth:request_uri:"

// parResponse is a pushed authorization request's answer (RFC 9126 §2.2).
type parResponse struct {
	RequestURI string `json:"request_uri"`
	ExpiresIn  int64  `json:"expires_in"`
}

// pushedRequest is an authorization request pushed to /par and not yet used.
type pushedRequest struct {
	req     authRequest
	params  url.Values // as pushed: what the authorization endpoint would have read in its query
	expires time.Time
}

// handlePAR answers POST /par (RFC 9126 §2).
func (s *Server) handlePAR(w http.ResponseWriter, r *http.Request) {
	s.stats.parRequests.Add(1)
	if len(r.Header.Values(headerDPoP)) > 0 {
		s.stats.dpopPARRequests.Add(1)
	}
	if s.applyFailure(w, r, s.nextPARFailure()) {
		return
	}
	nonce := s.offerNonce(w)
	form, client, err := s.authenticatedForm(w, r)
	var p *pushedRequest
	if err == nil {
		p, err = s.checkPushed(r, form, client, nonce)
	}
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, parResponse{RequestURI: s.addPushed(p), ExpiresIn: ceilSeconds(s.opts.RequestURITTL)})
}

// checkPushed checks a pushed authorization request as the authorization
// endpoint checks one in a query, from the client the request authenticated,
// and binds its code to the key of the request's DPoP proof, if any (RFC 9449
// §10.1). Its errors are answered as JSON (RFC 9126 §2.3), never redirected.
func (s *Server) checkPushed(r *http.Request, form url.Values, client *Client, nonce string) (*pushedRequest, *oauthError) {
	if form.Has("request_uri") {
		return nil, errInvalidRequest("a pushed authorization request must not carry request_uri")
	}
	params := maps.Clone(form) // Set and Del replace the slices, never write into them
	params.Del("client_secret")
	params.Del("client_assertion")
	params.Del("client_assertion_type")
	if !params.Has("client_id") {
		params.Set("client_id", client.ID)
	}
	req, msg := s.identifyClient(params)
	switch {
	case req == nil:
		return nil, errInvalidRequest(msg)
	case req.client != client:
		return nil, errInvalidRequest("client_id does not match the authenticated client")
	}
	if err := s.checkAuthorize(req, params); err != nil {
		return nil, err
	}
	jkt, err := s.parProof(r, nonce)
	if err != nil {
		return nil, err
	}
	if jkt != "" && req.dpopJKT != "" && jkt != req.dpopJKT {
		return nil, errInvalidRequest("dpop_jkt does not match the DPoP proof's key")
	}
	if jkt != "" {
		req.dpopJKT = jkt
	}
	return &pushedRequest{req: *req, params: params}, nil
}

// parProof checks the DPoP proof of a pushed authorization request, as
// tokenProof does at the token endpoint, against /par; a proof is optional
// there even when the token endpoint requires one.
func (s *Server) parProof(r *http.Request, nonce string) (string, *oauthError) {
	proofs := r.Header.Values(headerDPoP)
	if !s.opts.DPoP || len(proofs) == 0 {
		return "", nil
	}
	jkt, err := s.verifyProof(proofs, http.MethodPost, s.issuerFor(r)+PathPAR, "", nonce)
	if err != nil {
		code, desc := proofRefusal(err)
		return "", newError(http.StatusBadRequest, code, desc)
	}
	return jkt, nil
}

// addPushed keeps p for Options.RequestURITTL and returns its request_uri.
func (s *Server) addPushed(p *pushedRequest) string {
	uri := requestURIPrefix + newSecret()
	now := s.now()
	p.expires = now.Add(s.opts.RequestURITTL)
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	st.pushed[uri] = p
	st.addedLocked(now)
	return uri
}

// takePushed removes and returns the pushed request of uri when it is
// client's and has not expired: a request_uri is used once (RFC 9126 §4).
func (s *Server) takePushed(uri string, client *Client) *pushedRequest {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	p := st.pushed[uri]
	delete(st.pushed, uri)
	if p == nil || p.req.client != client || !s.now().Before(p.expires) {
		return nil
	}
	return p
}

// authorizePushed serves an authorization request that names a request_uri:
// it must carry client_id and request_uri and nothing else, and the
// request_uri must be one pushed by that client, unused and unexpired. The
// request is then the one pushed.
func (s *Server) authorizePushed(w http.ResponseWriter, r *http.Request, q url.Values) {
	if len(q) != 2 || len(q["client_id"]) != 1 || len(q["request_uri"]) != 1 {
		s.stats.requestURIsRefused.Add(1)
		writeErrorPage(w, http.StatusBadRequest, "A request with a request_uri must carry client_id and request_uri, and nothing else.")
		return
	}
	p := s.takePushed(q.Get("request_uri"), s.clients[q.Get("client_id")])
	if p == nil {
		s.stats.requestURIsRefused.Add(1)
		writeErrorPage(w, http.StatusBadRequest, "The request_uri is unknown, expired, already used or another client's.")
		return
	}
	s.stats.requestURIsRedeemed.Add(1)
	s.answerAuthorize(w, r, &p.req, p.params)
}

// refuseUnpushed answers an authorization request in its query when
// Options.RequirePAR refuses them (RFC 9126 §5): back to the client with
// invalid_request when its client and redirect URI are known, else a page.
func (s *Server) refuseUnpushed(w http.ResponseWriter, r *http.Request, q url.Values) {
	s.stats.requestURIsRefused.Add(1)
	req, msg := s.identifyClient(q)
	if req == nil {
		writeErrorPage(w, http.StatusBadRequest, msg)
		return
	}
	req.state = q.Get("state")
	s.redirect(w, r, req, errorParams(errInvalidRequest("pushed authorization requests are required")), http.StatusFound)
}

// PARURL is the pushed authorization request endpoint (RFC 9126 §2).
func (s *Server) PARURL() string { return s.issuer + PathPAR }

// FailNextPAR queues failures for the coming pushed authorization requests,
// as FailNext does for token requests; Failure.Grant is not looked at. Each is
// used once, in the order queued, before the server looks at the request.
func (s *Server) FailNextPAR(f ...Failure) {
	q := &s.parFailures
	q.mu.Lock()
	defer q.mu.Unlock()
	q.queue = append(q.queue, f...)
}

// nextPARFailure is the scripted failure for a pushed authorization request, or nil.
func (s *Server) nextPARFailure() *Failure {
	q := &s.parFailures
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.queue) == 0 {
		return nil
	}
	f := q.queue[0]
	q.queue = q.queue[1:]
	return &f
}
