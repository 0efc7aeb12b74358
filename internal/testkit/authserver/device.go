package authserver

import (
	"crypto/rand"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// The device authorization grant (RFC 8628): the client asks POST
// /device_authorization for a device code and a user code, the user enters the
// user code at GET /device and allows or denies, and the client polls the token
// endpoint with the device code meanwhile.

// userCodeAlphabet is where user codes are drawn from: consonants without vowels or
// digits, so no word is spelled and no letter is mistaken for another (RFC 8628 §6.1).
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// userCodeLen is the number of letters of a user code: 20^8, about 2^34.6 codes.
const userCodeLen = 8

// Errors of ApproveDevice and DenyDevice.
var (
	ErrUserCodeUnknown  = errors.New("authserver: unknown user code")
	ErrUserCodeExpired  = errors.New("authserver: the user code expired")
	ErrUserCodeAnswered = errors.New("authserver: the user code was already allowed or denied")
)

// deviceState is where a device authorization stands.
type deviceState int

const (
	devicePending  deviceState = iota // the user has not acted
	deviceAllowed                     // the user allowed; the next poll gets the tokens
	deviceDenied                      // the user denied
	deviceRedeemed                    // the tokens were issued
)

// deviceAuth is an issued device code and what it is bound to.
type deviceAuth struct {
	client   *Client
	scope    string
	userCode string // without the hyphen
	user     string // who allowed it
	state    deviceState
	expires  time.Time
	forget   time.Time // when the sweep drops it; until then a poll is answered expired_token
	interval time.Duration
	lastPoll time.Time   // the last poll the server answered itself; zero before the first
	polls    []time.Time // every poll, scripted ones included: the latest maxDevicePolls
}

// deviceResponse is a device authorization answer (RFC 8628 §3.2).
type deviceResponse struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int64  `json:"expires_in"`
	Interval                int64  `json:"interval,omitempty"`
}

// handleDeviceAuthorization answers POST /device_authorization (RFC 8628 §3.1),
// whose client authenticates as at the token endpoint.
func (s *Server) handleDeviceAuthorization(w http.ResponseWriter, r *http.Request) {
	form, client, err := s.authenticatedForm(w, r)
	if err != nil {
		writeOAuthError(w, err)
		return
	}
	deviceCode, userCode := s.addDevice(client, form.Get("scope"))
	s.stats.deviceAuthorizations.Add(1)
	verify := s.issuerFor(r) + PathDevice
	resp := deviceResponse{
		DeviceCode:              deviceCode,
		UserCode:                displayUserCode(userCode),
		VerificationURI:         verify,
		VerificationURIComplete: verify + "?" + url.Values{"user_code": {displayUserCode(userCode)}}.Encode(),
		ExpiresIn:               ceilSeconds(s.opts.DeviceCodeTTL),
	}
	if !s.opts.NoDeviceInterval {
		resp.Interval = ceilSeconds(s.opts.DeviceInterval)
	}
	writeJSON(w, http.StatusOK, resp)
}

// addDevice stores a new device authorization of client for scope and returns its
// device code and user code.
func (s *Server) addDevice(client *Client, scope string) (deviceCode, userCode string) {
	now := s.now()
	ttl := s.opts.DeviceCodeTTL
	d := &deviceAuth{client: client, scope: scope, expires: now.Add(ttl), forget: now.Add(2 * ttl), interval: s.opts.DeviceInterval}
	deviceCode = newSecret()
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	for d.userCode == "" || st.userCodes[d.userCode] != nil {
		d.userCode = newUserCode()
	}
	st.devices[deviceCode] = d
	st.userCodes[d.userCode] = d
	st.addedLocked(now)
	return deviceCode, d.userCode
}

// newUserCode draws userCodeLen letters of userCodeAlphabet, each equally likely.
func newUserCode() string {
	code := make([]byte, 0, userCodeLen)
	var buf [16]byte
	for len(code) < userCodeLen {
		_, _ = rand.Read(buf[:]) // never fails (crypto/rand)
		for _, b := range buf {
			// 240 is the largest multiple of 20 a byte holds: rejecting the rest keeps the draw uniform.
			if b < 240 && len(code) < userCodeLen {
				code = append(code, userCodeAlphabet[b%20])
			}
		}
	}
	return string(code)
}

// displayUserCode is code as shown to the user: XXXX-XXXX.
func displayUserCode(code string) string { return code[:4] + "-" + code[4:] }

// normalizeUserCode is code as the user may have typed it, in upper case without
// hyphens or spaces (RFC 8628 §6.1).
func normalizeUserCode(code string) string {
	return strings.Map(func(r rune) rune {
		if r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToUpper(code))
}

// pendingDeviceLocked returns the device authorization the user code names, if
// the user may still allow or deny it.
func (s *Server) pendingDeviceLocked(userCode string) (*deviceAuth, error) {
	d := s.store.userCodes[normalizeUserCode(userCode)]
	switch {
	case d == nil:
		return nil, ErrUserCodeUnknown
	case !s.now().Before(d.expires):
		return nil, ErrUserCodeExpired
	case d.state != devicePending:
		return nil, ErrUserCodeAnswered
	}
	return d, nil
}

// ApproveDevice allows the device authorization of userCode (as shown, XXXX-XXXX,
// or without the hyphen, in any case) for user, or Options.User when user is
// empty, as the user would on the page at GET /device. The client's next poll
// gets the tokens.
func (s *Server) ApproveDevice(userCode, user string) error {
	if user == "" {
		user = s.opts.User
	}
	return s.decideDevice(userCode, user, true)
}

// DenyDevice denies the device authorization of userCode: the client's polls are
// answered access_denied.
func (s *Server) DenyDevice(userCode string) error { return s.decideDevice(userCode, "", false) }

func (s *Server) decideDevice(userCode, user string, allow bool) error {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	d, err := s.pendingDeviceLocked(userCode)
	if err != nil {
		return err
	}
	if !allow {
		d.state = deviceDenied
		s.stats.deviceDenials.Add(1)
		return nil
	}
	d.state, d.user = deviceAllowed, user
	s.stats.deviceApprovals.Add(1)
	return nil
}
