// Package waitfor is how a test waits for something that should happen soon:
// with a deadline, failing with what never happened, instead of blocking
// until the whole run's timeout. Every wait in a test goes through it or
// through a select with a timeout, context or default case (a test in
// internal/layout checks it).
package waitfor

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// Limit is how long a wait lasts before it fails: far beyond what anything
// the tests wait for takes (a thousand sign-ins at once included) on a
// loaded machine under -race, and far below the run's timeout.
const Limit = time.Minute

// Recv returns the next value from ch; after Limit it fails t, naming what.
// Call it from the test's goroutine.
func Recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	v, err := RecvErr(ch, what)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Group waits until wg is done; after Limit it fails t, naming what.
// Call it from the test's goroutine.
func Group(t testing.TB, wg *sync.WaitGroup, what string) {
	t.Helper()
	if err := GroupErr(wg, what); err != nil {
		t.Fatal(err)
	}
}

// RecvErr is Recv for code off the test's goroutine (a callback, a fake
// provider): it returns an error instead of failing the test.
func RecvErr[T any](ch <-chan T, what string) (T, error) {
	return recvWithin(ch, what, Limit)
}

func recvWithin[T any](ch <-chan T, what string, limit time.Duration) (T, error) {
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v, nil
	case <-timer.C:
		var zero T
		return zero, fmt.Errorf("%s did not happen within %s", what, limit)
	}
}

// GroupErr is Group for code off the test's goroutine: it returns an error
// instead of failing the test. A group that never finishes leaves one
// goroutine behind, in a test that has failed.
func GroupErr(wg *sync.WaitGroup, what string) error {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	_, err := RecvErr(done, what)
	return err
}
