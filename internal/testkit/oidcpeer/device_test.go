package oidcpeer_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/oauthflow/oauthflow/internal/testkit/oidcpeer"
	"github.com/oauthflow/oauthflow/internal/testkit/waitfor"
)

const deviceGrant = "urn:ietf:params:oauth:grant-type:device_code"

// deviceClient is one of the peer's device clients, speaking the device
// grant with a plain HTTP client.
type deviceClient struct {
	id, secret string
	post       bool // client_secret_post: the secret goes in the form body
}

var (
	deviceBasic  = deviceClient{id: oidcpeer.DeviceBasicClient, secret: oidcpeer.DeviceBasicSecret}
	devicePost   = deviceClient{id: oidcpeer.DevicePostClient, secret: oidcpeer.DevicePostSecret, post: true}
	devicePublic = deviceClient{id: oidcpeer.DevicePublicClient}
)

// deviceAnswer holds what the device authorization and token endpoints
// answer, success or error.
type deviceAnswer struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int    `json:"expires_in"`
	Interval                int    `json:"interval"`
	AccessToken             string `json:"access_token"`
	RefreshToken            string `json:"refresh_token"`
	TokenType               string `json:"token_type"`
	Error                   string `json:"error"`
}

// call posts form to endpoint, authenticated as c, and returns the HTTP
// status and the answer.
func (c deviceClient) call(t *testing.T, endpoint string, form url.Values) (int, deviceAnswer) {
	t.Helper()
	status, answer, err := c.send(t.Context(), endpoint, form)
	require.NoError(t, err)
	return status, answer
}

// send is call for goroutines other than the test's.
func (c deviceClient) send(ctx context.Context, endpoint string, form url.Values) (int, deviceAnswer, error) {
	var answer deviceAnswer
	if c.secret == "" || c.post {
		form.Set("client_id", c.id)
	}
	if c.secret != "" && c.post {
		form.Set("client_secret", c.secret)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return 0, answer, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if c.secret != "" && !c.post {
		req.SetBasicAuth(url.QueryEscape(c.id), url.QueryEscape(c.secret))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, answer, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return 0, answer, err
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return 0, answer, fmt.Errorf("%s answered HTTP %d: %s: %w", endpoint, resp.StatusCode, body, err)
	}
	return resp.StatusCode, answer, nil
}

// start asks the peer for a device code.
func (c deviceClient) start(t *testing.T, peer *oidcpeer.Peer) deviceAnswer {
	t.Helper()
	status, answer := c.call(t, peer.DeviceAuthURL(), url.Values{"scope": {"openid offline_access read"}})
	require.Equal(t, http.StatusOK, status, "device authorization: %+v", answer)
	require.NotEmpty(t, answer.DeviceCode)
	require.NotEmpty(t, answer.UserCode)
	return answer
}

// poll asks the token endpoint once for the tokens of deviceCode.
func (c deviceClient) poll(t *testing.T, peer *oidcpeer.Peer, deviceCode string) (int, deviceAnswer) {
	t.Helper()
	return c.call(t, peer.Issuer()+"/token", url.Values{"grant_type": {deviceGrant}, "device_code": {deviceCode}})
}

// pollError polls once and checks the peer answers HTTP 400 with want.
func (c deviceClient) pollError(t *testing.T, peer *oidcpeer.Peer, deviceCode, want string) {
	t.Helper()
	status, answer := c.poll(t, peer, deviceCode)
	assert.Equal(t, http.StatusBadRequest, status)
	assert.Equal(t, want, answer.Error, "poll answer: %+v", answer)
}

func TestDeviceMetadata(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	resp, err := http.Get(peer.Issuer() + "/.well-known/openid-configuration")
	require.NoError(t, err)
	defer resp.Body.Close()
	var meta struct {
		DeviceEndpoint string   `json:"device_authorization_endpoint"`
		GrantTypes     []string `json:"grant_types_supported"`
	}
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&meta))
	assert.Equal(t, peer.DeviceAuthURL(), meta.DeviceEndpoint)
	assert.Contains(t, meta.GrantTypes, deviceGrant)
}

