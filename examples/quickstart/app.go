package main

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
)

//go:embed static
var static embed.FS

type appConfig struct {
	Base     string // scheme://host:port the browser reaches the app at
	Logger   *slog.Logger
	TokenTTL time.Duration
	UseEnvKV bool // Redis from KVSTORE_* (with the memory fallback) instead of memory
}

// app is the host application: the oauthflow module, the demo provider mounted
// beside it, and a small page with the oauth-prompt widget.
type app struct {
	http.Handler
	mod  *oauthflow.Module
	demo *oauthflowtest.Server
	log  *slog.Logger

	mu        sync.Mutex
	refreshes map[string]int // user/provider -> refreshes seen through the event hook
}

func newApp(ctx context.Context, cfg appConfig) (*app, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &app{log: cfg.Logger, refreshes: make(map[string]int)}
	mc := oauthflow.Config{Logger: cfg.Logger, OnEvent: a.onEvent, CurrentUser: currentUser(userCookie)}
	if !cfg.UseEnvKV {
		mc.KV = oauthflow.NewMemoryKV()
	}
	mod, err := oauthflow.New(ctx, mc)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	as, p, err := mountDemo(mux, cfg.Base, cfg.TokenTTL)
	if err != nil {
		return nil, err
	}
	if err := mod.Registry.Register(p); err != nil {
		return nil, err
	}
	registerFromEnv(mod.Registry, cfg.Logger)
	a.mod, a.demo = mod, as
	mod.Mount(mux)
	mux.Handle("GET /oauth/", mod.FrontendHandler(""))
	mux.Handle("GET /static/", http.FileServerFS(static))
	mux.HandleFunc("GET /{$}", withUser(userCookie, servePage(static, "static/index.html"))) // the widget's first listing needs the cookie
	mux.HandleFunc("GET /app/session", withUser(userCookie, a.session))
	mux.HandleFunc("POST /app/connect", withUser(userCookie, a.connect))
	mux.HandleFunc("POST /app/connect-device", withUser(userCookie, a.connectDevice))
	mux.HandleFunc("GET /app/signins/{id}", withUser(userCookie, a.signIn))
	mux.HandleFunc("POST /app/call", withUser(userCookie, a.call))
	mux.HandleFunc("POST /app/disconnect", withUser(userCookie, a.disconnect))
	a.Handler = mux
	return a, nil
}

func (a *app) Close() error { return a.mod.Close() }

// onEvent counts each connection's refreshes, from its sign-in to its
// disconnect.
func (a *app) onEvent(_ context.Context, e oauthflow.Event) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch e.Kind {
	case oauthflow.EventTokensRefreshed:
		a.refreshes[e.UserID+"/"+e.ProviderID]++
	case oauthflow.EventTokensDeleted:
		delete(a.refreshes, e.UserID+"/"+e.ProviderID)
	}
}

func (a *app) refreshCount(user, provider string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.refreshes[user+"/"+provider]
}

type providerView struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Connected bool       `json:"connected"`
	Device    bool       `json:"device"` // the provider offers sign-in with a code (the device grant)
	Token     *tokenView `json:"token,omitempty"`
	Refreshes int        `json:"refreshes"`
	// Account is who connected, as the provider's user-info endpoint names
	// them ("" when the provider has none).
	Account string `json:"account,omitempty"`
	// From the store's list of the user's connections (Tokens.Connections).
	Health      string `json:"health,omitempty"`
	ConnectedAt int64  `json:"connectedAt,omitempty"` // Unix ms; 0 = unknown
	RefreshedAt int64  `json:"refreshedAt,omitempty"` // Unix ms of the last refresh; 0 = none
	// While the health is refresh_failing: failures in a row, the last one, and the next attempt (Unix ms).
	Attempts    int    `json:"attempts,omitempty"`
	LastError   string `json:"lastError,omitempty"`
	NextAttempt int64  `json:"nextAttempt,omitempty"`
}

// tokenView shows a token without revealing it: a fingerprint and its expiry.
type tokenView struct {
	Fingerprint string `json:"fingerprint"`
	ExpiresAt   int64  `json:"expiresAt"` // Unix ms; 0 = never
	Scope       string `json:"scope"`
	Refreshable bool   `json:"refreshable"`
}

// unixMilli is t in Unix ms, 0 for the zero time.
func unixMilli(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fingerprint(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:4])
}

