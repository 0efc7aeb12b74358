package oauthflow

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// Reconnect links: when a connection fails in the background (a refresh
// refused, a grant the provider ended: EventRefreshFailed), an app sends
// its user a link by email or chat that starts a new sign-in to that
// provider. The link holds a random token, as unguessable as a sign-in's
// state, that names a record in the store (sealed like a pending sign-in
// when records are encrypted) with the user, the provider and the link's
// expiry. Opening the link checks, before anything is consumed, that the
// browser's user (Config.CurrentUser) is the link's and that
// Config.VerifyUser accepts it: a forwarded link opened by someone else is
// refused and stays usable by its user. Then the record is taken (GETDEL:
// a link is used once), a sign-in is started for the link's user, and the
// browser is sent on to it.

// The bounds of a reconnect link's life, and its default.
const (
	minReconnectTTL     = time.Minute
	maxReconnectTTL     = 7 * 24 * time.Hour
	defaultReconnectTTL = 24 * time.Hour
)

// reconnectLink is what a reconnect link's record holds.
type reconnectLink struct {
	UserID    string `json:"userId"`
	Provider  string `json:"provider"`
	ExpiresAt int64  `json:"expiresAt"` // Unix ms, on the module's clock (Config.Now)
}

// reconnectKey names a reconnect link's record; "oauth:sys:" holds the
// records of the library's own subsystems.
func reconnectKey(token string) string { return "oauth:sys:reconnect:" + token }

// errLinkGone means a reconnect link names nothing usable: never issued,
// expired, used, or sealed under a key the ring no longer has.
var errLinkGone = errors.New("oauthflow: the reconnect link has expired or was already used")

// ReconnectLink returns a link that, opened by userID in a browser, starts
// a new sign-in of userID to providerID: what an app sends its user when
// a connection fails (EventRefreshFailed; GrantDead says it is gone). The
// link is on the API's origin, the origin of the provider's redirect URI,
// which must be the module's callback (CallbackPath, served by
// [Module.Mount]): GET /api/v1/oauth/reconnect?token=....
//
// The link is used once and lives ttl (0: 24 hours; at least a minute, at
// most 7 days). Opening it needs the app's sign-in: the request's user
// (Config.CurrentUser, which ReconnectLink requires) must be userID, and
// Config.VerifyUser, when set, must accept it. A link opened by anyone
// else is refused (403) and left for its user; a used or expired one is
// 410. The sign-in asks for the provider's default scopes.
func (m *Module) ReconnectLink(ctx context.Context, userID, providerID string, ttl time.Duration) (string, error) {
	if m.connections.currentUser == nil {
		return "", errs.Invalid("ReconnectLink needs Config.CurrentUser, to know who opens the link")
	}
	if err := keyspace.CheckIDs(userID, providerID); err != nil {
		return "", err
	}
	ttl, err := reconnectTTL(ttl)
	if err != nil {
		return "", err
	}
	origin, err := m.reconnectOrigin(providerID)
	if err != nil {
		return "", err
	}
	token := newState()
	if err := m.connections.putLink(ctx, token, reconnectLink{UserID: userID, Provider: providerID,
		ExpiresAt: m.flow.now().Add(ttl).UnixMilli()}, ttl); err != nil {
		return "", err
	}
	return origin + reconnectPath + "?" + url.Values{"token": {token}}.Encode(), nil
}

// reconnectTTL is ttl checked, 0 meaning the default.
func reconnectTTL(ttl time.Duration) (time.Duration, error) {
	if ttl == 0 {
		return defaultReconnectTTL, nil
	}
	if ttl < minReconnectTTL || ttl > maxReconnectTTL {
		return 0, errs.Invalid("a reconnect link lives from %v to %v, not %v", minReconnectTTL, maxReconnectTTL, ttl)
	}
	return ttl, nil
}

