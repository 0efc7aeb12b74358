package authserver

import (
	"crypto/rand"
	"sync"
	"time"
)

// sweepEvery is how many new codes and tokens pass between sweeps of expired records.
const sweepEvery = 512

// grant ties together the tokens issued from one authorization code, so that a
// code replay or a refresh-token reuse can revoke them all.
type grant struct {
	revoked bool
	jkt     string // the DPoP key its code exchange proved, which its refresh tokens are bound to
	details []byte // the authorization details granted (RFC 9396); nil for none
}

// authCode is an issued authorization code and what it is bound to.
type authCode struct {
	req     authRequest
	expires time.Time
	used    bool
	grant   *grant
}

// token is an issued access or refresh token.
type token struct {
	clientID, user, scope string
	issued, expires       time.Time // a zero expires never comes
	rotated, revoked      bool
	grant                 *grant
	jkt                   string // the thumbprint of the DPoP key it is bound to; "" for a bearer token
}

func (t *token) expired(now time.Time) bool { return !t.expires.IsZero() && !now.Before(t.expires) }

// active reports whether t may still be used.
func (t *token) active(now time.Time) bool {
	return !t.revoked && !t.rotated && !t.grant.revoked && !t.expired(now)
}

// store holds codes, tokens, pending consents and device authorizations behind one mutex.
type store struct {
	mu        sync.Mutex
	codes     map[string]*authCode
	access    map[string]*token
	refresh   map[string]*token
	consents  map[string]*authRequest
	devices   map[string]*deviceAuth    // by device code
	userCodes map[string]*deviceAuth    // the same, by user code
	pushed    map[string]*pushedRequest // by request_uri (RFC 9126)
	added     int

	minPollGap  time.Duration // the least time between two polls of one device code
	pollGapSeen bool          // whether some device code was polled twice
}

func newStore() store {
	return store{
		codes:     map[string]*authCode{},
		access:    map[string]*token{},
		refresh:   map[string]*token{},
		consents:  map[string]*authRequest{},
		devices:   map[string]*deviceAuth{},
		userCodes: map[string]*deviceAuth{},
		pushed:    map[string]*pushedRequest{},
	}
}

// newSecret returns a random, unguessable string for a code, token or consent ID.
func newSecret() string { return rand.Text() }

// addedLocked notes one new record and sweeps expired ones now and then.
func (st *store) addedLocked(now time.Time) {
	st.added++
	if st.added%sweepEvery == 0 {
		st.sweepLocked(now)
	}
}

// sweepLocked forgets expired records; they would be refused anyway.
func (st *store) sweepLocked(now time.Time) {
	for k, c := range st.codes {
		if !now.Before(c.expires) {
			delete(st.codes, k)
		}
	}
	for k, r := range st.consents {
		if !now.Before(r.expires) {
			delete(st.consents, k)
		}
	}
	for k, p := range st.pushed {
		if !now.Before(p.expires) {
			delete(st.pushed, k)
		}
	}
	for k, d := range st.devices {
		if !now.Before(d.forget) {
			delete(st.devices, k)
			delete(st.userCodes, d.userCode)
		}
	}
	sweepTokens(st.access, now)
	sweepTokens(st.refresh, now)
}

func sweepTokens(m map[string]*token, now time.Time) {
	for k, t := range m {
		if t.expired(now) {
			delete(m, k)
		}
	}
}

// addCode stores a new code for req and returns it.
func (s *Server) addCode(req *authRequest) string {
	code := newSecret()
	now := s.now()
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	st.codes[code] = &authCode{req: *req, expires: now.Add(s.opts.CodeTTL), grant: &grant{}}
	st.addedLocked(now)
	return code
}

// issueLocked makes an access token, and a refresh token when withRefresh, for g.
// The access token is bound to proto.jkt, the refresh token to g's key.
func (s *Server) issueLocked(proto token, g *grant, withRefresh bool) tokenResponse {
	now := s.now()
	proto.grant, proto.issued = g, now
	resp := tokenResponse{AccessToken: newSecret(), TokenType: tokenType(proto.jkt), Scope: proto.scope}
	at := proto
	at.expires, resp.ExpiresIn = expiry(now, s.opts.AccessTokenTTL)
	s.store.access[resp.AccessToken] = &at
	s.store.addedLocked(now)
	if withRefresh && !s.opts.NoRefreshToken {
		resp.RefreshToken = newSecret()
		rt := proto
		rt.jkt = g.jkt
		rt.expires, _ = expiry(now, s.opts.RefreshTokenTTL)
		s.store.refresh[resp.RefreshToken] = &rt
		s.store.addedLocked(now)
	}
	return resp
}

// expiry returns when a token made now with ttl expires (zero: never) and its
// lifetime in whole seconds, rounded up (0: never).
func expiry(now time.Time, ttl time.Duration) (time.Time, int64) {
	if ttl < 0 {
		return time.Time{}, 0
	}
	return now.Add(ttl), ceilSeconds(ttl)
}

// ceilSeconds is d in whole seconds, rounded up.
func ceilSeconds(d time.Duration) int64 { return int64((d + time.Second - 1) / time.Second) }