// TestDeviceApproved runs the whole grant for each device client, polling
// as often as the peer's answer says (its default, 1 s): every poll is
// answered, none with slow_down.
func TestDeviceApproved(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	for _, c := range []deviceClient{deviceBasic, devicePost, devicePublic} {
		t.Run(c.id, func(t *testing.T) {
			t.Parallel()
			started := c.start(t, peer)
			assert.Equal(t, peer.Issuer()+"/device", started.VerificationURI)
			assert.Equal(t, peer.Issuer()+"/device?user_code="+started.UserCode, started.VerificationURIComplete)
			assert.Equal(t, 600, started.ExpiresIn, "oidc-provider's default lifetime")
			require.Equal(t, 1, started.Interval, "the peer's default interval")
			interval := time.Duration(started.Interval) * time.Second

			c.pollError(t, peer, started.DeviceCode, "authorization_pending")
			peer.ApproveDevice(t, started.UserCode)
			time.Sleep(interval)
			status, tokens := c.poll(t, peer, started.DeviceCode)
			require.Equal(t, http.StatusOK, status, "poll after approval: %+v", tokens)
			assert.Equal(t, "Bearer", tokens.TokenType)
			require.NotEmpty(t, tokens.AccessToken)
			require.NotEmpty(t, tokens.RefreshToken)
			assert.True(t, peer.Introspect(t, tokens.AccessToken, c.id, c.secret), "the device's access token")

			status, refreshed := c.call(t, peer.Issuer()+"/token", url.Values{"grant_type": {"refresh_token"}, "refresh_token": {tokens.RefreshToken}})
			require.Equal(t, http.StatusOK, status, "refresh: %+v", refreshed)
			assert.NotEmpty(t, refreshed.AccessToken)
			assert.NotEqual(t, tokens.AccessToken, refreshed.AccessToken)

			polls := peer.DevicePolls(t, started.DeviceCode)
			require.Len(t, polls, 2, "one poll before the approval, one after")
			assert.GreaterOrEqual(t, polls[1].Sub(polls[0]), interval, "the polls as the peer saw them")
		})
	}
}

func TestDeviceDenied(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	started := devicePublic.start(t, peer)
	peer.DenyDevice(t, started.UserCode)
	devicePublic.pollError(t, peer, started.DeviceCode, "access_denied")
}

// TestDeviceExpired waits out a one-second device code.
func TestDeviceExpired(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{DeviceCodeTTL: time.Second})
	started := deviceBasic.start(t, peer)
	assert.Equal(t, 1, started.ExpiresIn, "expires_in is Options.DeviceCodeTTL")
	time.Sleep(2 * time.Second) // oidc-provider counts in whole seconds
	deviceBasic.pollError(t, peer, started.DeviceCode, "expired_token")
}

// TestDeviceSlowDown: the peer enforces 5 s between polls of one code and
// announces 1 s, so a client polling right away, or after the announced
// interval, is told to slow down. Five seconds leave a loaded machine ample
// room: the second poll of each case comes at most about a second after the
// first.
func TestDeviceSlowDown(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{DeviceInterval: 5 * time.Second, DeviceAnnouncedInterval: time.Second})
	for name, wait := range map[string]time.Duration{"right away": 0, "after the announced interval": time.Second} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			started := devicePost.start(t, peer)
			require.Equal(t, 1, started.Interval, "the announced interval")
			devicePost.pollError(t, peer, started.DeviceCode, "authorization_pending")
			time.Sleep(wait)
			devicePost.pollError(t, peer, started.DeviceCode, "slow_down")
			assert.Len(t, peer.DevicePolls(t, started.DeviceCode), 2, "a slow_down poll is recorded too")
		})
	}
}

// TestDeviceConcurrentPolls polls one code from many goroutines at once:
// exactly one poll is answered, the rest are told to slow down, and the
// peer records each of them.
func TestDeviceConcurrentPolls(t *testing.T) {
	t.Parallel()
	const pollers = 8
	peer := oidcpeer.Start(t, oidcpeer.Options{DeviceInterval: 5 * time.Second})
	started := deviceBasic.start(t, peer)
	var (
		mu      sync.Mutex
		answers = map[string]int{}
		wg      sync.WaitGroup
	)
	form := url.Values{"grant_type": {deviceGrant}, "device_code": {started.DeviceCode}}
	for range pollers {
		wg.Go(func() {
			_, answer, err := deviceBasic.send(t.Context(), peer.Issuer()+"/token", maps.Clone(form))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				answers[err.Error()]++
				return
			}
			answers[answer.Error]++
		})
	}
	waitfor.Group(t, &wg, "the concurrent polls")
	assert.Equal(t, map[string]int{"authorization_pending": 1, "slow_down": pollers - 1}, answers)
	assert.Len(t, peer.DevicePolls(t, started.DeviceCode), pollers)
	assert.Empty(t, peer.DevicePolls(t, "a device code the peer never issued"))
}

// TestDeviceOnlyClient: the device-only clients have no redirect URI, so
// the peer refuses them an authorization request that a client with the
// same redirect URI registered is granted.
func TestDeviceOnlyClient(t *testing.T) {
	t.Parallel()
	peer := oidcpeer.Start(t, oidcpeer.Options{})
	noRedirects := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for _, tt := range []struct {
		client string
		status int
		error  string // in the error page
	}{
		{oidcpeer.DevicePostClient, http.StatusSeeOther, ""},
		{oidcpeer.DeviceBasicClient, http.StatusBadRequest, "invalid_redirect_uri"},
		{oidcpeer.DevicePublicClient, http.StatusBadRequest, "invalid_redirect_uri"},
	} {
		q := url.Values{"client_id": {tt.client}, "response_type": {"code"}, "scope": {"openid"}, "redirect_uri": {redirectURI}}
		resp, err := noRedirects.Get(peer.Issuer() + "/auth?" + q.Encode())
		require.NoError(t, err)
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		assert.Equal(t, tt.status, resp.StatusCode, "%s: %s", tt.client, body)
		assert.Contains(t, string(body), tt.error, tt.client)
	}
}
