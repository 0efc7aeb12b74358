package oauthtemporal

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oauthflow/oauthflow"
	"github.com/oauthflow/oauthflow/internal/seal"
)

// A stash keeps what must not enter a workflow's history (a callback's
// answer with the sign-in it completes, a device code) in the module's
// store, sealed with the module's key ring when its records are encrypted,
// under a fresh random handle: only the handle crosses into Temporal. A
// stash is redeemed once (GETDEL), and lapses after its TTL.
type stash struct {
	kv   oauthflow.KV
	ring *seal.Ring // nil: the module stores records plain
	ttl  time.Duration
}

func (i *Integration) stash(mod *oauthflow.Module, ttl time.Duration) stash {
	return stash{kv: mod.KV, ring: seal.OfModule(mod), ttl: ttl}
}

// errStashGone means a handle names nothing: it lapsed, was redeemed
// already, or was never issued.
var errStashGone = errors.New("oauthtemporal: the handle names nothing: expired or already used")

// handleLen is the length of a handle: rand.Text's 26 base32 characters.
const handleLen = 26

// stashKey names a stashed record; "oauth:sys:" is the store's place for
// records of the library's own subsystems.
func stashKey(handle string) string { return "oauth:sys:temporal:" + handle }

// validHandle reports whether h has the form of a handle put issues.
func validHandle(h string) bool {
	if len(h) != handleLen {
		return false
	}
	for i := range len(h) {
		if c := h[i]; !(c >= 'A' && c <= 'Z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}

// put seals v under a new handle and returns the handle.
func (s stash) put(ctx context.Context, v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("oauthtemporal: stash: %w", err)
	}
	handle := rand.Text()
	key := stashKey(handle)
	if err := s.kv.Set(ctx, key, s.ring.Seal(b, key), s.ttl); err != nil {
		return "", err
	}
	return handle, nil
}

// take redeems handle into v: of any number of callers, one gets it.
func (s stash) take(ctx context.Context, handle string, v any) error {
	return s.open(ctx, handle, v, s.kv.GetDel)
}

// read opens handle's record into v and leaves it in place: a device code
// is polled until it is redeemed.
func (s stash) read(ctx context.Context, handle string, v any) error {
	return s.open(ctx, handle, v, s.kv.Get)
}

// open fetches handle's record with fetch and opens it into v.
func (s stash) open(ctx context.Context, handle string, v any, fetch func(context.Context, string) ([]byte, error)) error {
	if !validHandle(handle) {
		return errStashGone
	}
	key := stashKey(handle)
	raw, err := fetch(ctx, key)
	if errors.Is(err, oauthflow.ErrNotFound) {
		return errStashGone
	}
	if err != nil {
		return err
	}
	plain, err := s.ring.Open(raw, key)
	if err != nil {
		return err
	}
	return json.Unmarshal(plain, v)
}

// drop removes handle's record, when it was never redeemed.
func (s stash) drop(ctx context.Context, handle string) {
	_ = s.kv.Del(context.WithoutCancel(ctx), stashKey(handle))
}
