package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"os"
	"strconv"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
)

// portFromEnv returns PORT, or def when PORT is unset or empty; a PORT
// that is not a port number is an error naming it.
func portFromEnv(def int) (int, error) {
	v := os.Getenv("PORT")
	if v == "" {
		return def, nil
	}
	p, err := strconv.Atoi(v)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("PORT=%q: want a port number from 1 to 65535", v)
	}
	return p, nil
}

// listen listens on 127.0.0.1:port and returns the listener with the base URL
// the browser reaches it at.
func listen(port int) (net.Listener, string, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return nil, "", err
	}
	return ln, "http://" + ln.Addr().String(), nil
}

// registerFromEnv registers every catalog provider whose <ID>_CLIENT_ID is
// set, and logs the ones whose other variables are missing.
func registerFromEnv(reg *oauthflow.Registry, log *slog.Logger) {
	for _, id := range providers.Known() {
		if os.Getenv(providers.EnvPrefix(id)+"_CLIENT_ID") == "" {
			continue
		}
		p, err := providers.FromEnv(id)
		if err == nil {
			err = reg.Register(p)
		}
		if err != nil {
			log.Warn("provider not registered", "provider", id, "error", err.Error())
		}
	}
}

// servePage answers GET with the HTML file name from fsys, through writePage;
// it is a handler of withUser, whose user it does not need.
func servePage(fsys fs.FS, name string) func(w http.ResponseWriter, r *http.Request, user string) {
	return func(w http.ResponseWriter, _ *http.Request, _ string) {
		page, err := fs.ReadFile(fsys, name)
		if err != nil {
			http.Error(w, "missing page", http.StatusInternalServerError)
			return
		}
		writePage(w, page)
	}
}

// writePage answers an HTML page with the security headers it needs: no
// inline script or style, nothing cached, no referrer, no framing.
func writePage(w http.ResponseWriter, page []byte) {
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "+
		"img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	_, _ = w.Write(page)
}

// userCookie is the cookie that names the browser's user: the example has no login.
const userCookie = "quickstart_user"

// currentUser is the app's Config.CurrentUser: the user the cookie named
// cookie holds, as withUser set it. The connections endpoint acts for this
// user only.
func currentUser(cookie string) func(r *http.Request) (string, error) {
	return func(r *http.Request) (string, error) {
		c, err := r.Cookie(cookie)
		if err != nil || len(c.Value) != 32 {
			return "", errors.New("no quickstart user: open the page first")
		}
		return c.Value, nil
	}
}

// withUser gives each browser its own user, kept in the cookie named cookie:
// the example has no login. A POST must be JSON: a cross-site form cannot
// send that without a CORS preflight.
func withUser(cookie string, h func(w http.ResponseWriter, r *http.Request, user string)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !isJSON(r) {
			writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "send application/json"})
			return
		}
		user := ""
		if c, err := r.Cookie(cookie); err == nil && len(c.Value) == 32 {
			user = c.Value
		} else {
			b := make([]byte, 16)
			_, _ = rand.Read(b)
			user = hex.EncodeToString(b)
			http.SetCookie(w, &http.Cookie{Name: cookie, Value: user, Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode})
		}
		h(w, r, user)
	}
}

// isJSON reports whether the request's body is declared as JSON.
func isJSON(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "application/json"
}

// writeJSON answers v as JSON, never cached.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
