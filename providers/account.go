package providers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// Who signed in: a provider with Config.UserinfoURL reads, once after each
// sign-in, the account its new grant is for (ReadAccount, an optional method
// of oauthflow.Provider), and one with Config.CallbackFields keeps those
// callback parameters with the tokens (CallbackFields).

// maxUserinfoBody bounds what is read of a user-info answer.
const maxUserinfoBody = 256 << 10

// ReadsAccount reports whether ReadAccount calls an endpoint: whether
// Config.UserinfoURL is set. oauthflow asks no account of a provider that
// answers false.
func (p *OAuth2) ReadsAccount() bool { return p.cfg.UserinfoURL != "" }

// ReadAccount calls Config.UserinfoURL with client (which sends the new
// grant's token) and returns the value at Config.AccountField in the JSON
// answer: a string, or a number as its text. A provider without a user-info
// endpoint returns "" and no error; a refusal, an answer that is not JSON or
// one without the field is an error.
func (p *OAuth2) ReadAccount(ctx context.Context, client *http.Client) (string, error) {
	if p.cfg.UserinfoURL == "" {
		return "", nil
	}
	method := p.cfg.UserinfoMethod
	if method == "" {
		method = http.MethodGet
	}
	req, err := http.NewRequestWithContext(ctx, method, p.cfg.UserinfoURL, nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Accept", "application/json")
	for _, k := range slices.Sorted(maps.Keys(p.cfg.UserinfoHeaders)) {
		req.Header.Set(k, p.cfg.UserinfoHeaders[k])
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUserinfoBody))
	if err != nil {
		return "", err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return "", fmt.Errorf("providers: %s user info: HTTP %d", p.cfg.ID, resp.StatusCode)
	}
	var doc any
	if err := json.Unmarshal(body, &doc); err != nil {
		return "", fmt.Errorf("providers: %s user info: %w", p.cfg.ID, err)
	}
	account, ok := atPath(doc, p.cfg.AccountField)
	if !ok {
		return "", fmt.Errorf("providers: %s user info has no %q", p.cfg.ID, p.cfg.AccountField)
	}
	return account, nil
}

// atPath is the string or number at the dotted path in a decoded JSON value
// (a numeric segment indexes an array: "emails.0.value").
func atPath(v any, path string) (string, bool) {
	for seg := range strings.SplitSeq(path, ".") {
		switch node := v.(type) {
		case map[string]any:
			v = node[seg]
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(node) {
				return "", false
			}
			v = node[i]
		default:
			return "", false
		}
	}
	switch v := v.(type) {
	case string:
		return v, v != ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), true
	}
	return "", false
}

// CallbackFields are the callback parameters kept with the tokens
// (Config.CallbackFields).
func (p *OAuth2) CallbackFields() []string { return slices.Clone(p.cfg.CallbackFields) }
