package oauthflow

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow/internal/clip"
	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/web"
)

// The endpoints' paths, as Mount registers them.
const (
	CallbackPath = "/api/v1/oauth/callback"
	CompletePath = "/api/v1/oauth/complete"
	StartPath    = "/api/v1/oauth/start" // the widget opens a bound sign-in through it (POST); a pushed sign-in's link (GET)
)

// maxCompleteBody bounds a POST /complete body.
const maxCompleteBody = 16 << 10

// maxParamLen bounds each callback parameter; real codes and states are far shorter.
const maxParamLen = 4096

// endpoints serves the public endpoints (the provider's redirect, the
// frontend page's completion and its CORS preflight, the start of a bound
// sign-in) and the pages and answers they give. A completion that guard
// lets through runs on the oauth workflow it embeds.
type endpoints struct {
	*oauthWorkflow
	guard   userGuard
	origins frontendOrigins
	pages   pageCache // rendered success pages
}

// declaredFieldNames are the callback parameters the registered providers
// keep with the tokens (callbackFielder), each once: the frontend callback
// page, which does not know the provider, forwards those.
func (e *endpoints) declaredFieldNames() []string {
	var names []string
	for _, id := range e.registry.IDs() {
		p, err := e.registry.Get(id)
		if cf, ok := p.(callbackFielder); ok && err == nil {
			for _, n := range cf.CallbackFields() {
				if !slices.Contains(names, n) {
					names = append(names, n)
				}
			}
		}
	}
	return names
}

// callbackParams is what a provider's redirect (or the frontend page) reports.
type callbackParams struct {
	Code             string `json:"code"`
	State            string `json:"state"`
	Iss              string `json:"iss"`
	Error            string `json:"error"`
	ErrorDescription string `json:"error_description"`
	ErrorURI         string `json:"error_uri"`
	// Fields are the redirect's other parameters that the frontend callback
	// page forwards; once the sign-in's provider is known, they are the
	// ones it keeps with the tokens (declaredFields).
	Fields map[string]string `json:"fields,omitempty"`
	// query is the redirect's query when it came to the callback itself.
	query url.Values
}

func (p callbackParams) tooLong() bool {
	for _, v := range []string{p.Code, p.State, p.Iss, p.Error, p.ErrorDescription, p.ErrorURI} {
		if len(v) > maxParamLen {
			return true
		}
	}
	if len(p.Fields) > maxCallbackKept {
		return true
	}
	for k, v := range p.Fields {
		if len(k) > maxParamLen || len(v) > maxParamLen {
			return true
		}
	}
	return false
}

// outcome is how a completion ended, in the terms both endpoints answer with.
type outcome struct {
	provider Provider // nil when unknown
	kind     outcomeKind
	message  string // for the user; never internal error text
	returnTo string // the sign-in's return address (Session.ReturnTo), once its state was ours and its user's
}

type outcomeKind int

const (
	outcomeConnected outcomeKind = iota
	outcomeProviderError
	outcomeInvalid
	outcomeExpired
	outcomeRejected
	outcomeUnavailable
	outcomeStoreDown
	outcomeCanceled // the request's own context ended: the client went away
	outcomeForbidden
	outcomeInternal
)

// statusClientClosedRequest answers a request whose client went away before the
// outcome was known (the status proxies log for it; nobody reads the body).
const statusClientClosedRequest = 499

// complete finishes a sign-in from a callback's parameters. It consumes the
// sign-in (once) and fires exchangeToken on its run as the run's user,
// synchronously, so the answer tells the real outcome.
func (e *endpoints) complete(r *http.Request, p callbackParams) outcome {
	ctx := r.Context()
	if p.tooLong() {
		return outcome{kind: outcomeInvalid, message: "The callback parameters are too long."}
	}
	if p.State != "" && !keyspace.IssuedState(p.State) { // refused before the store is touched
		return outcome{kind: outcomeInvalid, message: "The callback's state is not one this service issued."}
	}
	if p.Error != "" {
		return e.completeProviderError(r, p)
	}
	if p.Code == "" || p.State == "" {
		return outcome{kind: outcomeInvalid, message: "The callback is missing its code or state."}
	}
	if out, ok := e.verify(r, p.State); !ok {
		return out
	}
	s, err := e.sessions.Consume(ctx, p.State)
	if err != nil {
		return e.classify(ctx, nil, err)
	}
	// The state is spent: from here the completion is the server's. It runs to
	// its end under a context of its own, whether or not the client stays.
	owned, cancel := e.serverOwned(ctx)
	defer cancel()
	prov, _ := e.registry.Get(s.Provider)
	p.Fields = declaredFields(prov, p)
	err = e.exchangeSession(e.watchCompletion(owned, s), s, p)
	if err != nil {
		e.completionDone(owned, s) // a completion that succeeded removed its watch with the run's last save
		out := e.classify(ctx, prov, err)
		out.returnTo = s.ReturnTo
		return out
	}
	return outcome{provider: prov, kind: outcomeConnected, returnTo: s.ReturnTo}
}