// reconnectOrigin is the origin reconnect links to providerID are on: that
// of its redirect URI, which must be the module's callback.
func (m *Module) reconnectOrigin(providerID string) (string, error) {
	p, err := m.Registry.Get(providerID)
	if err != nil {
		return "", err
	}
	origin, ok := callbackOrigin(p) // none for a provider without a sign-in in a browser
	if !ok {
		return "", errs.Invalid("provider %q does not redirect to %s on the API: reconnect links are served beside it, so mount the module's endpoints (Module.Mount) and redirect there",
			providerID, CallbackPath)
	}
	return origin, nil
}

// putLink stores the link l under token for ttl, sealed when records are.
func (c *connectionsAPI) putLink(ctx context.Context, token string, l reconnectLink, ttl time.Duration) error {
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	key := reconnectKey(token)
	ok, err := c.m.KV.SetNX(xcontext.OrBackground(ctx), key, c.m.ring.Seal(b, key), ttl)
	if err != nil {
		return errs.Store(ctx, "store reconnect link", err)
	}
	if !ok {
		return errs.Invalid("reconnect token already in use") // 256 random bits: never
	}
	return nil
}

// readLink reads the link under token, taking it when take is set, and
// returns it with its stored bytes (to put back); errLinkGone when it is
// not there, cannot be opened, or has expired on the module's clock.
func (c *connectionsAPI) readLink(ctx context.Context, token string, take bool) (reconnectLink, []byte, error) {
	key := reconnectKey(token)
	read := c.m.KV.Get
	if take {
		read = c.m.KV.GetDel
	}
	b, err := read(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return reconnectLink{}, nil, errLinkGone
	}
	if err != nil {
		return reconnectLink{}, nil, errs.Store(ctx, "read reconnect link", err)
	}
	var l reconnectLink
	plain, err := c.m.ring.Open(b, key)
	if err != nil || json.Unmarshal(plain, &l) != nil || l.UserID == "" || l.Provider == "" {
		return reconnectLink{}, nil, errLinkGone
	}
	if c.m.flow.now().UnixMilli() >= l.ExpiresAt {
		return reconnectLink{}, nil, errLinkGone
	}
	return l, b, nil
}

