package oauthflow_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/providers"
)

// A TokenStore's Client carries the user's token to an API: every request
// gets "Authorization: Bearer <token>", refreshed first when it has expired.
// A user who never connected gets ErrNoToken, the cue to send them through
// sign-in (Module.StartSignIn).
func ExampleTokenStore_Client() {
	ctx := context.Background()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "the API saw:", r.Header.Get("Authorization"))
	}))
	defer api.Close()

	reg := oauthflow.NewRegistry()
	acme, _ := providers.NewOAuth2(providers.Config{ID: "acme",
		AuthURL: "https://auth.acme.example/authorize", TokenURL: "https://auth.acme.example/token"},
		providers.Credentials{ClientID: "acme-client", RedirectURL: "https://app.example/api/v1/oauth/callback"})
	_ = reg.Register(acme)
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), reg)
	// A sign-in stores the tokens; here they are stored directly.
	err := store.StoreTokens(ctx, "alice", "acme", oauthflow.StoredTokens{AccessToken: "at-alice", Scope: "read"})
	if err != nil {
		panic(err)
	}

	resp, err := store.Client(ctx, "alice", "acme").Get(api.URL)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Print(string(body))

	_, err = store.Client(ctx, "bob", "acme").Get(api.URL)
	fmt.Println("bob must sign in:", errors.Is(err, oauthflow.ErrNoToken))
	// Output:
	// the API saw: Bearer at-alice
	// bob must sign in: true
}

// Connections lists what a user has connected, for a settings page: the
// granted scopes, whether the grant can be refreshed, and its health. It
// never holds a token.
func ExampleTokenStore_Connections() {
	ctx := context.Background()
	store := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), oauthflow.NewRegistry())
	inAnHour := time.Now().Add(time.Hour).UnixMilli()
	_ = store.StoreTokens(ctx, "alice", "github", oauthflow.StoredTokens{AccessToken: "gho-1", Scope: "repo read:user"})
	_ = store.StoreTokens(ctx, "alice", "google", oauthflow.StoredTokens{AccessToken: "ya29-1", RefreshToken: "1//r",
		ExpiresAt: inAnHour, Scope: "openid email"})

	conns, err := store.Connections(ctx, "alice")
	if err != nil {
		panic(err)
	}
	for _, c := range conns {
		fmt.Println(c.ProviderID, c.Scopes, c.HasRefreshToken, c.Health)
	}
	// Output:
	// github [repo read:user] false healthy
	// google [openid email] true healthy
}
