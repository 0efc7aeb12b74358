package oidcpeer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// DeviceAuthURL returns the peer's device authorization endpoint (RFC 8628
// §3.1). Its answers carry verification_uri (the peer's /device page),
// verification_uri_complete, expires_in (Options.DeviceCodeTTL) and interval
// (Options.DeviceInterval or Options.DeviceAnnouncedInterval).
func (p *Peer) DeviceAuthURL() string { return p.issuer + "/device/auth" }

// ApproveDevice plays the user on another device: it opens the peer's
// /device page, enters userCode, confirms it, and goes through the peer's
// automatic login and consent to the page that says the device is signed
// in. The device's next poll gets tokens. Any other answer fails the test.
// Like every helper that can fail the test, it must run on the test's
// goroutine.
func (p *Peer) ApproveDevice(t testing.TB, userCode string) {
	t.Helper()
	if page := p.answerDevice(t, userCode, url.Values{"confirm": {"yes"}}); page.name != "success" || page.err != "" {
		t.Fatalf("oidcpeer: approving user code %s: want the success page, got %s", userCode, page)
	}
}

// DenyDevice plays the user on another device who refuses: it opens the
// peer's /device page, enters userCode and presses abort on the
// confirmation page, which brings the user back to the code entry page. The
// device's next poll gets access_denied. Any other answer fails the test.
func (p *Peer) DenyDevice(t testing.TB, userCode string) {
	t.Helper()
	if page := p.answerDevice(t, userCode, url.Values{"confirm": {"yes"}, "abort": {"yes"}}); page.name != "input" || page.err != "AbortedError" {
		t.Fatalf("oidcpeer: denying user code %s: want the code entry page after an abort, got %s", userCode, page)
	}
}

// answerDevice enters userCode on the /device page, checks that the peer
// asks to confirm it, and submits the confirmation page's form with answer
// added, following redirects with a cookie jar as a browser would.
func (p *Peer) answerDevice(t testing.TB, userCode string, answer url.Values) devicePage {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: requestTimeout}
	page := p.devicePage(t, c, http.MethodGet, nil)
	if page.name != "input" || page.err != "" || page.xsrf == "" {
		t.Fatalf("oidcpeer: GET /device: want the code entry page, got %s", page)
	}
	page = p.devicePage(t, c, http.MethodPost, url.Values{"xsrf": {page.xsrf}, "user_code": {userCode}})
	if page.name != "confirm" || page.err != "" || page.xsrf == "" {
		t.Fatalf("oidcpeer: entering user code %s: want the confirmation page, got %s", userCode, page)
	}
	answer.Set("xsrf", page.xsrf)
	answer.Set("user_code", userCode)
	return p.devicePage(t, c, http.MethodPost, answer)
}

// devicePage is one of the peer's device pages: which one (its
// X-Device-Page header), the error it shows (X-Device-Error) and the xsrf
// token of its form.
type devicePage struct {
	name, err, xsrf string
	body            []byte
}

func (d devicePage) String() string {
	return "page " + strings.TrimSpace(d.name+" "+d.err) + ": " + string(d.body)
}

// xsrfField finds the hidden xsrf field of oidc-provider's device forms.
var xsrfField = regexp.MustCompile(`name="xsrf" value="([^"]*)"`)

// devicePage sends form to /device (a GET when form is nil) and returns the
// page it ends at; anything but a 200 fails the test.
func (p *Peer) devicePage(t testing.TB, c *http.Client, method string, form url.Values) devicePage {
	t.Helper()
	req, err := http.NewRequest(method, p.issuer+"/device", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("oidcpeer: device page request: %v", err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("oidcpeer: %s /device: %v", method, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("oidcpeer: %s /device ended at %s with HTTP %d: %s", method, resp.Request.URL, resp.StatusCode, body)
	}
	page := devicePage{name: resp.Header.Get("X-Device-Page"), err: resp.Header.Get("X-Device-Error"), body: body}
	if m := xsrfField.FindSubmatch(body); m != nil {
		page.xsrf = string(m[1])
	}
	return page
}

// DevicePolls returns when the peer's token endpoint was polled with
// deviceCode, oldest first, as the peer's clock read them: every
// device_code token request of an authenticated client, those answered
// slow_down included. The peer keeps a hash of each code, never the code,
// and DevicePolls sends it the hash.
func (p *Peer) DevicePolls(t testing.TB, deviceCode string) []time.Time {
	t.Helper()
	sum := sha256.Sum256([]byte(deviceCode))
	u := p.issuer + "/__control/device-polls?code=" + hex.EncodeToString(sum[:])
	resp, err := (&http.Client{Timeout: requestTimeout}).Get(u)
	if err != nil {
		t.Fatalf("oidcpeer: device polls: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var answer struct {
		Polls []float64 `json:"polls"` // ms since the epoch
	}
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil {
		t.Fatalf("oidcpeer: device polls: HTTP %d: %s", resp.StatusCode, body)
	}
	polls := make([]time.Time, len(answer.Polls))
	for i, ms := range answer.Polls {
		polls[i] = time.UnixMicro(int64(math.Round(ms * 1000)))
	}
	return polls
}
