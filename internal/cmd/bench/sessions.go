package main

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oauthflow/oauthflow"
)

// sessionTakes: SessionService.Consume beside a raw GETDEL of a record of the
// same size. Each run prepares b.N single-use sessions before its timer starts.
func sessionTakes(e *env) (*table, error) {
	t := &table{title: "Taking a pending sign-in"}
	kv := oauthflow.WithKeyPrefix(oauthflow.NewRedisKV(e.rdb), e.prefix)
	ss := oauthflow.NewSessionService(kv)
	var batch atomic.Int64
	for _, g := range []int{1, 8} {
		getdel := func() float64 {
			ns, _ := nsPerOp(g, func(b *testing.B) func() error {
				keys := prepare(b, &batch, func(st string) error { return ss.Register(context.Background(), st, benchSession()) })
				return func() error { return e.rdb.GetDel(context.Background(), e.prefix+"oauth:session:"+keys()).Err() }
			})
			return ns
		}
		consume := func() float64 {
			ns, _ := nsPerOp(g, func(b *testing.B) func() error {
				keys := prepare(b, &batch, func(st string) error { return ss.Register(context.Background(), st, benchSession()) })
				return func() error { _, err := ss.Consume(context.Background(), keys()); return err }
			})
			return ns
		}
		lim, ours := pair(e.opts.rounds, getdel, consume)
		t.rows = append(t.rows, speedRow("Consume, Redis, "+goroutines(g), "raw go-redis GETDEL", lim, ours, ">= 0.9x", 0.9))
	}
	return t, nil
}

func benchSession() oauthflow.Session {
	return oauthflow.Session{WorkflowID: "run-0123456789", UserID: userID, Provider: provID,
		CodeVerifier: "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk", CreatedAt: time.Now().UnixMilli()}
}

// prepare registers b.N sessions under fresh states and returns a function that
// hands each state out once, safely from many goroutines.
func prepare(b *testing.B, batch *atomic.Int64, register func(string) error) func() string {
	id := batch.Add(1)
	states := make([]string, b.N)
	for i := range states {
		states[i] = stateOf(id, i)
		if err := register(states[i]); err != nil {
			b.Fatal(err)
		}
	}
	var next atomic.Int64
	return func() string { return states[next.Add(1)-1] }
}

// stateOf makes a state of the issued form (43 base64url characters) that is unique per batch and index.
func stateOf(batch int64, i int) string {
	s := "b" + strconv.FormatInt(batch, 36) + "x" + strconv.Itoa(i) + "y"
	for len(s) < 43 {
		s += "A"
	}
	return s
}
