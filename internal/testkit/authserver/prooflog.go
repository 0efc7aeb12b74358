package authserver

import (
	"sync"
	"time"
)

// maxProofLog bounds how many accepted proofs a server remembers.
const maxProofLog = 1 << 16

// proofLog remembers the DPoP proofs a server accepted until they are too old to be
// accepted again anyway, so that none is accepted twice (RFC 9449 §11.1). It holds
// at most max entries: past that the oldest is forgotten before it lapses.
type proofLog struct {
	max   int
	mu    sync.Mutex
	until map[string]time.Time // proof ID → when it lapses
	order []string             // proof IDs, oldest first
}

// spend records the proof id, which lapses after until, and reports false when it
// was recorded before.
func (l *proofLog) spend(id string, until, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetLocked(now)
	if _, seen := l.until[id]; seen {
		return false
	}
	if l.until == nil {
		l.until = map[string]time.Time{}
	}
	l.until[id] = until
	l.order = append(l.order, id)
	return true
}

// forgetLocked drops the oldest entries while they have lapsed or the log is full.
func (l *proofLog) forgetLocked(now time.Time) {
	for len(l.order) > 0 {
		oldest := l.order[0]
		if len(l.order) < l.max && !now.After(l.until[oldest]) {
			return
		}
		delete(l.until, oldest)
		l.order = l.order[1:]
	}
}
