package oauthflow

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/oauthflow/oauthflow/internal/errs"
	"github.com/oauthflow/oauthflow/internal/keyspace"
	"github.com/oauthflow/oauthflow/internal/kv"
	"github.com/oauthflow/oauthflow/internal/seal"
	"github.com/oauthflow/oauthflow/internal/xcontext"
)

// defaultSessionTTL is how long a pending sign-in waits for its callback.
const defaultSessionTTL = 10 * time.Minute

// SessionService keeps pending sign-ins under their state, each usable once.
type SessionService struct {
	kv   kv.Store
	ttl  time.Duration
	now  func() time.Time
	ring *seal.Ring // seals sessions at rest; nil: plain
}

// sessionOption configures a SessionService. A Module sets its sessions'
// TTL, clock and sealing from its Config (SignInTTL, Now, Encryption).
type sessionOption func(*SessionService)

// withSessionTTL sets how long a pending sign-in lives.
func withSessionTTL(d time.Duration) sessionOption {
	return func(s *SessionService) {
		if d > 0 {
			s.ttl = d
		}
	}
}

// withSessionClock sets the clock used to stamp sessions.
func withSessionClock(now func() time.Time) sessionOption {
	return func(s *SessionService) {
		if now != nil {
			s.now = now
		}
	}
}

// withSessionEncryption seals the sessions this service registers with ring's
// current key (see KeyRing); plain sessions are still read. nil: plain.
func withSessionEncryption(ring *KeyRing) sessionOption {
	checkRing(ring)
	return func(s *SessionService) { s.ring = ring.sealer() }
}

// NewSessionService returns a SessionService over kv.
func NewSessionService(kv KV) *SessionService { return newSessionService(kv) }

// newSessionService is NewSessionService with the settings a Module passes.
func newSessionService(kv KV, opts ...sessionOption) *SessionService {
	s := &SessionService{kv: storeOf(kv), ttl: defaultSessionTTL, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// newState returns 32 random bytes, base64url: unguessable and URL-safe.
func newState() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func checkState(state string) error {
	if state == "" || len(state) > keyspace.MaxStateLen {
		return errs.Invalid("state must be 1 to %d bytes", keyspace.MaxStateLen)
	}
	return nil
}

// Register stores s as the pending sign-in for state. A state is registered once:
// registering it again fails rather than replace a live sign-in.
func (ss *SessionService) Register(ctx context.Context, state string, s Session) error {
	if err := checkState(state); err != nil {
		return err
	}
	if s.UserID == "" || s.Provider == "" {
		return errs.Invalid("session needs a userId and a provider")
	}
	if s.CreatedAt == 0 {
		s.CreatedAt = ss.now().UnixMilli()
	}
	b, err := encodeSession(s)
	if err != nil {
		return errs.Invalid("session: %w", err)
	}
	key := keyspace.Session(state)
	ok, err := ss.kv.SetNX(xcontext.OrBackground(ctx), key, ss.ring.Seal(b, key), ss.ttl)
	if err != nil {
		return errs.Store(ctx, "register session", err)
	}
	if !ok {
		return errs.Invalid("state is already registered")
	}
	return nil
}

// Consume returns the session registered under state and removes it in one atomic
// step: of any number of concurrent callers, exactly one gets it. An unknown,
// expired or used state is ErrSessionNotFound; a store failure is ErrStoreUnavailable.
// A session sealed under a key the ring lacks (ErrUnknownKey) is put back, for
// an instance that has the key, with a full sign-in TTL.
func (ss *SessionService) Consume(ctx context.Context, state string) (*Session, error) {
	return ss.take(ctx, state, true)
}

// peek returns the session registered under state without consuming it.
func (ss *SessionService) peek(ctx context.Context, state string) (*Session, error) {
	return ss.take(ctx, state, false)
}

func (ss *SessionService) take(ctx context.Context, state string, consume bool) (*Session, error) {
	if err := checkState(state); err != nil {
		return nil, ErrSessionNotFound
	}
	ctx, key := xcontext.OrBackground(ctx), keyspace.Session(state)
	read := ss.kv.Get
	if consume {
		read = ss.kv.GetDel
	}
	b, err := read(ctx, key)
	if errors.Is(err, ErrNotFound) {
		return nil, ErrSessionNotFound
	}
	if err != nil {
		return nil, errs.Store(ctx, "read session", err)
	}
	plain, err := ss.ring.Open(b, key)
	if consume && errors.Is(err, ErrUnknownKey) {
		if _, perr := ss.kv.SetNX(ctx, key, b, ss.ttl); perr != nil {
			return nil, fmt.Errorf("%w (and putting it back failed: %w)", err, errs.Store(ctx, "restore session", perr))
		}
	}
	if err != nil {
		return nil, err
	}
	return decodeSession(plain)
}

func encodeSession(s Session) ([]byte, error) { return json.Marshal(s) }

// decodeSession reads a stored session: the form encodeSession writes on a
// hand-written fast path (Consume runs on every callback, and encoding/json
// with DisallowUnknownFields costs microseconds and a dozen allocations), any
// other form through the strict decoder. Both accept and refuse the same
// inputs (FuzzDecodeSession compares them).
func decodeSession(b []byte) (*Session, error) {
	s, ok := fastDecodeSession(b)
	if !ok {
		s = new(Session)
		if err := strictUnmarshal(b, s); err != nil {
			return nil, err
		}
	}
	if s.UserID == "" || s.Provider == "" {
		return nil, fmt.Errorf("%w: session lacks userId or provider", errCorruptRecord)
	}
	return s, nil
}

// fastDecodeSession parses exactly what json.Marshal writes for a Session: the
// fields in declaration order, the omitempty ones optional, no white space,
// strings of ASCII without escapes or control bytes. Anything else returns
// ok=false, for the strict decoder.
func fastDecodeSession(b []byte) (*Session, bool) {
	p := fastParser{b: b, ok: true}
	var s Session
	p.lit(`{"workflowId":`)
	s.WorkflowID = string(p.str())
	p.lit(`,"userId":`)
	s.UserID = string(p.str())
	p.lit(`,"provider":`)
	s.Provider = string(p.str())
	s.CodeVerifier = p.optStr(`,"codeVerifier":`)
	if p.peekLit(`,"scopes":`) {
		s.Scopes = p.strList()
	}
	s.RedirectURL = p.optStr(`,"redirectUrl":`)
	s.Issuer = p.optStr(`,"issuer":`)
	s.IssOptional = p.peekLit(`,"issOptional":true`) // omitempty: only ever true
	if p.peekLit(`,"createdAt":`) {
		s.CreatedAt = p.int()
	}
	s.Binding = p.optStr(`,"binding":`)
	s.DPoPKey = p.optStr(`,"dpopKey":`)
	p.lit(`}`)
	return &s, p.ok && p.i == len(p.b)
}

// optStr reads the string after key when key comes next, "" otherwise.
func (p *fastParser) optStr(key string) string {
	if !p.peekLit(key) {
		return ""
	}
	return string(p.str())
}

// strList reads a non-empty array of strings; json.Marshal omits an empty one.
func (p *fastParser) strList() []string {
	p.lit(`[`)
	list := []string{string(p.str())}
	for p.ok && p.peekLit(`,`) {
		list = append(list, string(p.str()))
	}
	p.lit(`]`)
	return list
}