// declaredFields are the redirect's parameters that prov keeps with the
// tokens (callbackFielder), from its query or from what the frontend page
// forwarded: picked by the provider's names, so that no other parameter,
// however many, crowds one out. At most maxCallbackKept, none of the
// answer's own, none longer than maxParamLen.
func declaredFields(prov Provider, p callbackParams) map[string]string {
	cf, ok := prov.(callbackFielder)
	if !ok {
		return nil
	}
	var out map[string]string
	for _, name := range cf.CallbackFields() {
		v := p.Fields[name]
		if p.query != nil {
			v = p.query.Get(name)
		}
		if v == "" || len(v) > maxParamLen || web.IsAnswerField(name) || len(out) == maxCallbackKept {
			continue
		}
		if out == nil {
			out = make(map[string]string)
		}
		out[name] = v
	}
	return out
}

// exchangeSession hands the provider's answer to the engine that owns the
// sign-in s and returns once it has finished it.
func (e *endpoints) exchangeSession(ctx context.Context, s *Session, p callbackParams) error {
	owner, err := e.ownerOf(s)
	if err != nil {
		return err
	}
	return owner.CompleteSignIn(ctx, s, CallbackAnswer{Code: p.Code, State: p.State, Iss: p.Iss, Fields: p.Fields})
}

// ownerOf is the engine that finishes s: one of Config.SignInOwners when s
// names it, else the module's own (its run, or at once for a sign-in built
// outside a workflow). A sign-in whose owner this instance does not have
// fails: its state is spent, and nothing is exchanged.
func (e *endpoints) ownerOf(s *Session) (SignInOwner, error) {
	switch {
	case s.Owner != "":
		if o, ok := e.owners[s.Owner]; ok {
			return o, nil
		}
		err := fmt.Errorf("oauthflow: sign-in owner %q is not one of Config.SignInOwners", clip.To(s.Owner, 64))
		e.log.Error("oauthflow: a sign-in's owner is missing on this instance; the sign-in fails", "error", err)
		return nil, &FlowError{Message: "This sign-in cannot be completed by this service. Start it again from the app.", Err: err}
	case s.WorkflowID != "":
		return runOwner{e.oauthWorkflow}, nil
	}
	return directOwner{e.oauthWorkflow}, nil
}

// verify checks, when the module verifies completions, that r may complete
// the sign-in under state ([Config.VerifyUser], [Config.BindSignIns]),
// before anything is consumed. A
// sign-in that cannot be read is refused: the check fails closed.
func (e *endpoints) verify(r *http.Request, state string) (outcome, bool) {
	if !e.guard.verifies() {
		return outcome{}, true
	}
	s, err := e.sessions.peek(r.Context(), state)
	if err != nil { // fail closed: the consume right after could still succeed
		return e.classify(r.Context(), nil, err), false
	}
	if err := e.guard.checkUser(r, s, state); err != nil {
		return e.refused(s), false
	}
	return outcome{}, true
}

func (e *endpoints) refused(s *Session) outcome {
	prov, _ := e.registry.Get(s.Provider)
	return outcome{provider: prov, kind: outcomeForbidden,
		message: "This sign-in was started by another user or in another browser. Start it again from the app, signed in as yourself."}
}

