package oidcpeer

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// requestTimeout bounds each request the harness sends to the peer.
const requestTimeout = 10 * time.Second

// maxHops bounds the redirects Authorize follows.
const maxHops = 20

// DenyNext makes the peer deny the next authorization request it sees
// (error=access_denied), whichever client sends it.
func (p *Peer) DenyNext(t testing.TB) {
	t.Helper()
	resp, err := (&http.Client{Timeout: requestTimeout}).Post(p.issuer+"/__control/deny-next", "text/plain", nil)
	if err != nil {
		t.Fatalf("oidcpeer: deny-next: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("oidcpeer: deny-next: HTTP %d", resp.StatusCode)
	}
}

// Introspect asks the peer's RFC 7662 endpoint whether token is active,
// authenticating as clientID the way the peer registered it: the secret in
// the form for PostClient and for a public client (secret ""), HTTP Basic
// otherwise. A confidential client may introspect any client's token; a
// public client only its own.
func (p *Peer) Introspect(t testing.TB, token, clientID, secret string) (active bool) {
	t.Helper()
	return p.introspect(t, token, clientID, secret).Active
}

// BoundTo returns the thumbprint (RFC 7638) of the key an active token is
// bound to with DPoP, its cnf.jkt (RFC 9449 §6.2), "" when it is a bearer
// token or not active. It authenticates as Introspect does.
func (p *Peer) BoundTo(t testing.TB, token, clientID, secret string) (jkt string) {
	t.Helper()
	answer := p.introspect(t, token, clientID, secret)
	if !answer.Active {
		return ""
	}
	return answer.Cnf.JKT
}

// introspection is the part of an RFC 7662 answer the harness reads.
type introspection struct {
	Active bool `json:"active"`
	Cnf    struct {
		JKT string `json:"jkt"`
	} `json:"cnf"`
}

func (p *Peer) introspect(t testing.TB, token, clientID, secret string) introspection {
	t.Helper()
	form := url.Values{"token": {token}}
	basic := secret != "" && clientID != PostClient
	if !basic {
		form.Set("client_id", clientID)
		if secret != "" {
			form.Set("client_secret", secret)
		}
	}
	return p.postIntrospection(t, form, clientID, func(req *http.Request) {
		if basic {
			req.SetBasicAuth(url.QueryEscape(clientID), url.QueryEscape(secret)) // RFC 6749 §2.3.1
		}
	})
}

// postIntrospection sends form to the introspection endpoint as clientID,
// after authenticate has had its say on the request, and decodes the answer;
// anything but a 200 fails the test.
func (p *Peer) postIntrospection(t testing.TB, form url.Values, clientID string, authenticate func(*http.Request)) introspection {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, p.issuer+"/token/introspection", strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatalf("oidcpeer: introspection request: %v", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	authenticate(req)
	resp, err := (&http.Client{Timeout: requestTimeout}).Do(req)
	if err != nil {
		t.Fatalf("oidcpeer: introspection: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var answer introspection
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &answer) != nil {
		t.Fatalf("oidcpeer: introspection as %s: HTTP %d: %s", clientID, resp.StatusCode, body)
	}
	return answer
}

// Authorize plays the user's browser: starting at authURL it follows every
// redirect, with a cookie jar, until one points at a URL that starts with
// redirectPrefix (the client's redirect URI), and returns that URL unvisited.
// It carries code, state and iss, or error, error_description, state and iss.
// Any other answer fails the test.
func (p *Peer) Authorize(t testing.TB, authURL, redirectPrefix string) *url.URL {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{
		Jar:           jar,
		Timeout:       requestTimeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	next, err := url.Parse(authURL)
	if err != nil {
		t.Fatalf("oidcpeer: authorization URL %q: %v", authURL, err)
	}
	for range maxHops {
		if strings.HasPrefix(next.String(), redirectPrefix) {
			return next
		}
		next = p.hop(t, c, next)
	}
	t.Fatalf("oidcpeer: no redirect to %s within %d hops from %s", redirectPrefix, maxHops, authURL)
	return nil
}

// hop GETs u and returns where its redirect points.
func (p *Peer) hop(t testing.TB, c *http.Client, u *url.URL) *url.URL {
	t.Helper()
	resp, err := c.Get(u.String())
	if err != nil {
		t.Fatalf("oidcpeer: GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	loc := resp.Header.Get("Location")
	if resp.StatusCode < 300 || resp.StatusCode > 399 || loc == "" {
		t.Fatalf("oidcpeer: GET %s: want a redirect, got HTTP %d: %s", u, resp.StatusCode, body)
	}
	next, err := u.Parse(loc)
	if err != nil {
		t.Fatalf("oidcpeer: GET %s: bad Location %q: %v", u, loc, err)
	}
	return next
}
