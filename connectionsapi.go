package oauthflow

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"
	"time"

	"github.com/oauthflow/oauthflow/internal/clip"
	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
)

// The connections endpoint: where a user sees what the app may do on their
// behalf, connects, reconnects and disconnects, under the same prefix as the
// other endpoints ([Module.Mount]). It acts for the user Config.CurrentUser
// names, and for nobody else: no request names a user. Its writes come from
// the app's own pages only: from the API's origin or one of
// Config.FrontendOrigins, with a header a form cannot send (which also makes
// a browser ask first, cross-origin, with a preflight only those origins
// pass), and a POST with a JSON body. Every answer is no-store.
//
//	GET    /api/v1/oauth/connections             the user's connections and the providers offered
//	POST   /api/v1/oauth/connections             {"provider", "grant"?, "returnTo"?}: a sign-in's prompt document
//	DELETE /api/v1/oauth/connections/{provider}  disconnect (revoking where the provider can): 204
//	GET    /api/v1/oauth/reconnect?token=...     a reconnect link ([Module.ReconnectLink])

const (
	connectionsPath = "/api/v1/oauth/connections"
	reconnectPath   = "/api/v1/oauth/reconnect"
	// writeHeader must hold writeHeaderValue on every write: a form cannot
	// send it, and a page on another origin cannot without a preflight.
	writeHeader      = "X-Requested-With"
	writeHeaderValue = "oauthflow"
	// maxConnectBody bounds a POST body: a provider ID, a grant and a return address.
	maxConnectBody = 4 << 10
	// maxDisplayNameLen bounds a display name a listing shows (an account
	// name is bounded when kept: maxAccountLen).
	maxDisplayNameLen = 128
)

// connectionsAPI serves the connections endpoint and reconnect links for
// the module m. currentUser is Config.CurrentUser; without it every
// request is answered 501. origins are Config.FrontendOrigins, with
// credentials: the endpoint knows its user from the app's own cookies.
type connectionsAPI struct {
	m           *Module
	currentUser func(r *http.Request) (userID string, err error)
	origins     frontendOrigins
}

func newConnectionsAPI(m *Module, currentUser func(*http.Request) (string, error)) *connectionsAPI {
	c := &connectionsAPI{m: m, currentUser: currentUser, origins: m.endpoints.origins}
	c.origins.credentials = true
	return c
}

// connectionsDoc is GET's answer.
type connectionsDoc struct {
	Connections []connectionDoc `json:"connections"`
	Providers   []providerDoc   `json:"providers"` // those the user may connect from a browser
}

// connectionDoc is one connection as the endpoint shows it: no token, and
// the health's reason in the library's words.
type connectionDoc struct {
	Provider    string   `json:"provider"`
	DisplayName string   `json:"displayName"`
	Account     string   `json:"account"` // "" when the provider did not say
	Scopes      []string `json:"scopes"`
	Health      string   `json:"health"` // HealthHealthy, HealthRefreshFailing, HealthUnreadable
	Reason      string   `json:"reason"` // "" when healthy
	ConnectedAt string   `json:"connectedAt,omitempty"`
	LastUsed    string   `json:"lastUsed,omitempty"`
	DPoP        bool     `json:"dpop"`
}

type providerDoc struct {
	ID          string `json:"id"`
	DisplayName string `json:"displayName"`
}

// connectRequest is POST's body.
type connectRequest struct {
	Provider string `json:"provider"`
	Grant    string `json:"grant,omitempty"`    // "" or GrantDevice
	ReturnTo string `json:"returnTo,omitempty"` // as OAuthWorkflowArgs.ReturnTo
}

// serveList serves GET /api/v1/oauth/connections.
func (c *connectionsAPI) serveList(w http.ResponseWriter, r *http.Request) {
	user, ok := c.begin(w, r, false)
	if !ok {
		return
	}
	list, err := c.m.Tokens.Connections(r.Context(), user)
	if err != nil {
		c.fail(w, r, err)
		return
	}
	doc := connectionsDoc{Connections: make([]connectionDoc, 0, len(list)), Providers: c.offered()}
	for _, conn := range list {
		doc.Connections = append(doc.Connections, c.docOf(conn))
	}
	writeJSON(w, http.StatusOK, doc)
}