func (a *app) session(w http.ResponseWriter, r *http.Request, user string) {
	conns, err := a.mod.Tokens.Connections(r.Context(), user)
	if err != nil {
		a.fail(w, err)
		return
	}
	byProvider := map[string]oauthflow.Connection{}
	for _, c := range conns {
		byProvider[c.ProviderID] = c
	}
	var views []providerView
	for _, id := range a.mod.Registry.IDs() {
		p, _ := a.mod.Registry.Get(id)
		v := providerView{ID: id, Name: id, Refreshes: a.refreshCount(user, id)}
		if d, ok := p.(interface{ DisplayName() string }); ok { // optional methods of a Provider
			v.Name = d.DisplayName()
		}
		if d, ok := p.(interface{ SupportsDeviceAuth() bool }); ok {
			v.Device = d.SupportsDeviceAuth()
		}
		if t, err := a.mod.Tokens.GetTokens(r.Context(), user, id); err == nil {
			v.Connected = true
			v.Token = &tokenView{Fingerprint: fingerprint(t.AccessToken), ExpiresAt: t.ExpiresAt, Scope: t.Scope,
				Refreshable: t.RefreshToken != ""}
			c := byProvider[id]
			v.Account, v.Health, v.Attempts, v.LastError = c.Account, c.Health, c.Attempts, c.LastError
			v.ConnectedAt, v.RefreshedAt, v.NextAttempt = unixMilli(c.ConnectedAt), unixMilli(c.RefreshedAt), unixMilli(c.NextAttempt)
		} else if !errors.Is(err, oauthflow.ErrNoToken) {
			a.fail(w, err)
			return
		}
		views = append(views, v)
	}
	writeJSON(w, http.StatusOK, map[string]any{"providers": views, "now": time.Now().UnixMilli()})
}

type providerRequest struct {
	Provider string `json:"provider"`
}

func decodeRequest(w http.ResponseWriter, r *http.Request) (providerRequest, bool) {
	var req providerRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || req.Provider == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "send {\"provider\": \"...\"}"})
		return req, false
	}
	return req, true
}

// connect starts the "oauth" workflow and returns its prompt document, which
// the page renders with the oauth-prompt widget.
func (a *app) connect(w http.ResponseWriter, r *http.Request, user string) {
	req, ok := decodeRequest(w, r)
	if !ok {
		return
	}
	run, prompt, err := a.mod.StartSignIn(r.Context(), user, req.Provider)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"runId": run.ID, "prompt": prompt})
}

// connectDevice starts the "oauth" workflow with the device grant and returns
// its prompt document: the code to enter and where. The page renders it with
// the oauth-prompt widget and polls GET /app/signins/{id} for the outcome,
// which the Module's worker learns by polling the provider.
func (a *app) connectDevice(w http.ResponseWriter, r *http.Request, user string) {
	req, ok := decodeRequest(w, r)
	if !ok {
		return
	}
	run, prompt, err := a.mod.StartDeviceSignIn(r.Context(), user, req.Provider)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"runId": run.ID, "prompt": prompt})
}

// signIn answers GET /app/signins/{id}: the prompt document of the user's
// sign-in, which the page polls while a sign-in with a code is pending.
func (a *app) signIn(w http.ResponseWriter, r *http.Request, user string) {
	run, err := a.mod.Engine.Get(r.Context(), r.PathValue("id"))
	if errors.Is(err, oauthflow.ErrRunNotFound) || (err == nil && (run.UserID != user || run.Workflow != oauthflow.OAuthWorkflowName)) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "no such sign-in"})
		return
	}
	var prompt oauthflow.OAuthPromptDocument
	if err == nil {
		err = a.mod.Engine.Document(r.Context(), run.ID, oauthflow.PromptDocumentName, &prompt)
	}
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"prompt": prompt})
}

// call reads the demo provider's protected API with the user's token; the
// client refreshes the token first when it has expired.
func (a *app) call(w http.ResponseWriter, r *http.Request, user string) {
	req, ok := decodeRequest(w, r)
	if !ok {
		return
	}
	if req.Provider != demoID {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "the demo API belongs to the demo provider"})
		return
	}
	resp, err := a.mod.Tokens.Client(r.Context(), user, demoID).Get(a.demo.APIURL())
	if err != nil {
		a.fail(w, err)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	var me json.RawMessage
	if resp.StatusCode != http.StatusOK || json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&me) != nil {
		writeJSON(w, http.StatusBadGateway, map[string]any{"error": "the demo API answered " + resp.Status})
		return
	}
	t, err := a.mod.Tokens.GetTokens(r.Context(), user, demoID)
	if err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"me": me, "fingerprint": fingerprint(t.AccessToken)})
}

func (a *app) disconnect(w http.ResponseWriter, r *http.Request, user string) {
	req, ok := decodeRequest(w, r)
	if !ok {
		return
	}
	if err := a.mod.Tokens.DeleteTokens(r.Context(), user, req.Provider); err != nil {
		a.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]bool{"ok": true})
}

// fail answers an error without internal detail: not connected, bad input, no
// sign-in with a code, or try later.
func (a *app) fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, oauthflow.ErrNoToken):
		writeJSON(w, http.StatusUnauthorized, map[string]string{"error": "unauthorized"})
	case errors.Is(err, oauthflow.ErrUnknownProvider), errors.Is(err, oauthflow.ErrInvalidArgument):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "unknown provider or bad request"})
	case errors.Is(err, oauthflow.ErrDeviceAuthUnsupported):
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "this provider offers no sign-in with a code"})
	default:
		a.log.Error("quickstart request failed", "error", err.Error())
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"error": "try again later"})
	}
}