// serveReconnect serves GET /api/v1/oauth/reconnect?token=...: a reconnect
// link opened. It checks the link and its opener, takes the link, starts
// the sign-in and sends the browser on to it (303).
func (c *connectionsAPI) serveReconnect(w http.ResponseWriter, r *http.Request) {
	if c.currentUser == nil {
		renderLinkPage(w, http.StatusNotImplemented, "Reconnect links are not available", "This app does not serve reconnect links.")
		return
	}
	token := r.URL.Query().Get("token")
	if !keyspace.IssuedState(token) {
		renderLinkGone(w)
		return
	}
	l, _, err := c.readLink(r.Context(), token, false)
	if err != nil {
		c.renderLinkFailure(w, err)
		return
	}
	if !c.openedByItsUser(w, r, l) {
		return
	}
	l, b, err := c.readLink(r.Context(), token, true)
	if err != nil { // taken meanwhile, by its user's other tab
		c.renderLinkFailure(w, err)
		return
	}
	to, err := c.startReconnect(w, r, l)
	if err != nil {
		c.putBack(r.Context(), token, b, l)
		c.renderLinkFailure(w, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Referrer-Policy", "no-referrer")
	http.Redirect(w, r, to, http.StatusSeeOther)
}

// openedByItsUser checks, before the link is taken, that r's user is the
// link's and that Config.VerifyUser accepts it. A refusal emits
// EventSignInRefused, answers its page and leaves the link as it is.
func (c *connectionsAPI) openedByItsUser(w http.ResponseWriter, r *http.Request, l reconnectLink) bool {
	user, err := c.user(r)
	if err != nil {
		renderLinkPage(w, http.StatusUnauthorized, "Sign in first", "Sign in to the app, then open this link again.")
		return false
	}
	guard := &c.m.endpoints.guard
	s := &Session{UserID: l.UserID, Provider: l.Provider}
	if user != l.UserID {
		guard.events.emit(r.Context(), Event{Kind: EventSignInRefused, UserID: l.UserID, ProviderID: l.Provider, Err: errSignInRefused})
	} else if guard.checkUser(r, s, "") == nil {
		return true
	}
	renderLinkPage(w, http.StatusForbidden, "This link is not yours",
		"It was sent to another account. Sign in to the app as the person it was sent to, then open it again.")
	return false
}

// startReconnect starts the sign-in the link l stands for, as StartSignIn
// does, and returns where the browser goes: the sign-in's link, or for a
// bound sign-in (Config.BindSignIns) the provider itself, its cookie set
// on w as POST /api/v1/oauth/start would.
func (c *connectionsAPI) startReconnect(w http.ResponseWriter, r *http.Request, l reconnectLink) (string, error) {
	if _, err := c.m.Registry.Get(l.Provider); err != nil {
		return "", err
	}
	_, doc, err := c.m.flow.launch(r.Context(), l.UserID, OAuthWorkflowArgs{Provider: l.Provider})
	if err != nil {
		return "", err
	}
	if doc.Status != PromptPending {
		return "", &FlowError{Message: doc.Message, Err: errors.New("oauthflow: the reconnect's sign-in failed to start")}
	}
	if doc.Binding == "" {
		return doc.AuthURL, nil
	}
	s, err := c.m.Sessions.peek(r.Context(), doc.State)
	if err != nil {
		return "", err
	}
	to, err := c.m.endpoints.startURL(r.Context(), s, doc.State)
	if err != nil {
		return "", err
	}
	http.SetCookie(w, bindingCookie(r, doc.State, doc.Binding, c.m.flow.signInTTL))
	return to, nil
}

// putBack stores a taken link again, for the life it had left, when its
// sign-in could not be started: the user may try it again.
func (c *connectionsAPI) putBack(ctx context.Context, token string, b []byte, l reconnectLink) {
	left := time.UnixMilli(l.ExpiresAt).Sub(c.m.flow.now())
	if left < time.Second {
		return
	}
	if _, err := c.m.KV.SetNX(context.WithoutCancel(ctx), reconnectKey(token), b, left); err != nil {
		c.m.endpoints.log.WarnContext(ctx, "oauthflow: a reconnect link whose sign-in failed could not be put back", "error", logSafeError(err))
	}
}

// renderLinkFailure answers the page of a link that cannot be used: gone
// (410), the store down (503), the provider down (502), or anything else (500).
func (c *connectionsAPI) renderLinkFailure(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, errLinkGone), errors.Is(err, ErrUnknownProvider):
		renderLinkGone(w)
	case errors.Is(err, ErrStoreUnavailable):
		renderLinkPage(w, http.StatusServiceUnavailable, "Temporarily unavailable", "Please try again later.")
	case IsTransient(err), errors.Is(err, errPush):
		renderLinkPage(w, http.StatusBadGateway, "The provider could not be reached", "Please try again later.")
	default:
		c.m.endpoints.log.Error("oauthflow: a reconnect link could not start its sign-in", "error", logSafeError(err))
		renderLinkPage(w, http.StatusInternalServerError, "Something went wrong", publicMessage(err))
	}
}

func renderLinkGone(w http.ResponseWriter) {
	renderLinkPage(w, http.StatusGone, "This link has expired or was already used.",
		"Reconnect from the app, or ask for a new link.")
}

// renderLinkPage answers a reconnect link with the callback's page and its
// headers (no-store, no referrer, a strict Content-Security-Policy).
func renderLinkPage(w http.ResponseWriter, status int, title, message string) {
	d := pageData{Status: "error", Title: title, Message: message, Hint: "You can close this window.", Nonce: newState()}
	setPageHeaders(w.Header(), d.Nonce)
	w.WriteHeader(status)
	_ = pageTemplate.Execute(w, d)
}