// serveConnect serves POST /api/v1/oauth/connections: it starts a sign-in
// of the current user to the provider asked for and answers its prompt
// document, as the oauth-prompt widget shows it.
func (c *connectionsAPI) serveConnect(w http.ResponseWriter, r *http.Request) {
	user, ok := c.begin(w, r, true)
	if !ok {
		return
	}
	req, ok := decodeConnect(w, r)
	if !ok {
		return
	}
	p, err := c.m.Registry.Get(req.Provider)
	if err != nil && !errors.Is(err, ErrUnknownProvider) { // a resolver that could not build it (AddResolver)
		c.fail(w, r, err)
		return
	}
	if err != nil || !signsInByBrowser(p) {
		writeJSONError(w, http.StatusNotFound, "unknown_provider", "This app does not connect to that provider.")
		return
	}
	if req.Grant != "" && req.Grant != GrantDevice {
		writeJSONError(w, http.StatusBadRequest, "invalid_request", `The grant must be "device" or left out.`)
		return
	}
	if req.Grant == GrantDevice && deviceAuthorizerOf(p) == nil {
		writeJSONError(w, http.StatusBadRequest, "device_unsupported", "This provider does not offer signing in with a code.")
		return
	}
	_, doc, err := c.m.flow.launch(r.Context(), user, OAuthWorkflowArgs{Provider: p.ProviderID(), Grant: req.Grant, ReturnTo: req.ReturnTo})
	if err != nil {
		c.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, doc)
}

// serveDisconnect serves DELETE /api/v1/oauth/connections/{provider}: it
// deletes the current user's connection, revoking its tokens where the
// provider can (TokenStore.DeleteTokens). A connection the user does not
// have is 404, whoever else has one.
func (c *connectionsAPI) serveDisconnect(w http.ResponseWriter, r *http.Request) {
	user, ok := c.begin(w, r, true)
	if !ok {
		return
	}
	id := r.PathValue("provider")
	if !c.connected(w, r, user, id) {
		return
	}
	if err := c.m.Tokens.DeleteTokens(r.Context(), user, id); err != nil {
		c.fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

// connected reports whether user has a connection to id, answering 404 (or
// the store's failure) when not. A record that cannot be read is a
// connection: the user may remove it.
func (c *connectionsAPI) connected(w http.ResponseWriter, r *http.Request, user, id string) bool {
	if !keyspace.ValidProviderID(id) {
		writeJSONError(w, http.StatusNotFound, "not_connected", "You have no connection to that provider.")
		return false
	}
	_, err := c.m.Tokens.GetTokens(r.Context(), user, id)
	switch {
	case errors.Is(err, ErrNoToken), errors.Is(err, ErrUnknownProvider):
		writeJSONError(w, http.StatusNotFound, "not_connected", "You have no connection to that provider.")
		return false
	case errors.Is(err, ErrStoreUnavailable), r.Context().Err() != nil:
		c.fail(w, r, err)
		return false
	}
	return true
}

// servePreflight answers the CORS preflight of the endpoint's requests: 204
// allowing GET, POST and DELETE with Content-Type and the write header, and
// credentials, for one of Config.FrontendOrigins; 403 without any CORS
// header for every other origin, so the browser does not send the request.
func (c *connectionsAPI) servePreflight(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	if !c.origins.allowOrigin(h, r) {
		w.WriteHeader(http.StatusForbidden)
		return
	}
	h.Set("Access-Control-Allow-Methods", "GET, POST, DELETE")
	h.Set("Access-Control-Allow-Headers", "Content-Type, "+writeHeader)
	h.Set("Access-Control-Max-Age", corsMaxAge)
	w.WriteHeader(http.StatusNoContent)
}

// begin checks what every request of the endpoint needs and returns its
// user: the endpoint is configured, a write comes from the app
// (fromApp), and the app names a user. Otherwise it answers, and ok is false.
func (c *connectionsAPI) begin(w http.ResponseWriter, r *http.Request, write bool) (user string, ok bool) {
	c.origins.allowOrigin(w.Header(), r) // the app's frontends read every answer, errors included
	if c.currentUser == nil {
		writeJSONError(w, http.StatusNotImplemented, "not_configured", "Connected accounts are not available in this app.")
		return "", false
	}
	if write && !c.fromApp(r) {
		writeJSONError(w, http.StatusForbidden, "cross_site", "Connections can only be changed from the app itself.")
		return "", false
	}
	user, err := c.user(r)
	if err != nil {
		writeJSONError(w, http.StatusUnauthorized, "unauthorized", "Sign in to the app first.")
		return "", false
	}
	return user, true
}

// fromApp reports whether the write r comes from one of the app's pages:
// its Origin is the API's own or one of Config.FrontendOrigins, and it
// carries the write header, which no form can send.
func (c *connectionsAPI) fromApp(r *http.Request) bool {
	return c.m.endpoints.sameOrAllowedOrigin(r) && r.Header.Get(writeHeader) == writeHeaderValue
}

// errNoUser means Config.CurrentUser named nobody: the request is not
// signed in to the app.
var errNoUser = errors.New("oauthflow: Config.CurrentUser names no user for the request")

// user is the request's user, as Config.CurrentUser says; errNoUser (or
// the function's error) when it names nobody, or a user ID that cannot be.
func (c *connectionsAPI) user(r *http.Request) (user string, err error) {
	defer errs.Recover(&err, "Config.CurrentUser")
	user, err = c.currentUser(r)
	switch {
	case err != nil:
		return "", err
	case user == "":
		return "", errNoUser
	case len(user) > keyspace.MaxUserIDLen:
		return "", fmt.Errorf("%w: the user ID is longer than %d bytes", errNoUser, keyspace.MaxUserIDLen)
	}
	return user, nil
}

// decodeConnect reads a POST body: JSON only, at most maxConnectBody, no
// unknown fields, a provider named. It answers and returns false otherwise.
func decodeConnect(w http.ResponseWriter, r *http.Request) (req connectRequest, ok bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		writeJSONError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "The body must be application/json.")
		return req, false
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxConnectBody))
	dec.DisallowUnknownFields()
	var tooBig *http.MaxBytesError
	switch err := dec.Decode(&req); {
	case errors.As(err, &tooBig):
		writeJSONError(w, http.StatusRequestEntityTooLarge, "request_too_large", "The body is too large.")
		return req, false
	case err != nil || dec.More() || req.Provider == "":
		writeJSONError(w, http.StatusBadRequest, "invalid_request", `The body must be one JSON object naming a "provider".`)
		return req, false
	}
	return req, true
}

