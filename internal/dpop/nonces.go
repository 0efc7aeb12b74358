package dpop

import (
	"container/list"
	"net/url"
	"sync"
)

// DefaultMaxNonces is how many origins Nonces remembers when Max is zero.
const DefaultMaxNonces = 1024

// Nonces remembers the last DPoP-Nonce each origin (scheme, host and port)
// sent, for the next proof to that origin (RFC 9449 §8.2, §9). A nonce is
// used only at the server that issued it. The zero value is ready to use and
// safe for concurrent use; a nil *Nonces remembers nothing.
type Nonces struct {
	// Max bounds how many origins are remembered: when one more comes, the
	// origin whose nonce was set longest ago is forgotten. Zero means
	// DefaultMaxNonces.
	Max int

	mu       sync.Mutex
	byOrigin map[string]*list.Element // of *nonceEntry, in order
	order    list.List                // front: the most recently set
}

type nonceEntry struct{ origin, nonce string }

// Get is the nonce last set for u's origin, or "".
func (n *Nonces) Get(u *url.URL) string {
	if n == nil {
		return ""
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e, ok := n.byOrigin[originOf(u)]; ok {
		return e.Value.(*nonceEntry).nonce
	}
	return ""
}

// Set remembers nonce for u's origin. An empty nonce, or a u that is not an
// absolute http(s) URL, changes nothing.
func (n *Nonces) Set(u *url.URL, nonce string) {
	origin := originOf(u)
	if n == nil || nonce == "" || origin == "" {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if e, ok := n.byOrigin[origin]; ok {
		e.Value.(*nonceEntry).nonce = nonce
		n.order.MoveToFront(e)
		return
	}
	if n.byOrigin == nil {
		n.byOrigin = map[string]*list.Element{}
	}
	n.byOrigin[origin] = n.order.PushFront(&nonceEntry{origin, nonce})
	for n.order.Len() > n.max() {
		oldest := n.order.Remove(n.order.Back()).(*nonceEntry)
		delete(n.byOrigin, oldest.origin)
	}
}

func (n *Nonces) max() int {
	if n.Max > 0 {
		return n.Max
	}
	return DefaultMaxNonces
}
