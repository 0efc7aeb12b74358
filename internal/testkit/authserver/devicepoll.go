package authserver

import (
	"net/http"
	"net/url"
	"slices"
	"time"
)

// slowDownStep is how much a device code's interval grows at each slow_down
// answer (RFC 8628 §3.5).
const slowDownStep = 5 * time.Second

// maxDevicePolls bounds the poll times kept for one device code: the latest ones.
const maxDevicePolls = 1024

// pollDevice runs the device_code grant (RFC 8628 §3.4, §3.5). The device code is
// redeemed once: a poll after the tokens were issued is invalid_grant, and leaves
// them alone, for it is what a second client instance polling the same code sends.
// jkt is the key the request proved ("" for none): the grant is bound to it.
func (s *Server) pollDevice(client *Client, form url.Values, jkt string) (*tokenResponse, *oauthError) {
	code := form.Get("device_code")
	if code == "" {
		return nil, errInvalidRequest("device_code is missing")
	}
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	d := st.devices[code]
	if d == nil || d.client != client {
		return nil, errInvalidGrant("the device code is unknown or was issued to another client")
	}
	if err := s.checkPoll(d); err != nil {
		return nil, err
	}
	d.state = deviceRedeemed
	resp := s.issueLocked(token{clientID: client.ID, user: d.user, scope: d.scope, jkt: jkt}, &grant{jkt: jkt}, true)
	s.stats.deviceTokens.Add(1)
	return &resp, nil
}

// checkPoll returns the error that answers a poll of d, or nil when the user
// allowed it and its tokens may be issued.
func (s *Server) checkPoll(d *deviceAuth) *oauthError {
	now := s.now()
	switch {
	case d.state == deviceRedeemed:
		s.stats.deviceRedeemedPolls.Add(1)
		return errInvalidGrant("the device code was already used")
	case !now.Before(d.expires):
		s.stats.deviceExpiries.Add(1)
		return newError(http.StatusBadRequest, "expired_token", "the device code expired")
	case s.tooSoon(d, now):
		s.stats.deviceSlowDowns.Add(1)
		return newError(http.StatusBadRequest, "slow_down", "poll less often")
	case d.state == devicePending:
		s.stats.devicePending.Add(1)
		return newError(http.StatusBadRequest, "authorization_pending", "the user has not acted yet")
	case d.state == deviceDenied:
		return newError(http.StatusBadRequest, "access_denied", "the user denied the request")
	}
	return nil
}

// tooSoon notes a poll of d at now and reports whether it must slow down: it came
// before d's interval had passed since the previous one, or SlowDownNext asked.
// Then d's interval grows by slowDownStep.
func (s *Server) tooSoon(d *deviceAuth, now time.Time) bool {
	last := d.lastPoll
	d.lastPoll = now
	forced := takeOne(&s.slowDownNext)
	if !forced && (last.IsZero() || now.Sub(last) >= d.interval) {
		return false
	}
	d.interval += slowDownStep
	return true
}

// SlowDownNext makes the next device poll that would be answered
// authorization_pending, access_denied or tokens be answered slow_down instead,
// and grows the polled code's interval by 5 seconds as a poll that came too soon
// would. Calls add up.
func (s *Server) SlowDownNext() { s.slowDownNext.Add(1) }

// notePoll records a poll of deviceCode, if the server issued it, before any
// scripted failure answers it.
func (s *Server) notePoll(deviceCode string) {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	d := st.devices[deviceCode]
	if d == nil {
		return
	}
	now := s.now()
	if n := len(d.polls); n > 0 {
		gap := now.Sub(d.polls[n-1])
		if !st.pollGapSeen || gap < st.minPollGap {
			st.minPollGap, st.pollGapSeen = gap, true
		}
	}
	if len(d.polls) == maxDevicePolls {
		d.polls = d.polls[1:]
	}
	d.polls = append(d.polls, now)
}

// DevicePollTimes returns when each poll of deviceCode reached the token endpoint
// (by the server's clock, scripted failures included; the latest 1024), or nil
// for a device code the server does not know.
func (s *Server) DevicePollTimes(deviceCode string) []time.Time {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	if d := st.devices[deviceCode]; d != nil {
		return slices.Clone(d.polls)
	}
	return nil
}

// DevicePollGap returns the least time between two consecutive polls of one device
// code, over every device code the server issued (by its clock, scripted failures
// included); ok is false until some device code has been polled twice.
func (s *Server) DevicePollGap() (gap time.Duration, ok bool) {
	st := &s.store
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.minPollGap, st.pollGapSeen
}