// fail answers err, a failure of the store, the provider or the library,
// without its text.
func (c *connectionsAPI) fail(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case r.Context().Err() != nil:
		writeJSONError(w, statusClientClosedRequest, "request_cancelled", "The request ended before it was answered.")
	case errors.Is(err, ErrStoreUnavailable):
		writeJSONError(w, http.StatusServiceUnavailable, "store_unavailable", "The service is temporarily unavailable. Please try again later.")
	case IsTransient(err), errors.Is(err, errPush):
		writeJSONError(w, http.StatusBadGateway, "provider_unavailable", "The provider could not be reached. Please try again later.")
	default:
		c.m.endpoints.log.ErrorContext(r.Context(), "oauthflow: the connections endpoint failed", "error", logSafeError(err))
		writeJSONError(w, http.StatusInternalServerError, "internal_error", "Something went wrong. Please try again.")
	}
}

// offered are the providers the app registered itself that a user signs
// in to from a browser, sorted by ID: not those a resolver built (an MCP
// server's), nor those reached by a grant of the app's own (client
// credentials), whose authorization URL is empty.
func (c *connectionsAPI) offered() []providerDoc {
	out := []providerDoc{}
	for _, id := range c.m.Registry.ownIDs() {
		if p, err := c.m.Registry.Get(id); err == nil && signsInByBrowser(p) {
			out = append(out, providerDoc{ID: id, DisplayName: clip.To(displayName(p), maxDisplayNameLen)})
		}
	}
	return out
}

// probeState stands in for a state when asking a provider whether it builds
// an authorization URL at all; the URL is thrown away.
const probeState = "probe"

// signsInByBrowser reports whether a user signs in to p in a browser: it
// builds an authorization URL.
func signsInByBrowser(p Provider) bool {
	u, err := callBuildAuthURL(p, p.DefaultScopes(), probeState, nil)
	return err == nil && u != ""
}

// docOf is conn as the endpoint shows it. The display name is the
// registry's when it holds the provider now, else its ID; the account is
// the provider's word, bounded.
func (c *connectionsAPI) docOf(conn Connection) connectionDoc {
	name := conn.ProviderID
	if c.m.Registry.Has(conn.ProviderID) {
		if p, err := c.m.Registry.Get(conn.ProviderID); err == nil {
			name = clip.To(displayName(p), maxDisplayNameLen)
		}
	}
	d := connectionDoc{Provider: conn.ProviderID, DisplayName: name, Account: clip.To(conn.Account, maxAccountLen),
		Scopes: conn.Scopes, Health: conn.Health, Reason: healthReason(conn, name), DPoP: conn.DPoP,
		ConnectedAt: rfc3339(conn.ConnectedAt), LastUsed: rfc3339(conn.LastUsed)}
	if d.Scopes == nil {
		d.Scopes = []string{}
	}
	return d
}

// rfc3339 is t in UTC as RFC 3339, "" for the zero time.
func rfc3339(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// healthReason says why conn is not healthy, in words for its user; "" when
// it is. It never carries the provider's own error text (Connection.LastError).
func healthReason(conn Connection, name string) string {
	switch conn.Health {
	case HealthRefreshFailing:
		return failureReason(name, false, conn.Attempts)
	case HealthUnreadable:
		return "This connection's saved access cannot be read. Disconnect it and connect again."
	}
	return ""
}

// failureReason says what became of a connection to the provider called
// name whose refresh failed: gone (the grant is dead) or failing, after
// attempts failures in a row.
func failureReason(name string, gone bool, attempts int) string {
	switch {
	case gone:
		return name + " ended this connection: access was revoked or expired there. Connect again to keep using it."
	case attempts == 1:
		return name + " could not renew this connection's access. It is tried again on its own; reconnect if this goes on."
	case attempts > 1:
		return fmt.Sprintf("%s could not renew this connection's access (%d attempts in a row). It is tried again on its own; reconnect if this goes on.", name, attempts)
	}
	return name + " could not renew this connection's access."
}