// completeProviderError records a provider's error redirect on the pending
// sign-in's prompt without consuming it: the user may try the same link again.
// A redirect whose iss is not the expected issuer is refused and records nothing.
func (e *endpoints) completeProviderError(r *http.Request, p callbackParams) outcome {
	ctx := r.Context()
	out := outcome{kind: outcomeProviderError, message: signInErrorMessage(p.Error, p.ErrorDescription)}
	if p.State == "" {
		return out
	}
	s, err := e.sessions.peek(ctx, p.State)
	if err != nil {
		if errors.Is(err, ErrStoreUnavailable) || ctx.Err() != nil {
			return e.classify(ctx, nil, err)
		}
		return out
	}
	out.provider, _ = e.registry.Get(s.Provider)
	if e.guard.verifies() && e.guard.checkUser(r, s, p.State) != nil {
		return e.refused(s)
	}
	if checkIss(s, p.Iss) != nil {
		return outcome{provider: out.provider, kind: outcomeRejected, message: "The sign-in response came from an unexpected issuer."}
	}
	tellRefused(ctx, out.provider, p.Error, p.ErrorDescription) // e.g. an MCP server's provider re-registers a refused client
	out.returnTo = s.ReturnTo
	if owner, err := e.ownerOf(s); err == nil {
		ctx, cancel := e.serverOwned(ctx) // the denial is recorded even when the browser left
		defer cancel()
		owner.SignInRefused(ctx, s, redirectError(s.Provider, p.Error, p.ErrorDescription, p.ErrorURI))
	}
	return out
}

// classify turns a completion error into what the endpoints answer. ctx is the
// request's: when it has ended, the client went away, whatever failed after.
func (e *endpoints) classify(ctx context.Context, p Provider, err error) outcome {
	out := outcome{provider: p, message: flowFailureMessage(err)}
	var fe *FlowError
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		out.kind, out.message = outcomeCanceled, "The request ended before the sign-in completed."
		e.log.InfoContext(ctx, "oauthflow: the client went away before a sign-in completed", "error", logSafeError(err))
	case errors.Is(err, ErrStoreUnavailable):
		out.kind, out.message = outcomeStoreDown, "The service is temporarily unavailable. Please try again later."
	case errors.Is(err, ErrSessionNotFound), errors.Is(err, ErrRunNotFound),
		errors.Is(err, ErrTransitionNotAllowed), errors.Is(err, ErrForbidden):
		out.kind, out.message = outcomeExpired, "This sign-in link has expired or was already used."
	case IsTransient(err):
		out.kind = outcomeUnavailable
	case providerCode(err) != "" || providerStatus(err) != 0 || errors.As(err, &fe):
		out.kind = outcomeRejected
	default:
		out.kind = outcomeInternal
		e.log.Error("oauthflow: completing a sign-in failed", "error", logSafeError(err))
	}
	return out
}

// serveCallback serves GET /api/v1/oauth/callback (Module.CallbackHandler).
func (e *endpoints) serveCallback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := callbackParams{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss"),
		Error: q.Get("error"), ErrorDescription: q.Get("error_description"), ErrorURI: q.Get("error_uri"),
		query: q}
	out := e.complete(r, p)
	e.renderPage(w, out, p.State)
}

// serveComplete serves POST /api/v1/oauth/complete (Module.CompleteHandler).
func (e *endpoints) serveComplete(w http.ResponseWriter, r *http.Request) {
	e.origins.allowOrigin(w.Header(), r)
	p, status, code, msg := decodeComplete(w, r)
	if status != 0 {
		writeJSONError(w, status, code, msg)
		return
	}
	e.writeOutcome(w, e.complete(r, p))
}

// decodeComplete reads a /complete body: JSON only, at most 16 KiB, no unknown fields.
func decodeComplete(w http.ResponseWriter, r *http.Request) (p callbackParams, status int, code, msg string) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/json" {
		return p, http.StatusUnsupportedMediaType, "unsupported_media_type", "The body must be application/json."
	}
	if r.ContentLength > maxCompleteBody {
		return p, http.StatusRequestEntityTooLarge, "request_too_large", "The body is too large."
	}
	body := http.MaxBytesReader(w, r.Body, maxCompleteBody)
	dec := json.NewDecoder(body)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return p, http.StatusRequestEntityTooLarge, "request_too_large", "The body is too large."
		}
		return p, http.StatusBadRequest, "invalid_request", "The body is not a valid completion request."
	}
	if dec.More() {
		return p, http.StatusBadRequest, "invalid_request", "The body must hold one JSON object."
	}
	if p.State == "" || p.Error == "" && p.Code == "" {
		return p, http.StatusBadRequest, "invalid_request", "The body needs a state, and a code or an error."
	}
	return p, 0, "", ""
}

