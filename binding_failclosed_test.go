package oauthflow_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/stretchr/testify/assert"
)

// Every check of who may complete a sign-in fails closed (issue 21, hole 5):
// when the pending sign-in cannot be read for the check, the completion is
// refused before anything is consumed, though the consume right after would
// succeed. The sign-in stays pending for the browser that started it.
func TestSignInCheckFailsClosed(t *testing.T) {
	t.Parallel()
	checks := map[string]func(*oauthflow.Config){
		"VerifyUser": func(c *oauthflow.Config) {
			c.VerifyUser = func(r *http.Request, userID string) error {
				if c, err := r.Cookie(appUserCookie); err == nil && c.Value == userID {
					return nil
				}
				return errors.New("not the app's user " + userID)
			}
		},
		"BindSignIns": func(c *oauthflow.Config) { c.BindSignIns = true },
	}
	for name, check := range checks {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			kv := &sessionReadBlipKV{KV: oauthflow.NewMemoryKV()}
			cfg := oauthflow.Config{KV: kv, WorkerInterval: time.Hour, Logger: slog.New(slog.DiscardHandler)}
			check(&cfg)
			f := newSignInFixtureWith(t, newFakeProvider("acme"), cfg)
			kv.failNext.Store(true)
			rec := httptest.NewRecorder()
			f.m.CallbackHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet,
				oauthflow.CallbackPath+"?code=c&state="+f.prompt.State, nil)) // another browser: no login, no cookie
			assert.False(t, kv.failNext.Load(), "the check's read failed")
			assert.Equal(t, http.StatusServiceUnavailable, rec.Code, "a check that cannot read the sign-in refuses")
			_, err := f.m.Tokens.GetTokens(ctx, "alice", "acme")
			assert.ErrorIs(t, err, oauthflow.ErrNoToken, "no account was attached to alice")
			_, err = f.m.Sessions.Peek(ctx, f.prompt.State)
			assert.NoError(t, err, "the sign-in is still pending for the browser that started it")
		})
	}
}

// sessionReadBlipKV fails the next read (GET) of a pending sign-in, once.
type sessionReadBlipKV struct {
	oauthflow.KV
	failNext atomic.Bool
}

func (k *sessionReadBlipKV) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasPrefix(key, "oauth:session:") && k.failNext.Swap(false) {
		return nil, errBlip
	}
	return k.KV.Get(ctx, key)
}
