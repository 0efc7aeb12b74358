package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/oauthflow/oauthflow/internal/web"
)

// The endpoints' paths, as Mount registers them.
const (
	CallbackPath = "/api/v1/oauth/callback"
	CompletePath = "/api/v1/oauth/complete"
)

// maxCompleteBody bounds a POST /complete body.
const maxCompleteBody = 16 << 10

// maxParamLen bounds each callback parameter; real codes and states are far shorter.
const maxParamLen = 4096

// Mount registers the three public endpoints on mux:
//   - "GET /api/v1/oauth/callback", the provider's redirect target (CallbackHandler),
//     which also finishes a sign-in sent by the frontend callback page's no-script form;
//   - "POST /api/v1/oauth/complete" (CompleteHandler), with its CORS preflight
//     "OPTIONS /api/v1/oauth/complete", which allows Config.FrontendOrigins only
//     (403 for any other request);
//   - "POST /api/v1/oauth/start" (StartHandler), which opens a bound sign-in
//     (Config.BindSignIns).
func (m *Module) Mount(mux *http.ServeMux) {
	mux.Handle("GET "+CallbackPath, m.CallbackHandler())
	mux.Handle("POST "+CompletePath, m.CompleteHandler())
	mux.Handle("OPTIONS "+CompletePath, m.completePreflightHandler())
	mux.Handle("POST "+StartPath, m.StartHandler())
}

// FrontendHandler serves the browser side of the flow, as embedded assets with no
// build step: the frontend callback page (GET /oauth/callback, a redirect URI
// target that hands the code to the widget, or completes through
// POST /api/v1/oauth/complete when opened directly; in a browser that runs no
// script, its form sends the provider's answer to GET /api/v1/oauth/callback,
// which completes the sign-in and shows the outcome) and the oauth-prompt widget
// (GET /oauth/oauth-prompt.js and .css). Mount it on the frontend's origin:
//
//	mux.Handle("GET /oauth/", m.FrontendHandler(""))
//
// apiBase is where the API lives when it is on another origin ("" for the same
// origin); a malformed apiBase panics, at setup. The callback page forwards,
// besides the provider's answer, the redirect's parameters that a registered
// provider keeps with the tokens (CallbackFielder), and no others.
func (m *Module) FrontendHandler(apiBase string) http.Handler {
	return web.Handler(web.Options{APIBase: apiBase, CallbackFields: m.declaredFieldNames})
}

