package oauthflow_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/oauthflow/oauthflow"
)

// A mistyped or unregistered provider is not "sign in again": reads answer
// ErrUnknownProvider, never ErrNoToken, so the agent pattern does not send
// the user to a sign-in that cannot work, and a tool fails saying so.
func TestUnknownProviderIsNotASignIn(t *testing.T) {
	ctx := context.Background()
	reg := oauthflow.NewRegistry()
	if err := reg.Register(newFakeProvider("github")); err != nil {
		t.Fatal(err)
	}
	s := oauthflow.NewTokenStore(oauthflow.NewMemoryKV(), reg)

	_, err := s.GetValidAccessToken(ctx, "alice", "githbu")
	if !errors.Is(err, oauthflow.ErrUnknownProvider) || errors.Is(err, oauthflow.ErrNoToken) {
		t.Errorf("GetValidAccessToken for an unknown provider: %v, want ErrUnknownProvider and not ErrNoToken", err)
	}
	_, err = s.GetValidAccessToken(ctx, "alice", "github")
	if !errors.Is(err, oauthflow.ErrNoToken) {
		t.Errorf("GetValidAccessToken for a known provider never connected: %v, want ErrNoToken", err)
	}

	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer api.Close()
	resp, err := s.Client(ctx, "alice", "githbu").Get(api.URL)
	if err == nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, oauthflow.ErrUnknownProvider) {
		t.Errorf("Client for an unknown provider: %v, want ErrUnknownProvider", err)
	}

	tool := oauthflow.NewTool("whoami", "", oauthflow.Schema{Type: "object"},
		func(ctx context.Context, tc oauthflow.ToolContext, _ struct{}) (any, error) {
			return s.GetValidAccessToken(ctx, tc.UserID, "githbu")
		})
	res, err := tool.Call(ctx, oauthflow.ToolContext{UserID: "alice"}, []byte(`{}`))
	if oauthflow.IsUnauthorized(res) || !errors.Is(err, oauthflow.ErrUnknownProvider) {
		t.Errorf("a tool reading an unknown provider's token: %s, %v; want ErrUnknownProvider, not unauthorized", res, err)
	}
}
