package authserver

import (
	"net/http"
	"net/url"
	"time"
)

// authRequest is a validated authorization request.
type authRequest struct {
	client         *Client
	redirectParam  string // redirect_uri as sent; the token request must repeat it
	redirectTarget string // where the answer goes
	scope, state   string
	challenge      string
	method         string // PKCE method; "" without a challenge
	dpopJKT        string // the DPoP key the code is bound to (RFC 9449 §10); "" for none
	details        []byte // authorization_details asked for (RFC 9396); nil for none
	user           string
	expires        time.Time // when a pending consent for it lapses
}

// handleAuthorize answers GET /authorize (RFC 6749 §4.1.1).
// A request naming a request_uri is one pushed before (RFC 9126 §4); with
// Options.RequirePAR every other one is refused.
func (s *Server) handleAuthorize(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	switch {
	case q.Has("request_uri"):
		s.authorizePushed(w, r, q)
		return
	case s.opts.RequirePAR:
		s.refuseUnpushed(w, r, q)
		return
	}
	req, msg := s.identifyClient(q)
	if req == nil {
		writeErrorPage(w, http.StatusBadRequest, msg)
		return
	}
	if err := s.checkAuthorize(req, q); err != nil {
		s.redirect(w, r, req, errorParams(err), http.StatusFound)
		return
	}
	s.answerAuthorize(w, r, req, q)
}

// answerAuthorize answers the checked authorization request req, whose
// parameters are q: a forced denial, the consent page, or a code.
func (s *Server) answerAuthorize(w http.ResponseWriter, r *http.Request, req *authRequest, q url.Values) {
	switch {
	case s.forcedDenial(q):
		s.deny(w, r, req, http.StatusFound)
	case s.opts.ConsentPage:
		s.showConsent(w, req)
	default:
		s.approve(w, r, req, http.StatusFound)
	}
}

// identifyClient finds the client and redirect URI of q. When either is wrong the
// user must not be redirected (RFC 6749 §4.1.2.1): it returns nil and a message to show.
func (s *Server) identifyClient(q url.Values) (*authRequest, string) {
	if len(q["client_id"]) != 1 || len(q["redirect_uri"]) > 1 {
		return nil, "The request must carry one client_id and at most one redirect_uri."
	}
	client := s.clients[q.Get("client_id")]
	if client == nil {
		return nil, "The client is not registered."
	}
	target, ok := client.resolveRedirect(q.Get("redirect_uri"))
	if !ok {
		return nil, "The redirect_uri is not registered for this client."
	}
	req := &authRequest{
		client:         client,
		redirectParam:  q.Get("redirect_uri"),
		redirectTarget: target,
		state:          q.Get("state"),
		user:           s.opts.User,
	}
	return req, ""
}

// checkAuthorize checks the rest of q and completes req.
func (s *Server) checkAuthorize(req *authRequest, q url.Values) *oauthError {
	if repeated(q) {
		return errInvalidRequest("a parameter is repeated")
	}
	if q.Get("response_type") != "code" {
		return newError(http.StatusBadRequest, "unsupported_response_type", "only response_type=code is supported")
	}
	method, err := checkChallenge(req.client, q.Get("code_challenge"), q.Get("code_challenge_method"))
	if err != nil {
		return err
	}
	req.challenge, req.method = q.Get("code_challenge"), method
	if req.dpopJKT, err = s.requestedKey(q); err != nil {
		return err
	}
	if req.details, err = requestedDetails(q); err != nil {
		return err
	}
	req.scope = q.Get("scope")
	if hint := q.Get("login_hint"); hint != "" {
		req.user = hint
	}
	return nil
}

// forcedDenial reports whether this request is denied without asking the user.
func (s *Server) forcedDenial(q url.Values) bool {
	return s.opts.DenyAll || q.Get("login_hint") == "deny" || takeOne(&s.denyNext)
}

// approve issues a code for req and sends the user back with it.
func (s *Server) approve(w http.ResponseWriter, r *http.Request, req *authRequest, status int) {
	code := s.addCode(req)
	s.stats.authorizations.Add(1)
	s.redirect(w, r, req, url.Values{"code": {code}}, status)
}

// deny sends the user back with access_denied.
func (s *Server) deny(w http.ResponseWriter, r *http.Request, req *authRequest, status int) {
	s.stats.denials.Add(1)
	err := newError(http.StatusForbidden, "access_denied", "the user denied the request")
	s.redirect(w, r, req, errorParams(err), status)
}

func errorParams(e *oauthError) url.Values {
	return url.Values{"error": {e.Code}, "error_description": {e.Description}}
}

// redirect sends the user to req's redirect URI with params, state and, when
// configured, iss added to its query.
func (s *Server) redirect(w http.ResponseWriter, r *http.Request, req *authRequest, params url.Values, status int) {
	u, err := url.Parse(req.redirectTarget)
	if err != nil { // registered and loopback URIs were parsed before; never expected
		writeErrorPage(w, http.StatusBadRequest, "The redirect_uri is malformed.")
		return
	}
	q := u.Query()
	for k, v := range params {
		q[k] = v
	}
	if req.state != "" {
		q.Set("state", req.state)
	}
	if s.opts.IssParameter {
		q.Set("iss", s.issuerFor(r))
	}
	u.RawQuery = q.Encode()
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, u.String(), status)
}