func (e *endpoints) writeOutcome(w http.ResponseWriter, out outcome) {
	status, code := http.StatusOK, ""
	switch out.kind {
	case outcomeConnected, outcomeProviderError:
	case outcomeInvalid:
		status, code = http.StatusBadRequest, "invalid_request"
	case outcomeExpired:
		status, code = http.StatusBadRequest, "invalid_state"
	case outcomeRejected:
		status, code = http.StatusBadRequest, "exchange_failed"
	case outcomeUnavailable:
		status, code = http.StatusBadGateway, "provider_unavailable"
	case outcomeStoreDown:
		status, code = http.StatusServiceUnavailable, "store_unavailable"
	case outcomeCanceled:
		status, code = statusClientClosedRequest, "request_cancelled"
	case outcomeForbidden:
		status, code = http.StatusForbidden, "forbidden"
	default:
		status, code = http.StatusInternalServerError, "internal_error"
	}
	if code != "" {
		writeJSONError(w, status, code, out.message)
		return
	}
	provider, name := "", ""
	if out.provider != nil {
		provider, name = out.provider.ProviderID(), displayName(out.provider)
	}
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "provider": provider, "providerName": name})
}

func writeJSONError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"ok": false, "error": code, "message": msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// frontendOrigins is Config.FrontendOrigins checked and normalised: the origins
// of frontends served apart from the API, which may receive the callback page's
// result by postMessage and call POST /api/v1/oauth/complete with CORS.
type frontendOrigins struct {
	list []string            // in the order configured, without duplicates
	set  map[string]struct{} // the same, for lookups by a request's Origin
	// credentials allows credentialed requests (cookies) from these origins:
	// set when completions are checked against the user (Config.VerifyUser
	// or Config.BindSignIns).
	credentials bool
}

// parseFrontendOrigins checks every origin (see normaliseOrigin) and drops duplicates.
func parseFrontendOrigins(in []string) (frontendOrigins, error) {
	o := frontendOrigins{set: make(map[string]struct{}, len(in))}
	for i, s := range in {
		origin, err := normaliseOrigin(s)
		if err != nil {
			return frontendOrigins{}, errs.Invalid("Config.FrontendOrigins[%d] %q: %s", i, s, err.Error())
		}
		if _, dup := o.set[origin]; !dup {
			o.set[origin] = struct{}{}
			o.list = append(o.list, origin)
		}
	}
	return o, nil
}

// allows reports whether origin, a request's Origin header, is configured. The
// header is compared as sent: browsers send it already serialised as an origin.
func (o frontendOrigins) allows(origin string) bool {
	_, ok := o.set[origin]
	return ok
}

// originError is why a configured origin was refused; its text is the message.
type originError string

func (e originError) Error() string { return string(e) }

// normaliseOrigin turns "scheme://host[:port]" (an optional trailing slash is
// dropped) into the form a browser sends in Origin: the scheme and host in lower
// case, an IPv6 literal bracketed in its canonical form, the scheme's default
// port left out. Only http and https are allowed; no wildcard, path, query,
// fragment, credentials or host outside the ASCII characters of a DNS name.
func normaliseOrigin(s string) (string, error) {
	if strings.Contains(s, "*") {
		return "", originError("a wildcard is not allowed; list each origin")
	}
	u, err := url.Parse(strings.TrimSuffix(s, "/"))
	if err != nil {
		return "", originError("not a URL")
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" {
		return "", originError("must be an http:// or https:// origin")
	}
	if u.Opaque != "" || u.User != nil || u.Path != "" || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", originError("must be scheme://host[:port], without a path, query, fragment or credentials")
	}
	host, err := originHost(u.Hostname())
	if err != nil {
		return "", err
	}
	port := u.Port()
	if port == "" && strings.HasSuffix(u.Host, ":") || port != "" && !validPort(port) {
		return "", originError("the port must be a number from 1 to 65535")
	}
	if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + port, nil
}

// originHost returns host as a browser serialises it in an origin.
func originHost(host string) (string, error) {
	if host == "" {
		return "", originError("the host is missing")
	}
	if strings.Contains(host, ":") {
		ip, err := netip.ParseAddr(host)
		if err != nil || !ip.Is6() || ip.Zone() != "" {
			return "", originError("the host is not a valid IPv6 address")
		}
		return "[" + ip.String() + "]", nil
	}
	for _, c := range host {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return "", originError("the host must be a DNS name (in its ASCII, punycode form) or an IP address")
		}
	}
	return strings.ToLower(host), nil
}

