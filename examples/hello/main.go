// Command hello is a small app on oauthflow: it connects its user's account
// at a provider and calls the provider's API with the stored token. It runs
// with no credentials: a local provider (the test kit's server, at /local)
// stands in for a real one, and GitHub joins it when GITHUB_CLIENT_ID,
// GITHUB_CLIENT_SECRET and GITHUB_OAUTH_REDIRECT_URI are set.
//
//	go run .   # open http://127.0.0.1:8080/connect/local, then /me/local
package main

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/oauthflowtest"
	"github.com/oauthflow/oauthflow/providers"
)

const base = "http://127.0.0.1:8080"

// user is the app's one user; a real app takes it from its login session.
const user = "hello"

func main() {
	mod, err := oauthflow.New(context.Background(), oauthflow.Config{})
	if err != nil {
		log.Fatal(err)
	}
	defer mod.Close()
	mux := http.NewServeMux()
	local := oauthflowtest.Mount(mux, base+"/local", oauthflowtest.Options{ConsentPage: true})
	apis := map[string]string{"local": local.UserinfoURL()}
	must(mod.Registry.Register(local.Provider("local", base+oauthflow.CallbackPath)))
	if gh, err := providers.FromEnv("github"); err == nil {
		must(mod.Registry.Register(gh))
		apis["github"] = "https://api.github.com/user"
	}
	routes(mux, mod, apis)
	log.Fatal(http.ListenAndServe("127.0.0.1:8080", mux))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}

// routes mounts oauthflow's endpoints on mux and the app's own: GET
// /connect/{provider} sends the browser to sign in, GET /me/{provider} calls
// the provider's API (apis) with the stored token, POST /disconnect/{provider}
// forgets the token and revokes it.
func routes(mux *http.ServeMux, mod *oauthflow.Module, apis map[string]string) {
	mod.Mount(mux)
	mux.HandleFunc("GET /connect/{provider}", func(w http.ResponseWriter, r *http.Request) {
		_, prompt, err := mod.StartSignIn(r.Context(), user, r.PathValue("provider"))
		if err != nil {
			fail(w, err)
			return
		}
		http.Redirect(w, r, prompt.AuthURL, http.StatusFound)
	})
	mux.HandleFunc("GET /me/{provider}", func(w http.ResponseWriter, r *http.Request) {
		provider := r.PathValue("provider")
		api, ok := apis[provider]
		if !ok {
			fail(w, oauthflow.ErrUnknownProvider)
			return
		}
		resp, err := mod.Tokens.Client(r.Context(), user, provider).Get(api)
		if err != nil {
			fail(w, err)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
		w.WriteHeader(resp.StatusCode)
		_, _ = io.Copy(w, io.LimitReader(resp.Body, 1<<20))
	})
	mux.HandleFunc("POST /disconnect/{provider}", func(w http.ResponseWriter, r *http.Request) {
		if err := mod.Tokens.DeleteTokens(r.Context(), user, r.PathValue("provider")); err != nil {
			fail(w, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// fail answers err without its text: it may name more than a user should see.
func fail(w http.ResponseWriter, err error) {
	switch {
	case errors.Is(err, oauthflow.ErrUnknownProvider):
		http.Error(w, "no such provider", http.StatusNotFound)
	case errors.Is(err, oauthflow.ErrNoToken):
		http.Error(w, "not connected", http.StatusUnauthorized)
	default:
		log.Print(err)
		http.Error(w, "try again later", http.StatusServiceUnavailable)
	}
}
