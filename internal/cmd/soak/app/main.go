// Command app is one instance of a host app for the multi-process soak
// (package soak): a Module on a shared Redis (one node or a Cluster) with the
// soak's authorization server as its "demo" provider, serving the two public
// endpoints and a small control API the soak drives it with:
//
//	POST /soak/start?user=U   starts U's sign-in: {"state","authUrl"}
//	GET  /soak/token?user=U   reads U's valid token: {"token"} or {"error":"no_token"|"refresh_failing"|"failed","message"}
//
// It is configured from the environment: SOAK_ADDR (listen address),
// SOAK_REDIS ("host:port", or "cluster:host:port,host:port,..."), SOAK_PREFIX
// (key prefix), SOAK_ISSUER (the authorization server's URL), SOAK_REDIRECT
// (the redirect URI every instance registers) and OAUTHFLOW_ENCRYPTION_KEYS.
// It prints "ready" once it listens.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
	"github.com/redis/go-redis/v9"
)

// The soak's client (internal/testkit/authserver's default confidential client).
const (
	clientID     = "demo-client"
	clientSecret = "demo-secret"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "app:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	client := redisClient(os.Getenv("SOAK_REDIS"))
	issuer := os.Getenv("SOAK_ISSUER")
	demo, err := providers.NewOAuth2(providers.Config{ID: "demo", AuthURL: issuer + "/authorize", TokenURL: issuer + "/token",
		RevocationURL: issuer + "/revoke", Scopes: []string{"read"}, AuthStyle: providers.AuthStyleHeader},
		providers.Credentials{ClientID: clientID, ClientSecret: clientSecret, RedirectURL: os.Getenv("SOAK_REDIRECT")})
	if err != nil {
		return err
	}
	reg := oauthflow.NewRegistry()
	if err := reg.Register(demo); err != nil {
		return err
	}
	m, err := oauthflow.New(ctx, oauthflow.Config{KV: oauthflow.NewRedisKV(client), KeyPrefix: os.Getenv("SOAK_PREFIX"),
		Registry: reg, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		WorkerInterval: 100 * time.Millisecond, RefreshBackoff: oauthflow.Backoff{First: 20 * time.Millisecond, Max: 80 * time.Millisecond}})
	if err != nil {
		return err
	}
	defer m.Close()
	mux := http.NewServeMux()
	m.Mount(mux)
	mux.HandleFunc("POST /soak/start", func(w http.ResponseWriter, r *http.Request) {
		_, doc, err := m.StartSignIn(r.Context(), r.URL.Query().Get("user"), "demo")
		if err != nil {
			answer(w, http.StatusInternalServerError, map[string]string{"error": "failed", "message": err.Error()})
			return
		}
		answer(w, http.StatusOK, map[string]string{"state": doc.State, "authUrl": doc.AuthURL})
	})
	mux.HandleFunc("GET /soak/token", func(w http.ResponseWriter, r *http.Request) {
		user := r.URL.Query().Get("user")
		tok, err := m.Tokens.GetValidAccessToken(r.Context(), user, "demo")
		switch {
		case oauthflow.IsTransient(err) && refreshFailing(r.Context(), m, user):
			answer(w, http.StatusServiceUnavailable, map[string]string{"error": "refresh_failing", "message": err.Error()})
		case errors.Is(err, oauthflow.ErrNoToken):
			answer(w, http.StatusNotFound, map[string]string{"error": "no_token", "message": err.Error()})
		case err != nil:
			answer(w, http.StatusServiceUnavailable, map[string]string{"error": "failed", "message": err.Error()})
		default:
			answer(w, http.StatusOK, map[string]string{"token": tok})
		}
	})
	l, err := net.Listen("tcp", os.Getenv("SOAK_ADDR"))
	if err != nil {
		return err
	}
	fmt.Println("ready")
	return http.Serve(l, mux)
}

func redisClient(spec string) redis.UniversalClient {
	if addrs, ok := strings.CutPrefix(spec, "cluster:"); ok {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), PoolSize: 32})
	}
	return redis.NewClient(&redis.Options{Addr: spec, PoolSize: 32})
}

func answer(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// refreshFailing reports whether user's demo connection is in a refresh
// backoff (its refreshes have been failing and the next attempt is not due),
// as TokenStore.Connections lists it.
func refreshFailing(ctx context.Context, m *oauthflow.Module, user string) bool {
	conns, err := m.Tokens.Connections(ctx, user)
	if err != nil {
		return false
	}
	for _, c := range conns {
		if c.ProviderID == "demo" {
			return c.Health == oauthflow.HealthRefreshFailing
		}
	}
	return false
}