func validPort(p string) bool {
	if len(p) > 5 || p[0] == '0' {
		return false
	}
	n := 0
	for _, c := range p {
		if c < '0' || c > '9' {
			return false
		}
		n = n*10 + int(c-'0')
	}
	return n >= 1 && n <= 65535
}

// corsMaxAge is how long a browser may reuse an answered preflight, in seconds.
const corsMaxAge = "600"

// allowOrigin adds the CORS response headers for a request from a configured
// frontend origin, and nothing for any other request (a browser then withholds
// the answer from the calling page). A completion is authorised by its
// single-use state, so cookies are allowed only when the module checks the
// completing browser's user (Config.VerifyUser, Config.BindSignIns). The answers are never
// cached (Cache-Control: no-store), so one without Vary: Origin cannot be
// replayed to an allowed origin.
func (o frontendOrigins) allowOrigin(h http.Header, r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if !o.allows(origin) {
		return false
	}
	h.Set("Access-Control-Allow-Origin", origin)
	if o.credentials {
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Add("Vary", "Origin")
	return true
}

// servePreflight answers the CORS preflight (OPTIONS) of POST
// /api/v1/oauth/complete: 204 allowing POST with a Content-Type header for a
// configured frontend origin; 403 without any CORS header for every other
// request, so the browser refuses to send the POST.
func (e *endpoints) servePreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if !e.origins.allowOrigin(h, r) {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	h.Set("Access-Control-Allow-Methods", http.MethodPost)
	h.Set("Access-Control-Allow-Headers", "Content-Type")
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

// serveStart serves POST /api/v1/oauth/start (Module.Mount).
func (e *endpoints) serveStart(w http.ResponseWriter, r *http.Request) {
	s, msg := e.checkStart(w, r)
	if s == nil {
		e.renderPage(w, outcome{kind: outcomeForbidden, message: msg}, "")
		return
	}
	state := r.PostFormValue("state")
	ttl := e.signInTTL - e.now().Sub(time.UnixMilli(s.CreatedAt))
	http.SetCookie(w, bindingCookie(r, state, r.PostFormValue("binding"), ttl))
	authURL, err := e.startURL(r.Context(), s, state)
	if err != nil {
		e.renderPage(w, startFailure(err), "")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// serveStartLink serves GET /api/v1/oauth/start?state=..., the link of a
// sign-in whose provider pushes its authorization requests (RFC 9126): it
// pushes the sign-in's request anew and sends the browser to the provider
// (303), so a link opened after the last pushed request expired, or opened
// twice, still starts the sign-in. The link stands for the sign-in as the
// provider's URL did, and brings nothing more: a bound sign-in
// (Config.BindSignIns) is opened through the POST, with its secret, only.
func (e *endpoints) serveStartLink(w http.ResponseWriter, r *http.Request) {
	state := r.URL.Query().Get("state")
	if !keyspace.IssuedState(state) {
		e.renderPage(w, outcome{kind: outcomeForbidden, message: "The sign-in's state is not one this service issued."}, "")
		return
	}
	s, err := e.sessions.peek(r.Context(), state)
	if err != nil {
		e.renderPage(w, outcome{kind: outcomeForbidden, message: "This sign-in link has expired or was already used."}, "")
		return
	}
	if s.Binding != "" {
		e.renderPage(w, outcome{kind: outcomeForbidden, message: "This sign-in can only be started from the app."}, "")
		return
	}
	authURL, err := e.startURL(r.Context(), s, state)
	if err != nil {
		e.renderPage(w, startFailure(err), "")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, authURL, http.StatusSeeOther)
}

// checkStart checks a POST /start: its origin, its state and its secret. It
// returns the pending sign-in, or nil and why not.
func (e *endpoints) checkStart(w http.ResponseWriter, r *http.Request) (*Session, string) {
	if !e.sameOrAllowedOrigin(r) {
		return nil, "A sign-in can only be started from the app."
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxCompleteBody)
	state, secret := r.PostFormValue("state"), r.PostFormValue("binding")
	if !keyspace.IssuedState(state) {
		return nil, "The sign-in's state is not one this service issued."
	}
	s, err := e.sessions.peek(r.Context(), state)
	if err != nil || !bindingMatches(s, secret) {
		return nil, "This sign-in link has expired or was already used."
	}
	return s, ""
}

// sameOrAllowedOrigin reports whether r's Origin is the API's own (the host
// it was sent to) or one of Config.FrontendOrigins. Browsers send Origin with
// every form POST; a request without one is refused.
func (e *endpoints) sameOrAllowedOrigin(r *http.Request) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || origin == "null" {
		return false
	}
	if e.origins.allows(origin) {
		return true
	}
	u, err := url.Parse(origin)
	return err == nil && u.Host == r.Host && (u.Scheme == "https" || u.Scheme == "http")
}

// startURL builds the authorization URL of the pending sign-in s again, as
// build_oauth_url made it: the same provider, scopes, state, PKCE challenge
// and dpop_jkt; a provider that pushes is pushed the request anew, since a
// request_uri is good for one use.
func (e *endpoints) startURL(ctx context.Context, s *Session, state string) (string, error) {
	p, err := e.registry.Get(s.Provider)
	if err != nil {
		return "", err
	}
	return e.authURLOf(ctx, p, s, state)
}

// startFailure is the page of a POST /start whose URL could not be built: a
// push the provider failed is "try again later" (502), anything else an
// internal failure.
func startFailure(err error) outcome {
	if errors.Is(err, errPush) {
		return outcome{kind: outcomeUnavailable, message: publicMessage(err)}
	}
	return outcome{kind: outcomeInternal, message: "The sign-in could not be started."}
}

// The callback page: html/template escapes everything; the only script is the
// nonce'd one that tells a popup's opener the outcome and closes the popup
// after a success. It posts to its own origin and to each of
// Config.FrontendOrigins, never to "*": the browser delivers a message only
// when its target origin is the opener's, and drops the others, so the result
// (and the state) reaches a listed frontend or the API's own origin, and
// nothing else. The origins reach the script as a JSON array that
// html/template escapes for its JavaScript context.
var pageTemplate = template.Must(template.New("page").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}</title>
{{if .ReturnTo}}<noscript><meta http-equiv="refresh" content="0;url={{.ReturnTo}}"></noscript>{{end}}
<style nonce="{{.Nonce}}">
body{font:16px/1.5 system-ui,sans-serif;margin:0;display:grid;place-items:center;min-height:100vh;background:#f6f7f9;color:#1d2330}
main{background:#fff;border-radius:12px;padding:2rem 2.5rem;box-shadow:0 1px 4px #0002;max-width:32rem;text-align:center}
h1{font-size:1.3rem;margin:0 0 .5rem}
main[data-status=success] h1{color:#17803d}
main[data-status=error] h1{color:#b42318}
p{margin:.25rem 0;color:#4a5263}
</style>
</head>
<body>
<main id="oauthflow-result" data-status="{{.Status}}" data-state="{{.State}}" data-provider="{{.ProviderID}}" data-message="{{.Message}}"{{if .ReturnTo}} data-return-to="{{.ReturnTo}}"{{end}}>
<h1>{{.Title}}</h1>
{{if .Message}}<p>{{.Message}}</p>{{end}}
{{if .ReturnTo}}<p><a href="{{.ReturnTo}}">Back to the app</a></p>{{else}}<p>{{.Hint}}</p>{{end}}
</main>
<script nonce="{{.Nonce}}">
(function () {
  var d = document.getElementById("oauthflow-result").dataset;
  var own = window.location.origin;
  var targets = [own].concat({{.FrontendOrigins}} || []);
  if (!window.opener || window.opener.closed) {
    if (d.returnTo) window.location.replace(d.returnTo); // a full-page sign-in goes back to the app
    return;
  }
  var result = {type: "oauthflow:result", state: d.state, status: d.status,
    provider: d.provider, message: d.message};
  for (var i = 0; i < targets.length; i++) {
    if (i > 0 && targets[i] === own) continue;
    try {
      window.opener.postMessage(result, targets[i]);
    } catch (e) {}
  }
  if (d.status === "success") window.close();
})();
</script>
</body>
</html>
`))

type pageData struct {
	Title, Message, Hint string
	Status               string // success | error
	State, ProviderID    string
	Nonce                string
	FrontendOrigins      []string // besides the page's own, where the result is posted
	ReturnTo             string   // where a full-page sign-in goes back to, the outcome added
}

func (e *endpoints) renderPage(w http.ResponseWriter, out outcome, state string) {
	d := pageData{Status: "error", Message: out.message, Hint: "You can close this window and try again.", Nonce: newState(),
		FrontendOrigins: e.origins.list}
	if keyspace.IssuedState(state) {
		d.State = state // only a state of ours is echoed to the opener
	}
	status := http.StatusBadRequest
	name := "your"
	if out.provider != nil {
		d.ProviderID, name = out.provider.ProviderID(), displayName(out.provider)
	}
	switch out.kind {
	case outcomeConnected:
		status, d.Status, d.Message = http.StatusOK, "success", ""
		d.Title, d.Hint = name+" account connected", "You can close this window."
	case outcomeProviderError, outcomeRejected:
		d.Title = "Sign-in not completed"
	case outcomeInvalid:
		d.Title = "Invalid callback"
	case outcomeExpired:
		d.Title, d.Message = "This sign-in link has expired or was already used", "Start the sign-in again from the app."
	case outcomeUnavailable:
		status, d.Title = http.StatusBadGateway, "The provider could not be reached"
		d.Hint = "Please try again later."
	case outcomeStoreDown:
		status, d.Title = http.StatusServiceUnavailable, "Temporarily unavailable"
		d.Hint = "Please try again later."
	case outcomeCanceled:
		status, d.Title = statusClientClosedRequest, "Sign-in interrupted"
	case outcomeForbidden:
		status, d.Title = http.StatusForbidden, "This sign-in is not yours"
		d.Hint = "You can close this window."
	default:
		status, d.Title = http.StatusInternalServerError, "Something went wrong"
	}
	if out.returnTo != "" {
		d.ReturnTo = withOutcome(out.returnTo, d.Status, d.ProviderID)
	}
	setPageHeaders(w.Header(), d.Nonce)
	w.WriteHeader(status)
	if out.kind == outcomeConnected && d.State != "" && d.ReturnTo == "" {
		e.pages.write(w, d, e.registry)
		return
	}
	_ = pageTemplate.Execute(w, d)
}

// pageCache keeps the success page per provider and title rendered once, cut
// where the per-request nonce and state go: a burst of sign-ins pays for
// html/template's escaping once, not per callback. Only success pages are kept:
// they carry no message, one per provider, and no more than the registry
// holds providers: the pages of providers it let go are let go too.
// The zero value is ready.
type pageCache struct {
	once  sync.Once
	holes [2]string  // the stand-ins for the nonce and the state
	m     sync.Map   // provider ID + "\x00" + title -> []pagePart
	mu    sync.Mutex // held while a page is added
	n     int        // the pages in m
	bufs  sync.Pool  // *[]byte: the buffers pages are put together in
}

// pagePart is a run of rendered bytes, followed by the nonce (hole 0), the
// state (hole 1) or nothing (hole -1).
type pagePart struct {
	text []byte
	hole int
}

// write writes the success page d in one Write, put together in a buffer
// that the next page reuses.
func (c *pageCache) write(w io.Writer, d pageData, reg *Registry) {
	b, _ := c.bufs.Get().(*[]byte)
	if b == nil {
		b = new([]byte)
	}
	*b = c.appendPage((*b)[:0], d, reg)
	_, _ = w.Write(*b)
	c.bufs.Put(b)
}

// render is pageTemplate.Execute(d) for a success page.
func (c *pageCache) render(d pageData) []byte { return c.appendPage(make([]byte, 0, 2048), d, nil) }

// appendPage appends the success page d to b. Nonce and state are put in as
// they are: both are of the characters html/template leaves alone in an
// attribute (hex, base64url), which is how the stand-ins were rendered.
func (c *pageCache) appendPage(b []byte, d pageData, reg *Registry) []byte {
	c.once.Do(func() { c.holes = [2]string{"n" + randomHex(16), "s" + randomHex(16)} })
	key := d.ProviderID + "\x00" + d.Title
	v, ok := c.m.Load(key)
	if !ok {
		v = c.add(key, d, reg)
	}
	parts := v.([]pagePart)
	fill := [2]string{d.Nonce, d.State}
	for _, p := range parts {
		b = append(b, p.text...)
		if p.hole >= 0 {
			b = append(b, fill[p.hole]...)
		}
	}
	return b
}

// add renders and keeps the success page d under key, unless another
// caller did first. Once the cache holds as many pages as reg holds
// providers (maxResolved without a registry), it first lets go of the pages
// of providers reg no longer holds, or of any page when reg holds them all.
func (c *pageCache) add(key string, d pageData, reg *Registry) any {
	c.mu.Lock()
	defer c.mu.Unlock()
	if v, ok := c.m.Load(key); ok {
		return v
	}
	bound := maxResolved
	if reg != nil {
		bound = reg.bound()
	}
	if c.n >= bound {
		c.forgetDropped(reg)
	}
	v := c.cut(d)
	c.m.Store(key, v)
	c.n++
	return v
}

// forgetDropped lets go of the pages of providers reg no longer holds, or
// of one page when it holds them all. c.mu is held.
func (c *pageCache) forgetDropped(reg *Registry) {
	before := c.n
	c.m.Range(func(k, _ any) bool {
		if id, _, _ := strings.Cut(k.(string), "\x00"); reg == nil || !reg.Has(id) {
			c.m.Delete(k)
			c.n--
		}
		return reg != nil // without a registry, one page is enough
	})
	if c.n < before {
		return
	}
	c.m.Range(func(k, _ any) bool {
		c.m.Delete(k)
		c.n--
		return false
	})
}

// cut renders d with the stand-ins and splits the page where they are.
func (c *pageCache) cut(d pageData) []pagePart {
	d.Nonce, d.State = c.holes[0], c.holes[1]
	var buf bytes.Buffer
	_ = pageTemplate.Execute(&buf, d)
	page := buf.Bytes()
	var parts []pagePart
	for {
		at, hole := -1, -1
		for h, s := range c.holes {
			if i := bytes.Index(page, []byte(s)); i >= 0 && (at < 0 || i < at) {
				at, hole = i, h
			}
		}
		if at < 0 {
			return append(parts, pagePart{text: page, hole: -1})
		}
		parts = append(parts, pagePart{text: page[:at], hole: hole})
		page = page[at+len(c.holes[hole]):]
	}
}

// setPageHeaders sets the page's headers as h.Set would, with the six values in
// one allocation rather than one each.
func setPageHeaders(h http.Header, nonce string) {
	v := make([]string, 6)
	v[0], v[1], v[2] = "text/html; charset=utf-8", "no-store", "no-referrer"
	v[3], v[4] = "DENY", "nosniff"
	v[5] = "default-src 'none'; script-src 'nonce-" + nonce + "'; style-src 'nonce-" + nonce +
		"'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
	for i, k := range [...]string{"Content-Type", "Cache-Control", "Referrer-Policy", "X-Frame-Options", "X-Content-Type-Options", "Content-Security-Policy"} {
		h[k] = v[i : i+1 : i+1]
	}
}

// frontendCallbackPath is where FrontendHandler serves the frontend
// callback page, under whatever prefix the app mounts it.
const frontendCallbackPath = "/oauth/callback"

// reportUnservedRedirect logs an error for a provider whose redirect URI
// names a path this module does not serve (neither CallbackPath nor the
// frontend callback page): a typo there sends the browser to a 404 and
// leaves the sign-in pending until it lapses.
func reportUnservedRedirect(log *slog.Logger, p Provider) {
	path, ok := redirectPath(p)
	if !ok || path == CallbackPath || strings.HasSuffix(path, frontendCallbackPath) {
		return
	}
	log.Error("oauthflow: the provider's redirect URI names a path this module does not serve: sign-ins will end on a 404",
		slog.String("provider", p.ProviderID()), slog.String("path", clip.To(path, 256)),
		slog.String("want", CallbackPath+" (or the frontend callback page, "+frontendCallbackPath+")"))
}

// withOutcome is the return address returnTo with the sign-in's outcome in
// its query: oauth=success or oauth=error, and provider=<ID>.
func withOutcome(returnTo, status, provider string) string {
	u, err := url.Parse(returnTo)
	if err != nil {
		return ""
	}
	q := u.Query()
	q.Set("oauth", status)
	if provider != "" {
		q.Set("provider", provider)
	}
	u.RawQuery = q.Encode()
	return u.String()
}
