package waitfor

import (
	"sync"
	"testing"
	"time"
)

// A value or a finished group returns at once; the failures name what never
// happened (the deadline itself is not waited out here).
func TestWaitFor(t *testing.T) {
	t.Parallel()
	ch := make(chan int, 1)
	ch <- 7
	if v := Recv(t, ch, "the seven"); v != 7 {
		t.Fatalf("Recv = %d, want 7", v)
	}
	var wg sync.WaitGroup
	wg.Go(func() {})
	Group(t, &wg, "the group")
	if err := GroupErr(&wg, "the group again"); err != nil {
		t.Fatal(err)
	}
	closed := make(chan struct{})
	close(closed)
	if _, err := RecvErr(closed, "the close"); err != nil {
		t.Fatal(err)
	}
}

// A wait that runs out says what never happened.
func TestWaitForNamesWhatNeverHappened(t *testing.T) {
	t.Parallel()
	_, err := recvWithin(make(chan int), "the answer", time.Millisecond)
	if err == nil || err.Error() != "the answer did not happen within 1ms" {
		t.Fatalf("err = %v", err)
	}
}