// declaredFieldNames are the callback parameters the registered providers
// keep with the tokens (CallbackFielder), each once: the frontend callback
// page, which does not know the provider, forwards those.
func (m *Module) declaredFieldNames() []string {
	var names []string
	for _, id := range m.Registry.IDs() {
		p, err := m.Registry.Get(id)
		if cf, ok := p.(CallbackFielder); ok && err == nil {
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
func (m *Module) complete(r *http.Request, p callbackParams) outcome {
	ctx := r.Context()
	if p.tooLong() {
		return outcome{kind: outcomeInvalid, message: "The callback parameters are too long."}
	}
	if p.State != "" && !issuedState(p.State) { // refused before the store is touched
		return outcome{kind: outcomeInvalid, message: "The callback's state is not one this service issued."}
	}
	if p.Error != "" {
		return m.completeProviderError(r, p)
	}
	if p.Code == "" || p.State == "" {
		return outcome{kind: outcomeInvalid, message: "The callback is missing its code or state."}
	}
	if out, ok := m.verify(r, p.State); !ok {
		return out
	}
	s, err := m.Sessions.Consume(ctx, p.State)
	if err != nil {
		return m.classify(ctx, nil, err)
	}
	// The state is spent: from here the completion is the server's. It runs to
	// its end under a context of its own, whether or not the client stays.
	owned, cancel := m.serverOwned(ctx)
	defer cancel()
	prov, _ := m.Registry.Get(s.Provider)
	p.Fields = declaredFields(prov, p)
	err = m.exchangeSession(m.watchCompletion(owned, s), s, p)
	if err != nil {
		m.completionDone(owned, s) // a completion that succeeded removed its watch with the run's last save
		return m.classify(ctx, prov, err)
	}
	return outcome{provider: prov, kind: outcomeConnected}
}

// declaredFields are the redirect's parameters that prov keeps with the
// tokens (CallbackFielder), from its query or from what the frontend page
// forwarded: picked by the provider's names, so that no other parameter,
// however many, crowds one out. At most maxCallbackKept, none of the
// answer's own, none longer than maxParamLen.
func declaredFields(prov Provider, p callbackParams) map[string]string {
	cf, ok := prov.(CallbackFielder)
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

// defaultCompletionTimeout bounds a completion the server runs after the
// client's request: the exchange, the token write, the run's end and the
// parent's resume.
const defaultCompletionTimeout = time.Minute

// serverOwned is ctx's values with no cancellation and a deadline of its own.
func (m *Module) serverOwned(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), m.completionTimeout)
}

func (m *Module) exchangeSession(ctx context.Context, s *Session, p callbackParams) error {
	if s.WorkflowID != "" {
		_, err := m.Engine.Fire(withSession(ctx, s), s.WorkflowID, transitionExchange,
			exchangeInput{Code: p.Code, State: p.State, Iss: p.Iss, Fields: p.Fields}, s.UserID)
		return err
	}
	ctx = withCallbackFields(ctx, p.Fields)
	// A sign-in started by calling build_oauth_url directly, outside a workflow.
	_, err := m.exchangeCode(ctx, ToolContext{UserID: s.UserID, Session: s},
		ExchangeOAuthTokenArgs{Provider: s.Provider, Code: p.Code, State: p.State, ExpectedState: p.State, Iss: p.Iss})
	kind := EventConnected
	if err != nil {
		kind = EventFlowFailed
	}
	m.events.emit(ctx, Event{Kind: kind, UserID: s.UserID, ProviderID: s.Provider, Err: err, GrantDead: IsGrantDead(err)})
	return err
}

// verify checks, when the module verifies completions, that r may complete
// the sign-in under state ([Config.VerifyUser], [Config.BindSignIns]),
// before anything is consumed. A
// sign-in that cannot be read is refused: the check fails closed.
func (m *Module) verify(r *http.Request, state string) (outcome, bool) {
	if !m.verifies() {
		return outcome{}, true
	}
	s, err := m.Sessions.Peek(r.Context(), state)
	if err != nil { // fail closed: the consume right after could still succeed
		return m.classify(r.Context(), nil, err), false
	}
	if err := m.checkUser(r, s, state); err != nil {
		return m.refused(s), false
	}
	return outcome{}, true
}

func (m *Module) refused(s *Session) outcome {
	prov, _ := m.Registry.Get(s.Provider)
	return outcome{provider: prov, kind: outcomeForbidden,
		message: "This sign-in was started by another user or in another browser. Start it again from the app, signed in as yourself."}
}

// completeProviderError records a provider's error redirect on the pending
// sign-in's prompt without consuming it: the user may try the same link again.
// A redirect whose iss is not the expected issuer is refused and records nothing.
func (m *Module) completeProviderError(r *http.Request, p callbackParams) outcome {
	ctx := r.Context()
	out := outcome{kind: outcomeProviderError, message: signInErrorMessage(p.Error, p.ErrorDescription)}
	if p.State == "" {
		return out
	}
	s, err := m.Sessions.Peek(ctx, p.State)
	if err != nil {
		if errors.Is(err, ErrStoreUnavailable) || ctx.Err() != nil {
			return m.classify(ctx, nil, err)
		}
		return out
	}
	out.provider, _ = m.Registry.Get(s.Provider)
	if m.verifies() && m.checkUser(r, s, p.State) != nil {
		return m.refused(s)
	}
	if checkIss(s, p.Iss) != nil {
		return outcome{provider: out.provider, kind: outcomeRejected, message: "The sign-in response came from an unexpected issuer."}
	}
	tellRefused(ctx, out.provider, p.Error, p.ErrorDescription) // e.g. an MCP server's provider re-registers a refused client
	if s.WorkflowID != "" {
		in := providerErrorInput{Error: p.Error, ErrorDescription: p.ErrorDescription, ErrorURI: p.ErrorURI}
		ctx, cancel := m.serverOwned(ctx) // the denial is recorded even when the browser left
		defer cancel()
		if _, err := m.Engine.Fire(ctx, s.WorkflowID, transitionReportError, in, s.UserID); err != nil {
			m.log.WarnContext(ctx, "oauthflow: recording a provider error redirect failed",
				"run", s.WorkflowID, "error", logSafeError(err))
		}
	}
	return out
}

// classify turns a completion error into what the endpoints answer. ctx is the
// request's: when it has ended, the client went away, whatever failed after.
func (m *Module) classify(ctx context.Context, p Provider, err error) outcome {
	out := outcome{provider: p, message: flowFailureMessage(err)}
	var fe *FlowError
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		out.kind, out.message = outcomeCanceled, "The request ended before the sign-in completed."
		m.log.InfoContext(ctx, "oauthflow: the client went away before a sign-in completed", "error", logSafeError(err))
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
		m.log.Error("oauthflow: completing a sign-in failed", "error", logSafeError(err))
	}
	return out
}

// CallbackHandler serves GET /api/v1/oauth/callback, the provider's redirect
// target: it completes the sign-in and renders a small page with the outcome.
func (m *Module) CallbackHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		p := callbackParams{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss"),
			Error: q.Get("error"), ErrorDescription: q.Get("error_description"), ErrorURI: q.Get("error_uri"),
			query: q}
		out := m.complete(r, p)
		m.renderPage(w, out, p.State)
	})
}

// CompleteHandler serves POST /api/v1/oauth/complete, the JSON variant the
// frontend callback page uses: {code, state[, iss]} or {state, error, error_description}.
// A request from one of Config.FrontendOrigins gets CORS headers on every answer,
// errors included, so the frontend can read them.
func (m *Module) CompleteHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.origins.allowOrigin(w.Header(), r)
		p, status, code, msg := decodeComplete(w, r)
		if status != 0 {
			writeJSONError(w, status, code, msg)
			return
		}
		m.writeOutcome(w, m.complete(r, p))
	})
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

func (m *Module) writeOutcome(w http.ResponseWriter, out outcome) {
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
