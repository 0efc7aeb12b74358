package oauthflow_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/testkit/redistest"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSessionRegisterConsume(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			kv := be.new(t)
			ss := oauthflow.NewSessionService(kv)
			want := oauthflow.Session{WorkflowID: "run-1", UserID: "alice", Provider: "acme", CodeVerifier: "v", CreatedAt: 42}
			require.NoError(t, ss.Register(ctx, "state-1", want))
			ttl, err := kv.TTL(ctx, "oauth:session:state-1")
			require.NoError(t, err)
			assert.InDelta(t, (10 * time.Minute).Seconds(), ttl.Seconds(), 2, "pending sessions live 10 minutes")

			peeked, err := oauthflow.PeekSession(ss, ctx, "state-1")
			require.NoError(t, err)
			assert.Equal(t, want, *peeked)
			got, err := ss.Consume(ctx, "state-1")
			require.NoError(t, err)
			assert.Equal(t, want, *got)
			_, err = ss.Consume(ctx, "state-1")
			assert.ErrorIs(t, err, oauthflow.ErrSessionNotFound, "a state is single-use")
			_, err = ss.Consume(ctx, "never-registered")
			assert.ErrorIs(t, err, oauthflow.ErrSessionNotFound)
		})
	}
}

func TestSessionConsumeExactlyOnce(t *testing.T) {
	t.Parallel()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			assertConsumedOnce(t, be.new(t))
		})
	}
}

// assertConsumedOnce races 1,000 consumers of one state: exactly one wins.
func assertConsumedOnce(t *testing.T, kv oauthflow.KV) {
	ss := oauthflow.NewSessionService(kv)
	require.NoError(t, ss.Register(ctx, "the-state", oauthflow.Session{WorkflowID: "w", UserID: "u", Provider: "acme"}))
	var wins, misses atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			s, err := ss.Consume(ctx, "the-state")
			switch {
			case err == nil && s.UserID == "u":
				wins.Add(1)
			case errors.Is(err, oauthflow.ErrSessionNotFound):
				misses.Add(1)
			default:
				t.Errorf("Consume: %v", err)
			}
		}()
	}
	close(start)
	waitfor.Group(t, &wg, "1000 consumers")
	assert.EqualValues(t, 1, wins.Load(), "exactly one consumer wins")
	assert.EqualValues(t, 999, misses.Load())
}

func TestSessionExpires(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	ss := oauthflow.NewSessionService(oauthflow.NewRedisKV(c))
	require.NoError(t, ss.Register(ctx, "s", oauthflow.Session{UserID: "u", Provider: "acme"}))
	mr.FastForward(10*time.Minute + time.Second)
	_, err := ss.Consume(ctx, "s")
	assert.ErrorIs(t, err, oauthflow.ErrSessionNotFound)
}

func TestSessionBadInput(t *testing.T) {
	t.Parallel()
	kv := oauthflow.NewMemoryKV()
	ss := oauthflow.NewSessionService(kv)
	ok := oauthflow.Session{UserID: "u", Provider: "acme"}
	assert.ErrorIs(t, ss.Register(ctx, "", ok), oauthflow.ErrInvalidArgument)
	assert.ErrorIs(t, ss.Register(ctx, strings.Repeat("s", 600), ok), oauthflow.ErrInvalidArgument)
	assert.ErrorIs(t, ss.Register(ctx, "s", oauthflow.Session{Provider: "acme"}), oauthflow.ErrInvalidArgument)
	assert.ErrorIs(t, ss.Register(ctx, "s", oauthflow.Session{UserID: "u"}), oauthflow.ErrInvalidArgument)
	var nilCtx context.Context // a nil context must not panic
	require.NoError(t, ss.Register(nilCtx, "s", ok))
	assert.ErrorIs(t, ss.Register(ctx, "s", ok), oauthflow.ErrInvalidArgument, "a live state is never replaced")
	_, err := ss.Consume(ctx, "")
	assert.ErrorIs(t, err, oauthflow.ErrSessionNotFound)

	for _, raw := range []string{`{`, `{"userId":"u","provider":"p","bogus":1}`, `{"userId":"","provider":""}`, `"x"`} {
		require.NoError(t, kv.Set(ctx, "oauth:session:bad", []byte(raw), time.Minute))
		_, err := ss.Consume(ctx, "bad")
		assert.ErrorIs(t, err, oauthflow.ErrCorruptRecord, raw)
	}
}

func TestSessionStoreDownIsNotExpired(t *testing.T) {
	t.Parallel()
	mr, c := redistest.Mini(t)
	ss := oauthflow.NewSessionService(oauthflow.NewRedisKV(c))
	mr.Close()
	_, err := ss.Consume(ctx, "s")
	assert.ErrorIs(t, err, oauthflow.ErrStoreUnavailable)
	assert.NotErrorIs(t, err, oauthflow.ErrSessionNotFound)
	assert.ErrorIs(t, ss.Register(ctx, "s", oauthflow.Session{UserID: "u", Provider: "p"}), oauthflow.ErrStoreUnavailable)
}
